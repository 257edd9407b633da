"""Keys typed while the model works (a reply, a compaction, a branch summary).

The terminal is put in raw mode, so nothing typed is echoed into the streamed reply; the keys are
parsed by prompt_toolkit's VT100 parser and handed to the chat as actions:

    Esc or Ctrl+C   abort the running work
    Enter           send the typed text as a steering message (delivered after the current tool calls)
    Alt+Enter       send it as a follow-up (delivered when the agent would stop)
    Ctrl+O          show the last collapsed tool output in full
    Backspace, Ctrl+U, Ctrl+W   edit the typed text

Whatever is typed and not sent goes back into the prompt's editor when the work ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator

from prompt_toolkit.input import create_input
from prompt_toolkit.keys import Keys

# A lone Esc is only known to be lone when nothing follows it (escape sequences start with Esc).
_ESC_WAIT = 0.05


class TypeAhead:
    def __init__(self, *, on_abort: Callable[[], None], on_send: Callable[[str, str], bool],
                 on_change: Callable[[str], None], on_expand: Callable[[], None]) -> None:
        self.text = ""
        self._on_abort = on_abort
        self._on_send = on_send  # (mode "steer" | "followUp", text) -> taken (else the text stays)
        self._on_change = on_change
        self._on_expand = on_expand
        self._flush: asyncio.TimerHandle | None = None
        self._input = None

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Read keys while the block runs (only on a terminal)."""
        if not sys.stdin.isatty():
            yield
            return
        inp = create_input(sys.stdin)
        self._input = inp  # type: ignore[assignment]
        try:
            with inp.raw_mode(), inp.attach(self._ready):
                yield
        finally:
            if self._flush is not None:
                self._flush.cancel()
                self._flush = None
            self._input = None

    def _ready(self) -> None:
        inp = self._input
        if inp is None:
            return
        self._handle([(k.key, k.data) for k in inp.read_keys()])
        if self._flush is not None:
            self._flush.cancel()
        self._flush = asyncio.get_running_loop().call_later(_ESC_WAIT, self._flush_keys)

    def _flush_keys(self) -> None:
        self._flush = None
        if self._input is not None:
            self._handle([(k.key, k.data) for k in self._input.flush_keys()])

    def _handle(self, keys: list[tuple[object, str]]) -> None:
        i = 0
        while i < len(keys):
            key, data = keys[i]
            nxt = keys[i + 1][0] if i + 1 < len(keys) else None
            if key == Keys.Escape and nxt in (Keys.ControlM, Keys.ControlJ):
                self._send("followUp")
                i += 2
                continue
            if key in (Keys.Escape, Keys.ControlC):
                self._on_abort()
            elif key in (Keys.ControlM, Keys.ControlJ):
                self._send("steer")
            elif key == Keys.ControlO:
                self._on_expand()
            elif key in (Keys.Backspace, Keys.ControlH):
                self._set(self.text[:-1])
            elif key == Keys.ControlU:
                self._set("")
            elif key == Keys.ControlW:
                self._set(self.text.rstrip().rpartition(" ")[0] + " " if " " in self.text.rstrip() else "")
            elif key == Keys.BracketedPaste:
                self._set(self.text + data.replace("\r\n", "\n").replace("\r", "\n"))
            elif (len(data) == 1 and data.isprintable()) or key == Keys.ControlI:
                self._set(self.text + (" " if key == Keys.ControlI else data))
            i += 1

    def _set(self, text: str) -> None:
        self.text = text
        self._on_change(text)

    def _send(self, mode: str) -> None:
        text = self.text.strip()
        if text and self._on_send(mode, text):
            self._set("")

    def take(self) -> str:
        """The text typed and not sent (for the editor), emptied."""
        text, self.text = self.text, ""
        return text
