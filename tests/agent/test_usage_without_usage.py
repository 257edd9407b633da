"""A server that sends no usage in its streams (llama.cpp): sizes are stated as estimated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runtime_helpers import make

from picontext.cli.modes.common import Controller
from picontext.scripted import ScriptedModelServer, reply, text, tokens


async def test_context_usage_and_footer_say_estimated_without_usage(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    session, _ = make(server, tmp_path, window=10_000)
    server.expect(reply(text("no usage here"), usage=tokens(0, 0)))
    await session.prompt("hello " + "w" * 400)
    usage = session.get_context_usage()
    assert usage is not None and usage.estimated and usage.tokens and usage.tokens > 100
    footer = Controller(session).footer()
    assert " ~" in footer and footer.split(" ~")[1].startswith(f"{usage.percent:.1f}%")
    assert Controller(session).state()["contextUsage"]["estimated"] is True
    out = tokens_command(str(session.manager.get_session_file()))
    assert out.returncode == 0, out.stderr
    assert "estimated: the model server reported no token usage" in out.stdout


def tokens_command(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "picontext", "tokens", path], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=60)


async def test_reported_usage_is_not_marked_estimated(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, window=10_000)
    server.expect(reply(text("counted"), usage=tokens(1200, 30)))
    await session.prompt("hello")
    usage = session.get_context_usage()
    assert usage is not None and not usage.estimated and usage.tokens == 1230
    assert "~" not in Controller(session).footer()
