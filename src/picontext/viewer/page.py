"""One self-contained HTML page from the view data: CSS, script and data inlined, nothing fetched.

Session text reaches the page only inside two non-executable `<script>` elements: the compact
meta as JSON with `<`, `>`, `&` and the line separators written as `\\u` escapes, the entries as
base64 of gzip-compressed JSON lines (inflated by the browser's `DecompressionStream` after the
first paint). No character of the data can close the element or open a tag.
The script renders with DOM text APIs only, and a Content-Security-Policy allows exactly the
page's own script (by hash) and no network except, for `picontext serve`, the page's own origin.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import threading
import zlib
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import Any

from picontext import __version__, _json

__all__ = ["embed_json", "embedded_json", "pack", "pack_in_background", "pack_lines", "render_page",
           "render_page_bytes", "render_page_parts"]


def pack(data: bytes) -> str:
    """base64(gzip(data)): what the page's `unpack` reads back (fixed mtime: same input, same page).

    Level 3: a 90 MB session packs in ~2.5 s to 14 MB; level 6 takes ~4x longer for 12 MB."""
    return _pack(data).decode("ascii")


def _pack(data: bytes) -> bytes:
    return base64.b64encode(gzip.compress(data, compresslevel=3, mtime=0))


_LINES_PER_PIECE = 8192


def pack_lines(lines: Sequence[bytes]) -> bytes:
    """`pack` (as bytes) of the lines joined by newlines, without joining them all first: the
    deflate stream is fed a few thousand lines (a few MB) at a time. zlib's output does not
    depend on how its input is cut (what `gzip.compress` writes with mtime 0 is `zlib.compress`
    with the gzip wrapper, `wbits=31`); a 100k-entry export never holds its 64 MB of lines
    joined. Pieces of a few MB, not a few lines: each compress call gives up the GIL and takes
    it back, a wait of up to the switch interval when the walk runs beside it (512-line pieces
    made ~1,400 thread switches per export)."""
    deflate = zlib.compressobj(3, zlib.DEFLATED, 31)
    out: list[bytes] = []
    for start in range(0, len(lines), _LINES_PER_PIECE):
        piece = lines[start:start + _LINES_PER_PIECE]
        # (after the first piece, an empty first line: the newline before the piece)
        out.append(deflate.compress(b"\n".join([b"", *piece] if start else piece)))
    out.append(deflate.flush())
    return base64.b64encode(b"".join(out))


def pack_in_background(data: bytes | Sequence[bytes]) -> Callable[[], bytes]:
    """`pack(data)` started now in a thread (zlib compresses without holding the GIL, so it runs
    beside the work that builds the meta); `data` may be the lines, not joined yet
    (`pack_lines`). The returned function waits for it and returns it (or raises what the
    packing raised)."""
    done: list[bytes] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(_pack(data) if isinstance(data, bytes) else pack_lines(data))
        except BaseException as exc:  # handed to the caller, who waits for the result
            failed.append(exc)

    thread = threading.Thread(target=run, name="picontext-pack", daemon=True)
    thread.start()

    def result() -> bytes:
        thread.join()
        if failed:
            raise failed[0]
        return done[0]

    return result


_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
            ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def embed_json(data: bytes) -> str:
    """JSON text that cannot end a `<script>` element or open a tag (still the same JSON: those
    characters can only occur inside strings, where the escapes mean the same)."""
    return embedded_json(data).decode("utf-8")


def embedded_json(data: bytes) -> bytes:
    """`embed_json` as bytes. Made piece by piece, the pieces of one JSON text join into the
    whole's (each replaced character is whole inside one piece)."""
    for raw, escaped in _ESCAPES:  # bytes.replace runs in C: 16 MB of meta in milliseconds
        data = data.replace(raw, escaped)
    return data


@cache
def _asset(name: str) -> str:
    return resources.files("picontext.viewer").joinpath("assets", name).read_text(encoding="utf-8")


def render_page(meta: dict[str, Any], lines: list[bytes] | bytes, *, live_url: str | None = None, stamp: str = "",
                packed: bytes | None = None) -> str:
    """The page; with `live_url` it polls that URL (same origin) and redraws when the session grows.
    `lines`: the entries' JSON lines, or already joined by newlines; `packed`: `pack` of them (as
    bytes) when the caller has it already (`pack_in_background`)."""
    return render_page_bytes(meta, lines, live_url=live_url, stamp=stamp, packed=packed).decode("utf-8")


def render_page_bytes(meta: dict[str, Any] | bytes, lines: list[bytes] | bytes, *, live_url: str | None = None,
                      stamp: str = "", packed: bytes | None = None) -> bytes:
    """`render_page` encoded as UTF-8, put together as bytes (a large page is never held as text);
    `meta` may be given as its JSON already made safe by `embedded_json`."""
    return b"".join(render_page_parts(meta, lines, live_url=live_url, stamp=stamp, packed=packed))


def render_page_parts(meta: dict[str, Any] | bytes | list[bytes | memoryview], lines: list[bytes] | bytes, *,
                      live_url: str | None = None, stamp: str = "",
                      packed: bytes | memoryview | None = None) -> list[bytes | memoryview]:
    """`render_page_bytes` in the pieces that make it, for a caller that writes them out as they
    are (a 100k-entry export's page is ~40 MB: joining it is one more copy); `meta` may also be
    the pieces of its safe JSON."""
    script = _asset("viewer.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    connect = "'self'" if live_url else "'none'"
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
           f"connect-src {connect}; base-uri 'none'; form-action 'none'")
    attrs = ""
    if live_url:
        attrs = f' data-live="{html.escape(live_url, quote=True)}" data-stamp="{html.escape(stamp, quote=True)}"'
    page = _asset("page.html")
    # Data last: replacing into it could otherwise substitute placeholders that session text contains.
    for key, value in (("CSP", html.escape(csp, quote=True)), ("VERSION", __version__), ("CSS", _asset("viewer.css")),
                       ("BODY_ATTRS", attrs), ("JS", script)):
        page = page.replace("{{" + key + "}}", value)
    head, _, rest = page.partition("{{META}}")
    middle, _, tail = rest.partition("{{LINES}}")
    if packed is None:
        packed = _pack(lines if isinstance(lines, bytes) else b"\n".join(lines))
    embedded: list[bytes | memoryview]
    if isinstance(meta, list):
        embedded = meta
    else:
        embedded = [meta if isinstance(meta, bytes) else embedded_json(_json.dumps(meta))]
    return [head.encode("utf-8"), *embedded, middle.encode("utf-8"), packed, tail.encode("utf-8")]
