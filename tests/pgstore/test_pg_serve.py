"""`picontext serve --store URL`: the viewer lists the database's sessions, shows each one's page,
and a page's stamp moves when a writer appends to the session (a real process, real database)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pg_corpus import FILES

from picontext.session.postgres.repository import PostgresRepository
from serving import serve_process, url_of

SESSION = next(f for f in FILES if f.name == "real-large-session.jsonl")


@pytest.fixture
def served(pg_url: str, tmp_path: Path) -> Iterator[str]:
    env = {**os.environ, "PICONTEXT_STORE": pg_url}
    imported = subprocess.run([sys.executable, "-m", "picontext", "store", "import", str(SESSION)], env=env,
                              capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr
    with serve_process("--all", env=env, cwd=tmp_path) as first:
        assert "all projects" in first and "postgresql://" in first
        yield url_of(first)


def test_serve_shows_the_database_and_follows_an_append(served: str, pg_url: str) -> None:
    sid = json.loads(SESSION.read_bytes().split(b"\n", 1)[0])["id"]
    listing = httpx.get(served, timeout=30)
    assert listing.status_code == 200 and sid in listing.text
    [key] = re.findall(r'href="/view/([0-9a-f]{16})"', listing.text)
    page = httpx.get(f"{served}view/{key}", timeout=60)
    assert page.status_code == 200 and '<script id="pc-meta"' in page.text
    meta = json.loads(re.search(r'<script id="pc-meta" type="application/json">(.*?)</script>', page.text,
                                re.S).group(1))  # type: ignore[union-attr]
    assert "/mode" in meta["previews"]
    before = httpx.get(f"{served}api/view/{key}?stamp=1", timeout=30).json()["stamp"]

    manager = PostgresRepository(pg_url).open(f"{pg_url}#{sid}")
    manager.append_message({"role": "user", "content": "a question asked while the page is open",
                            "timestamp": 1_900_000_000_000})
    after = httpx.get(f"{served}api/view/{key}?stamp=1", timeout=30).json()["stamp"]
    assert after != before
    data = httpx.get(f"{served}api/view/{key}", timeout=60).json()
    assert data["stamp"] == after and data["meta"]["previews"]


def test_serve_with_a_store_refuses_a_directory(pg_url: str, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "picontext", "serve", "--dir", str(tmp_path), "--store", pg_url],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "with --store" in r.stderr


def test_export_takes_a_session_id_of_the_database(pg_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "PICONTEXT_STORE": pg_url}
    assert subprocess.run([sys.executable, "-m", "picontext", "store", "import", str(SESSION)], env=env,
                          capture_output=True, timeout=120).returncode == 0
    sid = json.loads(SESSION.read_bytes().split(b"\n", 1)[0])["id"]
    out = tmp_path / "page.html"
    r = subprocess.run([sys.executable, "-m", "picontext", "export", sid[:8], "-o", str(out)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert '<script id="pc-meta"' in out.read_text(encoding="utf-8") and "/mode" in out.read_text(encoding="utf-8")
