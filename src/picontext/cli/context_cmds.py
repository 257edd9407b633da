"""`picontext context FILE`: what the model sees for a leaf (exactly Pi's buildSessionContext).

With `--json` this is the command scripts and benchmarks call on long sessions, so it imports
only the session layer's reading parts: the projection comes from the session's entry columns
(`session/context_stream.py`, reading only the context's lines) when the file allows, else from
the full reader. The readable listing imports rich when it is asked for.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from picontext import _json
from picontext.cli.loading import context_json_pieces


def _stream_context(projection: Any) -> None:
    """`_json.dumps(projection.context())` written a few hundred messages at a time, so the whole
    text never exists at once (the context of a long session is tens of megabytes)."""
    context = projection.context()
    messages = context.pop("messages")
    out = sys.stdout.buffer
    out.write(b'{"messages":[')
    for start in range(0, len(messages), 256):
        chunk = _json.dumps_joined(messages[start : start + 256])
        out.write(chunk if start == 0 else b"," + chunk)
    rest = _json.dumps(context)  # the other keys, in the same order after "messages"
    out.write(b"]" + (b"," + rest[1:] if rest != b"{}" else b"}") + b"\n")
    out.flush()


def cmd_context(args: argparse.Namespace) -> int:
    from picontext.cli.loading import project_file

    if args.json:
        pieces = context_json_pieces(args.file, args.leaf)
        if pieces is None:
            _stream_context(project_file(args.file, args.leaf))
            return 0
        from picontext._gc import gc_paused

        out = sys.stdout.buffer
        with gc_paused():  # tens of thousands of parsed messages, none in a cycle: measured 5-7% of the call
            for piece in pieces:
                out.write(piece)
        out.flush()
        return 0
    from rich.text import Text

    from picontext.cli import render
    from picontext.cli.loading import load_session
    from picontext.session.projection import build_session_projection, field_of

    session = load_session(args.file)
    leaf = session.resolve_leaf(args.leaf)
    projection = build_session_projection(session.entries, leaf, session.by_id)
    model = projection.model or {}
    rows = [(item, message) for item in projection.entries for message in item.messages]
    with render.paged(render.console(), args.no_pager) as out:
        out.print(Text(f"{len(projection.messages)} messages · model {model.get('provider', '?')}/"
                       f"{model.get('modelId', '?')} · thinking {projection.thinking_level}", style="bold"))
        shown = rows[-args.tail:] if args.tail is not None and args.tail >= 0 else rows
        if len(shown) < len(rows):
            out.print(Text(f"… {len(rows) - len(shown)} earlier messages", style="dim"))
        width = max(30, out.width - 28)
        for item, message in shown:
            role = message.get("role", "?") if isinstance(message, dict) else "?"
            line = render.role_text(role)
            line.append(f" {field_of(item.source_entry, 'id')} ", style="dim")
            line.append(render.message_summary(message, width))
            out.print(line)
    return 0
