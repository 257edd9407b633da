"""Every ```python block of README.md and docs/*.md runs as written.

A block is a whole program: run with `python` in a fresh directory, or with pytest when it
defines tests. The examples name a real model (`anthropic/claude-sonnet-4-5`); here the
`models.json` of the test's PICONTEXT_DIR points that model at a scripted server on 127.0.0.1
that answers every request (agent turns and summaries alike), so nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from picontext.testing import ScriptedModelServer, text, tokens
from picontext.testing.model_server import RecordedRequest, Reply

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
ANSWER = "## Goal\nRefactor the parser.\n\n## Progress\n- [x] Looked at the code\n\n## Next Steps\n1. Add tests"


def _blocks() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text_ = doc.read_text(encoding="utf-8")
        for match in FENCE.finditer(text_):
            line = text_.count("\n", 0, match.start()) + 1
            found.append((f"{doc.relative_to(REPO)}:{line}", match.group(1)))
    return found


BLOCKS = _blocks()


class AnsweringServer(ScriptedModelServer):
    """Answers whatever it is asked, with a reply that also reads as a summary."""

    def _take(self, req: RecordedRequest) -> Reply | None:  # type: ignore[override]
        with self._lock:
            self.requests.append(req)
        return text(ANSWER).with_usage(tokens(1_000, 40))


@pytest.fixture(scope="module")
def answering() -> Iterator[AnsweringServer]:
    with AnsweringServer() as server:
        yield server


def test_the_docs_have_python_examples() -> None:
    where = {name.split(":")[0] for name, _ in BLOCKS}
    assert {"README.md", "docs/agent.md", "docs/compaction.md", "docs/testing.md"} <= where


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_python_block_runs(name: str, code: str, tmp_path: Path, answering: AnsweringServer) -> None:
    if "PostgresCluster" in code:
        _need_postgres()
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "models.json").write_text(json.dumps({"providers": {"anthropic": {
        "baseUrl": answering.url, "api": "anthropic-messages", "apiKey": "test-key",
        "models": [{"id": "claude-sonnet-4-5", "contextWindow": 200_000, "maxTokens": 8_192}]}}}))
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples")  # as from a clone's root, without writing into it
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PICONTEXT_DIR"] = str(home)
    is_test = re.search(r"^(async )?def test_", code, re.M) is not None
    script = work / ("test_example.py" if is_test else "example.py")
    script.write_text(code, encoding="utf-8")
    if is_test:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
                   "--rootdir", str(work), str(script)]
    else:
        command = [sys.executable, str(script)]
    asked = len(answering.requests)
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{name}:\n{result.stdout}\n{result.stderr}"
    if "default_catalog()" in code:
        assert len(answering.requests) > asked  # the example really talked to "its" model
    if is_test:
        ran = int(re.search(r"(\d+) passed", result.stdout).group(1))  # type: ignore[union-attr]
        assert ran == len(re.findall(r"^(?:async )?def test_", code, re.M)) * (2 if "parametrize" in code else 1)
        assert "skipped" not in result.stdout


def _need_postgres() -> None:
    """As the suite's `pg_cluster` fixture: without server binaries a skip locally, a failure in CI."""
    from picontext.testing.postgres import PostgresUnavailable, find_bindir

    try:
        find_bindir()
    except PostgresUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI needs PostgreSQL for the docs' PostgreSQL example: {exc}")
        pytest.skip(str(exc))
