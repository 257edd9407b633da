"""Untrusted text on its way to a terminal (see cli/render.py): control characters made visible,
lone surrogates replaced. No rich here: `cli/main.py` installs `safe_output` for every command
and must not pay for importing rich when printing JSON."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

# C0 controls but tab and newline, DEL, C1 controls (U+0080..U+009F, incl. the 8-bit CSI).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def neutralize(text: str) -> str:
    """`text` safe for a terminal: control characters shown as `\\x1b`, lone surrogates as U+FFFD."""
    if text.isascii() and text.isprintable():
        return text
    return _SURROGATE.sub("\ufffd", _CONTROL.sub(_escape, text))


class SafeWriter:
    """A text stream that neutralizes what is written to it; everything else (`buffer`,
    `fileno`, `isatty`, `encoding`) is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.raw_stream = stream

    def write(self, text: str) -> int:
        self.raw_stream.write(neutralize(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw_stream, name)


def raw(stream: Any) -> Any:
    return stream.raw_stream if isinstance(stream, SafeWriter) else stream


@contextlib.contextmanager
def safe_output(stdout: bool = True) -> Iterator[None]:
    """Neutralize text written to stderr (and to stdout when `stdout`) for the duration."""
    saved = sys.stdout, sys.stderr
    if stdout and not isinstance(sys.stdout, SafeWriter):
        sys.stdout = SafeWriter(sys.stdout)
    if not isinstance(sys.stderr, SafeWriter):
        sys.stderr = SafeWriter(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


