"""Output truncation shared by the tools (Pi tools/truncate.ts, behaviour only).

Two limits, whichever is hit first: lines and bytes (UTF-8). `truncate_head` keeps the start
(file reads: continue with an offset), `truncate_tail` keeps the end (command output: the last
lines matter most). Partial lines are never emitted, except when a single line alone exceeds
the byte limit in `truncate_tail` (its end is kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "GREP_MAX_LINE_LENGTH",
    "Truncation",
    "format_size",
    "truncate_head",
    "truncate_line",
    "truncate_tail",
]

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_LENGTH = 500


@dataclass(frozen=True, slots=True)
class Truncation:
    """The kept text and what was cut. `first_line_exceeds_limit`: head mode kept nothing because
    the first line alone is over the byte limit."""

    content: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    max_lines: int
    max_bytes: int
    first_line_exceeds_limit: bool = False

    def as_details(self) -> dict[str, object]:
        return {
            "truncated": self.truncated,
            "truncatedBy": self.truncated_by,
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
        }


def format_size(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f}KB"
    return f"{n / (1024 * 1024):.1f}MB"


def _size(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _split(text: str) -> list[str]:
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a trailing newline does not start another line
    return lines


def truncate_head(text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES) -> Truncation:
    """Keep whole lines from the start within both limits."""
    lines = _split(text)
    total_bytes = _size(text)
    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return Truncation(text, False, None, len(lines), total_bytes, len(lines), total_bytes, max_lines, max_bytes)
    if lines and _size(lines[0]) > max_bytes:
        return Truncation("", True, "bytes", len(lines), total_bytes, 0, 0, max_lines, max_bytes, True)
    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in lines:
        if len(kept) >= max_lines:
            by = "lines"
            break
        cost = _size(line) + (1 if kept else 0)
        if used + cost > max_bytes:
            by = "bytes"
            break
        kept.append(line)
        used += cost
    out = "\n".join(kept)
    return Truncation(out, True, by, len(lines), total_bytes, len(kept), _size(out), max_lines, max_bytes)


def truncate_tail(text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES) -> Truncation:
    """Keep whole lines from the end within both limits (the end of one huge line if need be)."""
    lines = _split(text)
    total_bytes = _size(text)
    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return Truncation(text, False, None, len(lines), total_bytes, len(lines), total_bytes, max_lines, max_bytes)
    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in reversed(lines):
        if len(kept) >= max_lines:
            by = "lines"
            break
        cost = _size(line) + (1 if kept else 0)
        if used + cost > max_bytes:
            by = "bytes"
            if not kept:  # a single line over the limit: keep its end
                tail = line.encode("utf-8", "surrogatepass")[-max_bytes:].decode("utf-8", "ignore")
                kept.append(tail)
            break
        kept.append(line)
        used += cost
    out = "\n".join(reversed(kept))
    return Truncation(out, True, by, len(lines), total_bytes, len(kept), _size(out), max_lines, max_bytes)


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_LENGTH) -> tuple[str, bool]:
    """`line` cut to `max_chars` characters with a marker; (text, was_truncated)."""
    if len(line) <= max_chars:
        return line, False
    return line[:max_chars] + "... [truncated]", True
