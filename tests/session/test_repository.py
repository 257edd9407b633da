"""`SessionRepository` (issue 20 item 1): sessions by id in every store, one factory, and a
`SessionManager` that holds a store and a reference, never a made-up path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from picontext.errors import AmbiguousSession, SessionError, SessionFormatError, SessionNotFound, StoreUnavailable
from picontext.session.manager import SessionManager
from picontext.session.repository import JsonlRepository, MemoryRepository, SessionRepository, open_repository

SESSION_BYTES = (
    b'{"type":"session","version":3,"id":"0199aaaa-1111","timestamp":"2026-01-02T03:04:05.006Z","cwd":"/w"}\n'
    b"\n"  # a blank line
    b'{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-02T03:04:06.000Z",'
    b'"message":{"role":"user","content":"first question","timestamp":1767323046000}}\n'
    b"not json at all\n"
    b'{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-02T03:04:07.000Z",'
    b'"message":{"role":"assistant","content":[{"type":"text","text":"an answer"}],"timestamp":1.0e12}}'
)  # ... and no final newline: every byte comes back as it was


def user(text: str, ts: int = 1) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def assistant(text: str, ts: int = 2) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": ts, "api": "x",
            "provider": "p", "model": "m", "usage": {}, "stopReason": "stop"}


def conversation(repo: SessionRepository, cwd: str, question: str, **kw: Any) -> SessionManager:
    manager = repo.create(cwd, **kw)
    manager.append_message(user(question))
    manager.append_message(assistant("ok"))
    return manager


@pytest.fixture
def repo(repository_url: str) -> SessionRepository:
    return open_repository(repository_url)


def test_create_open_by_id_and_prefix(repo: SessionRepository, tmp_path: Path) -> None:
    cwd = str(tmp_path / "proj")
    manager = conversation(repo, cwd, "hello", id="0199abcd-1111")
    assert manager.repository is repo
    assert manager.get_session_id() == "0199abcd-1111"
    for ref in ("0199abcd-1111", "0199ab"):
        reopened = repo.open(ref)
        assert reopened.get_session_id() == "0199abcd-1111"
        assert reopened.repository is repo
        assert [e["message"]["role"] for e in reopened.get_entries()] == ["user", "assistant"]
        assert reopened.get_cwd() == cwd


def test_get_session_file_is_the_real_file_or_none(repo: SessionRepository, tmp_path: Path) -> None:
    """A session of a store that is not a file has no file (it used to be `<cwd>/<id>`)."""
    manager = conversation(repo, str(tmp_path), "where am I")
    file = manager.get_session_file()
    if isinstance(repo, JsonlRepository):
        assert file is not None and os.path.isfile(file)
        assert Path(file).parent.parent == Path(repo.url)  # Pi's layout: <root>/--<cwd>--/<ts>_<id>.jsonl
        assert Path(file).name.endswith(f"_{manager.get_session_id()}.jsonl")
        assert manager.get_session_location() == file
    else:
        assert file is None
        assert not (tmp_path / manager.get_session_id()).exists()
        assert manager.get_session_location().endswith("#" + manager.get_session_id())  # type: ignore[union-attr]
    assert repo.open(manager.get_session_id()).get_session_file() == file


def test_unknown_and_ambiguous_references(repo: SessionRepository, tmp_path: Path) -> None:
    conversation(repo, str(tmp_path), "a", id="0199abcd-1111")
    conversation(repo, str(tmp_path), "b", id="0199abce-2222")
    with pytest.raises(SessionNotFound) as missing:
        repo.open("0299")
    with pytest.raises(AmbiguousSession) as ambiguous:
        repo.open("0199ab")
    for exc in (missing.value, ambiguous.value):
        assert isinstance(exc, SessionError) and "\n" not in str(exc)
    assert "0199abcd-1111" in str(ambiguous.value) and "0199abce-2222" in str(ambiguous.value)
    assert repo.open("0199abce").get_session_id() == "0199abce-2222"
    assert repo.open("0199abcd-1111").get_session_id() == "0199abcd-1111"


def test_open_with_create_makes_a_session_of_that_id(repo: SessionRepository, tmp_path: Path) -> None:
    if isinstance(repo, JsonlRepository):
        with pytest.raises(SessionNotFound, match="give a path"):  # an id never creates a file
            repo.open("0199new", create=True, cwd=str(tmp_path))
        path = tmp_path / "new.jsonl"
        manager = repo.open(str(path), create=True)
        assert manager.get_session_file() == str(path) and not path.exists()  # written at the first reply
        return
    manager = repo.open("0199new", create=True, cwd=str(tmp_path))
    assert manager.get_session_id() == "0199new"
    manager.append_message(user("q"))
    manager.append_message(assistant("a"))
    assert repo.open("0199new").get_entries()[0]["message"]["content"] == "q"


def test_latest_and_list(repo: SessionRepository, tmp_path: Path) -> None:
    here, there = str(tmp_path / "here"), str(tmp_path / "there")
    assert repo.latest(here) is None and repo.list(here) == []
    older = repo.create(here)
    older.append_message(user("older", 1_700_000_000_000))
    older.append_message(assistant("ok", 1_700_000_000_001))
    newer = repo.create(here)
    newer.append_message(user("newer", 1_800_000_000_000))
    newer.append_message(assistant("ok", 1_800_000_000_001))
    elsewhere = conversation(repo, there, "elsewhere")
    latest = repo.latest(here)
    assert latest is not None and latest.get_session_id() == newer.get_session_id()
    listed = repo.list(here)
    assert [i.id for i in listed] == [newer.get_session_id(), older.get_session_id()]
    info = listed[0]
    assert (info.cwd, info.first_message, info.message_count) == (here, "newer", 2)
    assert info.modified.timestamp() == pytest.approx(1_800_000_000.001)
    assert info.location == newer.get_session_location()
    assert info.file == newer.get_session_file()
    assert {i.id for i in repo.list()} == {older.get_session_id(), newer.get_session_id(),
                                           elsewhere.get_session_id()}


def test_fork_copies_the_whole_session(repo: SessionRepository, tmp_path: Path) -> None:
    source = conversation(repo, str(tmp_path / "a"), "to be forked")
    forked = repo.fork(source.get_session_id()[:10], str(tmp_path / "b"))
    assert forked.repository is repo and forked.get_session_id() != source.get_session_id()
    header = forked.get_header()
    assert header is not None and header["parentSession"] == source.get_session_location()
    assert header["cwd"] == str(tmp_path / "b")
    again = repo.open(forked.get_session_id())
    assert [e["id"] for e in again.get_entries()] == [e["id"] for e in source.get_entries()]


def test_a_branched_session_stays_in_the_repository(repo: SessionRepository, tmp_path: Path) -> None:
    manager = conversation(repo, str(tmp_path), "branch me")
    first = manager.get_session_id()
    leaf = manager.get_leaf_id()
    assert leaf is not None
    file = manager.create_branched_session(leaf)
    assert manager.get_session_id() != first
    assert file == manager.get_session_file()
    assert repo.open(manager.get_session_id()).get_session_id() == manager.get_session_id()
    header = manager.get_header()
    assert header is not None and header["parentSession"] == repo.open(first).get_session_location()


def test_import_and_export_are_byte_identical(repo: SessionRepository) -> None:
    session_id = repo.import_bytes(SESSION_BYTES)
    assert session_id == "0199aaaa-1111"
    assert repo.export_bytes("0199aaaa") == SESSION_BYTES
    manager = repo.open(session_id)
    assert [e["id"] for e in manager.get_entries()] == ["u1", "a1"]
    assert [i.first_message for i in repo.list("/w")] == ["first question"]
    with pytest.raises(FileExistsError):
        repo.import_bytes(SESSION_BYTES)
    assert repo.export_bytes(session_id) == SESSION_BYTES
    with pytest.raises(SessionFormatError, match="not a valid pi session"):
        repo.import_bytes(b'{"type":"message","id":"x"}\n' + SESSION_BYTES)


def test_appends_after_import_keep_the_imported_bytes(repo: SessionRepository) -> None:
    session_id = repo.import_bytes(SESSION_BYTES)
    manager = repo.open(session_id)
    manager.append_message(user("one more"))
    exported = repo.export_bytes(session_id)
    assert exported.startswith(SESSION_BYTES + b"\n")  # the unterminated last line is closed first
    assert exported.endswith(b"\n") and exported.count(b"\n") == SESSION_BYTES.count(b"\n") + 2


def test_open_repository_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PICONTEXT_STORE", raising=False)
    default = open_repository()
    assert isinstance(default, JsonlRepository)
    assert default.url == os.path.join(os.environ["PICONTEXT_DIR"], "sessions")
    for url in (str(tmp_path), f"file://{tmp_path}", f"jsonl:{tmp_path}"):
        repo = open_repository(url)
        assert isinstance(repo, JsonlRepository) and repo.url == str(tmp_path)
    monkeypatch.setenv("PICONTEXT_STORE", f"jsonl:{tmp_path}")
    assert open_repository().url == str(tmp_path)
    monkeypatch.setenv("PICONTEXT_STORE", "memory:env")
    assert isinstance(open_repository(), MemoryRepository)
    for bad in ("mysql://x", "file://host/dir", "jsonl:"):
        with pytest.raises(StoreUnavailable) as refused:
            open_repository(bad)
        assert isinstance(refused.value, SessionError) and "\n" not in str(refused.value)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(StoreUnavailable, match="not a directory"):
        open_repository(str(tmp_path / "a-file"))


def test_memory_stores_are_private_unless_named() -> None:
    private = open_repository("memory:")
    conversation(private, "/w", "secret", id="0199priv")
    assert open_repository("memory:").list() == []
    shared = open_repository("memory:shared-by-name")
    conversation(shared, "/w", "shared", id="0199shar")
    assert open_repository("memory:shared-by-name").open("0199shar").get_session_id() == "0199shar"


def test_a_memory_session_is_read_as_its_file_would_be(tmp_path: Path) -> None:
    """The same bytes give the same session in memory and in a file."""
    memory = open_repository("memory:")
    files = open_repository(str(tmp_path))
    for repo in (memory, files):
        repo.import_bytes(SESSION_BYTES)
    in_memory, in_file = memory.open("0199aaaa"), files.open("0199aaaa")
    assert in_memory.get_entries() == in_file.get_entries()
    assert in_memory.build_session_context() == in_file.build_session_context()


def test_a_missing_postgres_driver_is_store_unavailable_naming_the_extra() -> None:
    """docs/storage.md: a missing driver is `StoreUnavailable`, one line naming `picontext[postgres]`.
    In a fresh interpreter with psycopg unimportable (this one may have imported it already)."""
    import subprocess
    import sys

    code = ("import sys\nsys.modules['psycopg'] = None\n"
            "from picontext.errors import StoreUnavailable\n"
            "from picontext.session.repository import open_repository\n"
            "try:\n    open_repository('postgresql://agent@127.0.0.1:1/agents')\n"
            "except StoreUnavailable as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.count("\n") == 1 and "pip install 'picontext[postgres]'" in out.stdout, out.stdout + out.stderr
