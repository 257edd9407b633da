"""The page's data blocks: no text can leave its `<script>` element, and the data reads back unchanged."""

from __future__ import annotations

import base64
import gzip
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from picontext import _json
from picontext.viewer import page
from picontext.viewer.page import embed_json, pack, pack_lines, render_page

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


@given(st.lists(st.binary(max_size=300) | st.sampled_from([b"", b"{}", b"x" * 70_000]), max_size=40),
       st.integers(1, 5))
def test_lines_packed_piece_by_piece_are_the_joined_lines_packed(lines: list[bytes], per_piece: int) -> None:
    """The export packs its lines a few at a time (`pack_lines`); the page must be the same bytes
    as packing them joined, however the pieces fall (empty lines, long ones, none at all)."""
    original = page._LINES_PER_PIECE
    page._LINES_PER_PIECE = per_piece
    try:
        assert pack_lines(lines).decode("ascii") == pack(b"\n".join(lines))
    finally:
        page._LINES_PER_PIECE = original


def test_a_large_export_packed_piece_by_piece_is_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of a few thousand lines of a few MB of varied text: deflate's window and blocks
    span pieces (the size the export uses, and smaller ones)."""
    import random

    rng = random.Random(5)
    words = [bytes(rng.choices(b"abcdefghij {}\":,0123456789", k=rng.randrange(1, 30))) for _ in range(500)]
    lines = [b" ".join(rng.choices(words, k=rng.randrange(1, 200))) for _ in range(20_000)]
    expected = pack(b"\n".join(lines))
    for per_piece in (page._LINES_PER_PIECE, 700):
        monkeypatch.setattr(page, "_LINES_PER_PIECE", per_piece)
        assert pack_lines(lines).decode("ascii") == expected


def test_session_text_cannot_fill_the_template_placeholders() -> None:
    meta = {"previews": ["{{JS}} {{CSS}} {{LINES}} {{META}} </script>"]}
    page = render_page(meta, [b'{"text": "{{JS}} {{LINES}}"}'])
    assert page.count("<script") == 3 and page.count("</script>") == 3
    assert "{{JS}} {{CSS}} {{LINES}} {{META}} \\u003c/script\\u003e" in page  # left as text, not filled in
