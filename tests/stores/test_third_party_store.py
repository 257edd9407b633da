"""A store from another package works with every command (issue 20 item 5).

examples/sqlite_store is such a package: it passes the conformance suite (tests/conftest.py's
`sqlite` store kind) and declares a `picontext.stores` entry point. Here it is installed the way
pip installs it (a `.dist-info` with `entry_points.txt` on the path, no registration in the
process) and real `picontext` processes run against `--store sqlite:///...`: print mode and its
continuation, the read commands, export, the store's import and export, compaction, listing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from picontext.errors import StoreUnavailable
from picontext.scripted import ScriptedModelServer, text, tool_call
from picontext.session.repository import open_repository, register_store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sqlite_store"
SESSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"


@pytest.fixture
def installed(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine where the example package is installed."""
    site = tmp_path / "site"
    dist = site / "picontext_sqlite_store-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: picontext-sqlite-store\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[picontext.stores]\nsqlite = picontext_sqlite:open_sqlite_repository\n")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(EXAMPLE), env.get("PYTHONPATH", "")) if p)
    env.update(PICONTEXT_DIR=str(home), PICONTEXT_STORE=f"sqlite://{tmp_path}/db/sessions.db")
    return env


def picontext(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_every_command_runs_on_an_installed_third_party_store(
    installed: dict[str, str], server: ScriptedModelServer, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    provider = {"baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k", "models": [{"id": "m1"}]}
    (Path(installed["PICONTEXT_DIR"]) / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))

    server.expect(tool_call("write", {"path": "hello.txt", "content": "hi there"}), text("Created hello.txt."))
    first = picontext(installed, work, "run", "-p", "create hello.txt", "--model", "scripted/m1")
    assert first.returncode == 0, first.stderr
    assert (work / "hello.txt").read_text() == "hi there"
    assert not list(Path(installed["PICONTEXT_DIR"]).rglob("*.jsonl"))  # nothing went to files

    listed = picontext(installed, work, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    sid = row["id"]
    assert row["path"].startswith("sqlite://") and row["path"].endswith(f"#{sid}")

    server.expect(text("Still here."))
    again = picontext(installed, work, "run", "-c", "-p", "and now?", "--model", "scripted/m1")
    assert again.returncode == 0, again.stderr
    assert "create hello.txt" in json.dumps(server.requests[-1].json["messages"])  # the same session went on
    server.expect(text("Resumed."))
    resumed = picontext(installed, work, "run", "-r", sid[:8], "-p", "resume me", "--model", "scripted/m1")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["id"] for r in json.loads(picontext(installed, work, "sessions", "--json").stdout)] == [sid]

    exported = picontext(installed, work, "store", "export", sid[:8])
    assert exported.returncode == 0, exported.stderr
    as_file = tmp_path / "exported.jsonl"
    as_file.write_text(exported.stdout)
    for command in (["context", "--json"], ["tokens", "--json"], ["show"], ["tree"], ["dropped", "--json"]):
        from_store = picontext(installed, work, *command, sid[:8])
        from_file = picontext(dict(installed, PICONTEXT_STORE=""), work, *command, str(as_file))
        assert from_store.returncode == 0, (command, from_store.stderr)
        assert from_store.stdout == from_file.stdout, command

    html = tmp_path / "page.html"
    page = picontext(installed, work, "export", sid[:8], "-o", str(html))
    assert page.returncode == 0, page.stderr
    assert html.stat().st_size > 1000 and "<html" in html.read_text()[:2000].lower()

    server.expect(text("## Goal\nCreate hello.txt.\n\n## Progress\nhello.txt written."))
    compacted = picontext(installed, work, "compact", sid[:8], "--model", "scripted/m1", "--keep-recent-tokens", "10")
    assert compacted.returncode == 0, compacted.stderr
    lines = picontext(installed, work, "store", "export", sid).stdout.splitlines()
    types = [json.loads(line)["type"] for line in lines]
    assert "compaction" in types

    real = sorted(SESSIONS.rglob("*.jsonl"))[0]
    imported = picontext(installed, work, "store", "import", str(real))
    assert imported.returncode == 0, imported.stderr
    real_id = json.loads(real.read_text().split("\n", 1)[0])["id"]
    assert picontext(installed, work, "store", "export", real_id).stdout == real.read_text()
    stats = picontext(installed, work, "stats", "--json", real_id)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["file"].endswith(f"#{real_id}")


def test_a_missing_or_broken_store_package_is_one_line(installed: dict[str, str], tmp_path: Path) -> None:
    unknown = picontext(installed, tmp_path, "sessions", "--store", "nosuch://x")
    assert unknown.returncode == 2
    assert unknown.stderr == ("picontext: unsupported PICONTEXT_STORE 'nosuch://x': expected a directory, "
                              "file:///dir, jsonl:/dir, postgresql://... or memory:[NAME], sqlite:...\n")
    without_module = [p for p in installed["PYTHONPATH"].split(os.pathsep) if p != str(EXAMPLE)]
    broken = dict(installed, PYTHONPATH=os.pathsep.join(without_module))  # the entry point, not its module
    refused = picontext(broken, tmp_path, "sessions")
    assert refused.returncode == 2
    assert refused.stderr.startswith("picontext: the sqlite: store (picontext_sqlite:open_sqlite_repository) "
                                     "could not be loaded: ModuleNotFoundError")
    assert len(refused.stderr.splitlines()) == 1


def test_register_store_in_process() -> None:
    made: list[str] = []

    def factory(url: str) -> object:
        made.append(url)
        return open_repository("memory:")

    register_store("mystore", factory)  # type: ignore[arg-type]
    try:
        repo = open_repository("mystore://anything")
        assert made == ["mystore://anything"] and repo.url == "memory:"
        register_store("mystore", lambda url: object())  # type: ignore[arg-type,return-value]
        with pytest.raises(StoreUnavailable, match="returned object, not a SessionRepository"):
            open_repository("mystore://x")
        register_store("mystore", lambda url: 1 / 0)  # type: ignore[arg-type,return-value]
        with pytest.raises(StoreUnavailable, match="unavailable: ZeroDivisionError"):
            open_repository("mystore://x")
    finally:
        register_store("mystore", None)
    with pytest.raises(StoreUnavailable, match="unsupported"):
        open_repository("mystore://x")
    with pytest.raises(ValueError):
        register_store("postgresql", factory)  # type: ignore[arg-type]


REPLAY = Path(__file__).resolve().parents[1] / "fixtures" / "replay" / "claude-code"


def test_import_goes_to_the_chosen_store(installed: dict[str, str], tmp_path: Path) -> None:
    """`picontext import` without -o writes into the store --store / PICONTEXT_STORE names: the
    same sessions as imported to files, a subagent linked to its parent by the parent's location."""
    transcript = REPLAY / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    as_files = picontext(dict(installed, PICONTEXT_STORE=""), tmp_path, "import", "--json", str(transcript),
                         "-o", str(tmp_path / "files"))
    assert as_files.returncode == 0, as_files.stderr
    files = {r["sessionId"]: r for r in map(json.loads, as_files.stdout.splitlines())}

    stored = picontext(installed, tmp_path, "import", "--json", str(transcript))
    assert stored.returncode == 0, stored.stderr
    rows = {r["sessionId"]: r for r in map(json.loads, stored.stdout.splitlines())}
    assert rows.keys() == files.keys() and len(rows) >= 2  # the session and its subagents
    assert not list(Path(installed["PICONTEXT_DIR"]).rglob("*.jsonl"))
    listed = {r["id"] for r in json.loads(picontext(installed, tmp_path, "sessions", "--all", "--json").stdout)}
    assert listed == rows.keys()
    for sid, row in rows.items():
        assert row["path"].startswith("sqlite://") and row["path"].endswith(f"#{sid}")
        if files[sid]["parentSession"] is not None:  # the parent's location in the store, not a file
            parent = next(r for r in rows.values() if r["path"] == row["parentSession"])
            assert files[sid]["parentSession"] == files[parent["sessionId"]]["path"]
        from_store = picontext(installed, tmp_path, "context", "--json", sid)
        from_file = picontext(dict(installed, PICONTEXT_STORE=""), tmp_path, "context", "--json", files[sid]["path"])
        assert from_store.returncode == 0 and from_store.stdout == from_file.stdout

    again = picontext(installed, tmp_path, "import", str(transcript))
    assert again.returncode == 2 and "already in the store" in again.stderr and "--force" in again.stderr
    assert picontext(installed, tmp_path, "import", "--force", str(transcript)).returncode == 0

    bad = tmp_path / "zz-trunc.jsonl"
    bad.write_bytes((REPLAY / "tool_heavy.jsonl").read_bytes()[:-40])
    refused = picontext(installed, tmp_path, "import", str(REPLAY / "short.jsonl"), str(bad))
    assert refused.returncode == 2 and "truncated line" in refused.stderr
    after = {r["id"] for r in json.loads(picontext(installed, tmp_path, "sessions", "--all", "--json").stdout)}
    assert after == listed  # not even the good file before it
