"""The CLI on a session database: `store import/export`, `--store URL` / PICONTEXT_STORE on the
read commands (a session id or unique prefix instead of a file) and `sessions` (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pg_corpus import FILES

SESSION = next(f for f in FILES if f.name == "real-large-session.jsonl")


def picontext(*args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, env=full_env, cwd=cwd,
                          timeout=120)


def _header_id(path: Path) -> str:
    return json.loads(path.read_bytes().split(b"\n", 1)[0])["id"]


def test_import_export_round_trip_through_the_cli(pg_url: str, tmp_path: Path) -> None:
    imported = picontext("store", "import", str(SESSION), "--store", pg_url)
    assert imported.returncode == 0, imported.stderr
    sid = _header_id(SESSION)
    assert imported.stdout.decode().startswith(f"{sid}\t")
    exported = picontext("--store", pg_url, "store", "export", sid[:8])
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == SESSION.read_bytes()

    again = picontext("store", "import", str(SESSION), env={"PICONTEXT_STORE": pg_url})
    assert again.returncode == 2
    assert again.stderr.decode() == f"picontext: {SESSION}: session already in the store; not imported\n"

    not_a_session = tmp_path / "x.jsonl"
    not_a_session.write_text('{"type":"message"}\n')
    bad = picontext("store", "import", str(not_a_session), env={"PICONTEXT_STORE": pg_url})
    assert bad.returncode == 2 and b"not a valid pi session" in bad.stderr


def test_read_commands_take_a_session_id_with_a_store(pg_url: str) -> None:
    assert picontext("store", "import", str(SESSION), "--store", pg_url).returncode == 0
    sid = _header_id(SESSION)
    for command in (["context", "--json"], ["stats", "--json"], ["tokens", "--json"]):
        from_file = picontext(*command, str(SESSION))
        from_db = picontext(*command, sid[:6], env={"PICONTEXT_STORE": pg_url})
        assert from_db.returncode == 0, from_db.stderr
        if command[0] == "stats":  # names where the session is; everything else must agree
            db_stats, file_stats = json.loads(from_db.stdout), json.loads(from_file.stdout)
            assert db_stats.pop("file").endswith(f"#{sid}") and file_stats.pop("file") == str(SESSION)
            assert db_stats == file_stats
        else:
            assert from_db.stdout == from_file.stdout, command
    missing = picontext("context", "nope", "--store", pg_url)
    assert missing.returncode == 2 and missing.stderr.decode().startswith("picontext: no session 'nope' in ")


def test_sessions_lists_the_database(pg_url: str, tmp_path: Path) -> None:
    assert picontext("store", "import", *map(str, FILES), "--store", pg_url).returncode in (0, 2)
    listed = picontext("sessions", "--all", "--json", "--store", pg_url)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {r["id"] for r in rows} == {_header_id(f) for f in FILES}
    cwd = json.loads(SESSION.read_bytes().split(b"\n", 1)[0])["cwd"]
    here = picontext("sessions", "--json", env={"PICONTEXT_STORE": pg_url}, cwd=str(tmp_path))
    assert all(r["cwd"] != cwd for r in json.loads(here.stdout))


def test_sessions_with_a_store_refuses_a_directory(pg_url: str, tmp_path: Path) -> None:
    refused = picontext("sessions", "--dir", str(tmp_path), "--store", pg_url)
    assert refused.returncode == 2 and refused.stdout == b""
    assert refused.stderr.decode() == ("picontext: --dir names a directory of session files; "
                                       "with --store the database is listed\n")


def test_a_store_url_that_is_not_postgresql_is_refused() -> None:
    bad = picontext("sessions", "--store", "mysql://x")
    assert bad.returncode == 2
    assert bad.stderr.decode() == "picontext: unsupported PICONTEXT_STORE 'mysql://x': expected a postgresql:// URL\n"
