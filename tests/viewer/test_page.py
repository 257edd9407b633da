"""The page's data blocks: no text can leave its `<script>` element, and the data reads back unchanged."""

from __future__ import annotations

import base64
import gzip
import json

from hypothesis import given
from hypothesis import strategies as st

from picontext import _json
from picontext.viewer.page import embed_json, pack, render_page

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(alphabet=st.sampled_from(
        "<>&/!-\\\"'\u2028\u2029\x00\x1b\n abcscriptSCRIPT")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@given(json_values)
def test_embedded_json_has_no_markup_and_reads_back(value: object) -> None:
    text = embed_json(_json.dumps(value))
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == value


@given(st.binary(max_size=200))
def test_packed_data_is_base64_of_gzip(data: bytes) -> None:
    packed = pack(data)
    assert set(packed) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    assert gzip.decompress(base64.b64decode(packed)) == data


def test_session_text_cannot_fill_the_template_placeholders() -> None:
    meta = {"previews": ["{{JS}} {{CSS}} {{LINES}} {{META}} </script>"]}
    page = render_page(meta, [b'{"text": "{{JS}} {{LINES}}"}'])
    assert page.count("<script") == 3 and page.count("</script>") == 3
    assert "{{JS}} {{CSS}} {{LINES}} {{META}} \\u003c/script\\u003e" in page  # left as text, not filled in
