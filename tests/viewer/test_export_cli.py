"""`picontext export` as a command: where the page goes, --leaf, one-line errors, self-containment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from viewer_sessions import EXAMPLE


def run(*args: str, cwd: Path | None = None, env_width: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"} if env_width else None  # `tree` lines must not wrap
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def embedded_meta(page: str) -> dict[str, Any]:
    match = re.search(r'<script id="pc-meta" type="application/json">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))  # type: ignore[no-any-return]


def test_export_writes_next_to_the_session_by_default(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    shutil.copy(EXAMPLE, session)
    result = run("export", str(session))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == f"wrote {tmp_path / 's.html'}"
    page = (tmp_path / "s.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert session.read_bytes() == EXAMPLE.read_bytes()  # only read


def test_export_to_stdout_is_self_contained() -> None:
    result = run("export", str(EXAMPLE), "-o", "-")
    assert result.returncode == 0, result.stderr
    page = result.stdout
    # Nothing is loaded from anywhere: no external resources, and a policy that forbids any.
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", page)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None and "default-src &#x27;none&#x27;" in csp.group(1)
    assert "connect-src &#x27;none&#x27;" in csp.group(1)
    meta = embedded_meta(page)
    assert meta["header"]["id"] == "019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e9f"
    assert meta["ids"][meta["leaf"]] == "f96ee35f"


def test_export_leaf_picks_the_branch(tmp_path: Path) -> None:
    out = tmp_path / "early.html"
    result = run("export", str(EXAMPLE), "--leaf", "2722fd80", "-o", str(out))
    assert result.returncode == 0, result.stderr
    meta = embedded_meta(out.read_text(encoding="utf-8"))
    assert meta["ids"][meta["leaf"]] == "2722fd80"
    assert meta["compactions"] == [] and meta["dropped"] == []
    assert len(meta["ids"]) == len(EXAMPLE.read_text().splitlines()) - 1  # the tree still shows everything


def test_export_errors_are_one_line(tmp_path: Path) -> None:
    for args, needle in [
        (("export", str(EXAMPLE), "--leaf", "nope"), f"picontext: entry 'nope' not found in {EXAMPLE}"),
        (("export", str(tmp_path / "missing.jsonl")), "picontext: no such file"),
        (("export", str(EXAMPLE), "-o", str(tmp_path / "no" / "dir.html")), "picontext: cannot write"),
    ]:
        result = run(*args)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and result.stderr.startswith(needle), result.stderr
    garbage = tmp_path / "g.jsonl"
    garbage.write_text("hello\n")
    result = run("export", str(garbage))
    assert result.returncode == 2 and "not a session file" in result.stderr
    assert not (tmp_path / "g.html").exists()
    assert list(tmp_path.glob("*.tmp*")) == []


def test_threshold_uses_the_compaction_settings_in_effect(tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "settings.json").write_text(json.dumps({"compaction": {"reserveTokens": 20000, "enabled": True}}))
    project = tmp_path / "project"
    (project / ".picontext").mkdir(parents=True)
    (project / ".picontext" / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 777}}))
    result = run("export", str(EXAMPLE), "-o", "-", cwd=project)
    assert result.returncode == 0, result.stderr
    settings = embedded_meta(result.stdout)["plot"]["settings"]
    assert settings["reserveTokens"] == 20000 and settings["keepRecentTokens"] == 777


def test_tree_order_and_indentation_are_those_of_picontext_tree(tmp_path: Path) -> None:
    session = tmp_path / "branches.jsonl"
    lines = EXAMPLE.read_text().splitlines()
    entries = [json.loads(line) for line in lines[1:]]
    # two more branches: one off an early user message, one off the compaction's parent
    extra = [{"type": "message", "id": "f0000001", "parentId": "2722fd80", "timestamp": "2026-03-02T10:00:00.000Z",
              "message": {"role": "user", "content": "another way", "timestamp": 1}},
             {"type": "message", "id": "f0000002", "parentId": "f0000001", "timestamp": "2026-03-02T10:00:01.000Z",
              "message": {"role": "user", "content": "and on", "timestamp": 2}},
             {"type": "message", "id": "f0000003", "parentId": "2722fd80", "timestamp": "2026-03-02T10:00:02.000Z",
              "message": {"role": "user", "content": "a third way", "timestamp": 3}}]
    assert any(e["id"] == "2722fd80" for e in entries)
    session.write_text("\n".join([lines[0], *map(json.dumps, entries), *map(json.dumps, extra)]) + "\n")
    meta = embedded_meta(run("export", str(session), "-o", "-").stdout)
    tree = run("tree", str(session), env_width=True).stdout.splitlines()
    rows = [meta["prefix"][k] + meta["ids"][i] for k, i in enumerate(meta["order"])]
    assert len(rows) == len(tree) == len(entries) + 3
    assert [line.startswith(row + " ") for line, row in zip(tree, rows, strict=True)] == [True] * len(rows)
    assert any("├─ " in row for row in rows) and any("└─ " in row for row in rows)
