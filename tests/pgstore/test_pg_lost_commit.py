"""A connection lost at COMMIT: on its way to the server (not committed) or on the way back (committed,
answer lost). A TCP proxy between psycopg and the real server drops the connection at exactly
that message (picontext.testing.pgproxy). Whatever happened, afterwards the stored session and the
manager's memory agree: every entry stored once, no parent missing, the whole history projected
(docs/storage.md, "A lost COMMIT")."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_pg_agent import configure, picontext

from picontext._clock import FrozenClock, SequentialIds
from picontext.errors import SessionWriteError
from picontext.session.manager import SessionManager
from picontext.session.postgres import PgSessionStore, database, store_factory
from picontext.session.postgres.database import close_all
from picontext.session.postgres.listing import list_sessions
from picontext.session.postgres.transfer import import_bytes
from picontext.testing import ScriptedModelServer, text
from picontext.testing.pgproxy import FaultProxy

FAULTS = ["commit", "answer"]  # the COMMIT lost on its way / its answer lost on the way back


@pytest.fixture
def proxy(pg_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    monkeypatch.setenv("PICONTEXT_STORE_TIMEOUT", "2")
    with FaultProxy(pg_cluster.port) as fault_proxy:
        yield fault_proxy
    close_all()


def _user(text: str, ts: int) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def _reply(text: str, ts: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "api": "openai-completions",
            "provider": "p", "model": "m", "timestamp": ts}


def _manager(url: str, cwd: Path, warnings: list[str]) -> SessionManager:
    PgSessionStore(url, "warm-up").exists()  # the schema exists (its migrations commit too)
    return SessionManager.create(str(cwd), str(cwd), store_factory=store_factory(url), warn=warnings.append,
                                 clock=FrozenClock(step_ms=1), ids=SequentialIds())


def check_stored(direct_url: str, manager: SessionManager, texts: list[str]) -> None:
    """What is stored: each id once, every parent stored, the leaf's path holding `texts`; and the
    same as the manager's memory (ids in order, leaf, context)."""
    stored = PgSessionStore(direct_url, manager.get_session_id()).load().entries[1:]
    ids = [e["id"] for e in stored]
    assert len(ids) == len(set(ids)), f"duplicate ids: {ids}"
    assert all(e["parentId"] is None or e["parentId"] in ids for e in stored), "a parent is not stored"
    assert ids == [e["id"] for e in manager.get_entries()]
    reopened = SessionManager.open(manager.get_session_id(), store_factory=store_factory(direct_url))
    assert reopened.get_leaf_id() == manager.get_leaf_id()
    context = reopened.build_session_context()
    assert context == manager.build_session_context()
    said = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in context["messages"]]
    assert said == texts


@pytest.mark.parametrize("fault", FAULTS)
def test_a_reply_whose_commit_is_lost_is_stored_once(proxy: FaultProxy, pg_url: str, tmp_path: Path,
                                                     fault: str) -> None:
    warnings: list[str] = []
    manager = _manager(proxy.url_for(pg_url), tmp_path, warnings)
    manager.append_message(_user("q1", 1))
    manager.append_message(_reply("a1", 2))
    manager.append_message(_user("q2", 3))
    proxy.arm(fault)  # type: ignore[arg-type]
    with manager.exclusive(strict=False):  # how the agent persists every message
        manager.append_message(_reply("a2", 4))
    assert proxy.fired.is_set()
    # Settled when the section ended: committed, or stored again (same id), and said so.
    assert warnings == ([] if fault == "answer" else [
        f"the connection to {proxy.url_for(pg_url)}#{manager.get_session_id()} broke before 1 entries were "
        "stored; they were stored again"])
    manager.append_message(_user("q3", 5))
    check_stored(pg_url, manager, ["q1", "a1", "q2", "a2", "q3"])


@pytest.mark.parametrize("fault", FAULTS)
async def test_an_async_section_settles_too(proxy: FaultProxy, pg_url: str, tmp_path: Path, fault: str) -> None:
    manager = _manager(proxy.url_for(pg_url), tmp_path, [])
    manager.append_message(_user("q1", 1))
    manager.append_message(_reply("a1", 2))
    proxy.arm(fault)  # type: ignore[arg-type]
    async with manager.aexclusive(strict=False):
        manager.append_message(_user("q2", 3))
        manager.append_message(_reply("a2", 4))
    assert proxy.fired.is_set()
    manager.append_message(_user("q3", 5))
    check_stored(pg_url, manager, ["q1", "a1", "q2", "a2", "q3"])


@pytest.mark.parametrize("fault", FAULTS)
def test_a_lost_commit_while_the_database_stays_away_keeps_the_reply_until_it_can_tell(
    proxy: FaultProxy, pg_url: str, tmp_path: Path, fault: str
) -> None:
    """The store cannot be read right after the loss: the reply stays in memory, unconfirmed, the
    error says so, and the next write first settles it (here after another writer appended)."""
    manager = _manager(proxy.url_for(pg_url), tmp_path, [])
    manager.append_message(_user("q1", 1))
    manager.append_message(_reply("a1", 2))
    proxy.arm(fault)  # type: ignore[arg-type]
    with pytest.raises(SessionWriteError) as info:
        with manager.exclusive(strict=False):
            manager.append_message(_user("q2", 3))
            proxy.refusing.set()  # from now on no new connection gets through
            manager.append_message(_reply("a2", 4))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"Cannot confirm that the last 2 entries of session {manager.get_session_id()} "
                              "were stored (")
    assert message.endswith("they stay in this session and are checked, and stored again if missing, before its "
                            "next write")
    texts = ["q1", "a1", "q2", "a2"]
    assert [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in manager.build_session_context()["messages"]] == texts
    with pytest.raises(SessionWriteError, match="Cannot confirm that the last 2 entries"):
        manager.append_message(_user("q3", 5))  # still unreachable: nothing else is written
    # Meanwhile another writer appends to the session (directly, not through the proxy).
    other = SessionManager.open(manager.get_session_id(), store_factory=store_factory(pg_url))
    other.append_message(_user("from elsewhere", 6))
    proxy.refusing.clear()
    manager.append_message(_user("q3", 7))
    stored = PgSessionStore(pg_url, manager.get_session_id()).load().entries[1:]
    ids = [e["id"] for e in stored]
    assert len(ids) == len(set(ids)) and all(e["parentId"] is None or e["parentId"] in ids for e in stored)
    assert ids == [e["id"] for e in manager.get_entries()]  # memory in file order
    assert [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in manager.build_session_context()["messages"]] == [*texts, "q3"]
    reopened = SessionManager.open(manager.get_session_id(), store_factory=store_factory(pg_url))
    assert reopened.build_session_context() == manager.build_session_context()


@pytest.mark.parametrize("fault", FAULTS)
def test_a_batch_of_edits_whose_commit_is_lost_is_stored_once(proxy: FaultProxy, pg_url: str, tmp_path: Path,
                                                              fault: str) -> None:
    manager = _manager(proxy.url_for(pg_url), tmp_path, [])
    q1 = manager.append_message(_user("q1", 1))
    a1 = manager.append_message(_reply("a1", 2))
    manager.append_message(_user("q2", 3))
    proxy.arm(fault)  # type: ignore[arg-type]
    with manager.exclusive():
        manager.append_context_edits([(q1, None), (a1, {"content": "a1, shorter"})])
    manager.append_message(_reply("a2", 4))
    check_stored(pg_url, manager, ["a1, shorter", "q2", "a2"])


@pytest.mark.parametrize("fault", FAULTS)
def test_a_lost_answer_to_the_create_stores_the_opening_once(proxy: FaultProxy, pg_url: str, tmp_path: Path,
                                                             fault: str) -> None:
    """The first reply writes the whole new session in one transaction: its COMMIT or the answer
    lost is resolved by reading the session back, before `create` returns."""
    manager = _manager(proxy.url_for(pg_url), tmp_path, [])
    manager.append_model_change("p", "m")
    manager.append_thinking_level_change("off")
    manager.append_message({"role": "system", "content": "be brief", "timestamp": 1})
    manager.append_message(_user("q1", 2))
    proxy.arm(fault)  # type: ignore[arg-type]
    with manager.exclusive(strict=False):
        manager.append_message(_reply("a1", 3))
    assert proxy.fired.is_set()
    manager.append_message(_user("q2", 4))
    manager.append_message(_reply("a2", 5))
    check_stored(pg_url, manager, ["be brief", "q1", "a1", "q2", "a2"])


@pytest.mark.parametrize("fault", FAULTS)
def test_a_create_that_cannot_be_checked_joins_what_was_stored(proxy: FaultProxy, pg_url: str, tmp_path: Path,
                                                               fault: str) -> None:
    """The database stays away after the lost answer: `create` cannot tell, says so, and the next
    write creates the session or, if it was stored, appends only what is missing (same ids)."""
    manager = _manager(proxy.url_for(pg_url), tmp_path, [])
    manager.append_model_change("p", "m")
    manager.append_message(_user("q1", 1))
    proxy.refusing.set()  # the pool's idle connection still works; no new one will
    proxy.arm(fault)  # type: ignore[arg-type]
    with pytest.raises(SessionWriteError) as info:
        manager.append_message(_reply("a1", 2))
    assert "\n" not in str(info.value)
    assert "whether the write was stored is not known yet" in str(info.value)
    assert "nothing was written" not in str(info.value)
    assert manager.get_leaf_entry()["message"]["role"] == "assistant"  # type: ignore[index]  # kept
    proxy.refusing.clear()
    manager.append_message(_user("q2", 3))
    check_stored(pg_url, manager, ["q1", "a1", "q2"])


def test_a_section_whose_connection_broke_before_its_commit_stores_its_appends_again(
    proxy: FaultProxy, pg_url: str, tmp_path: Path
) -> None:
    """The connection dies in the middle of a section (the server ends it): the first append
    was in the transaction that died with it; the second fails. The first is stored again."""
    manager = _manager(proxy.url_for(pg_url), tmp_path, [])
    manager.append_message(_user("q1", 1))
    manager.append_message(_reply("a1", 2))
    with pytest.raises(SessionWriteError, match="nothing was written"):
        with manager.exclusive(strict=False):
            manager.append_message(_user("q2", 3))
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname ="
                              " current_database() AND pid <> pg_backend_pid() AND state = 'idle in transaction'")
            manager.append_message(_reply("a2", 4))
    check_stored(pg_url, manager, ["q1", "a1", "q2"])


@pytest.mark.parametrize("fault", FAULTS)
def test_print_mode_loses_no_reply_to_a_lost_commit(proxy: FaultProxy, pg_url: str, tmp_path: Path,
                                                    server: ScriptedModelServer, fault: str) -> None:
    """The agent persists each message in a writer section: the reply's COMMIT is lost in a real
    `picontext -c -p` process; the reply is stored once and the next run continues after it."""
    home = Path(os.environ["PICONTEXT_DIR"])
    configure(home, server.url + "/v1")
    url = proxy.url_for(pg_url)
    server.expect(text("A1"), text("A2"), text("A3"), text("A4"))
    assert picontext(home, tmp_path, url, "run", "-p", "q1", "--model", "scripted/m1").returncode == 0
    before = proxy.commits
    second = picontext(home, tmp_path, url, "run", "-c", "-p", "q2", "--model", "scripted/m1")
    assert second.returncode == 0, second.stderr
    per_turn = proxy.commits - before  # the prompt's and the reply's sections, and whatever else a turn writes
    proxy.arm(fault, after=per_turn - 1)  # type: ignore[arg-type]  # the turn's last COMMIT: the reply's
    third = picontext(home, tmp_path, url, "run", "-c", "-p", "q3", "--model", "scripted/m1")
    assert proxy.fired.is_set()
    assert third.returncode == 0, third.stderr
    assert third.stdout.strip() == "A3"
    fourth = picontext(home, tmp_path, url, "run", "-c", "-p", "q4", "--model", "scripted/m1")
    assert fourth.returncode == 0, fourth.stderr
    [info] = list_sessions(database(pg_url), str(tmp_path))
    stored = PgSessionStore(pg_url, info.id).load().entries[1:]
    ids = [e["id"] for e in stored]
    assert len(ids) == len(set(ids)) and all(e["parentId"] is None or e["parentId"] in ids for e in stored)
    said = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in SessionManager.open(info.id, store_factory=store_factory(pg_url)).build_session_context()[
                "messages"] if m["role"] in ("user", "assistant")]
    assert said == ["q1", "A1", "q2", "A2", "q3", "A3", "q4", "A4"]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("reachable", [True, False], ids=["retried", "unreachable"])
def test_a_single_append_whose_answer_is_lost_is_stored_once(proxy: FaultProxy, pg_url: str, tmp_path: Path,
                                                             fault: str, reachable: bool) -> None:
    """Outside a section an append is one statement on an autocommit connection (it commits at its
    Sync). Lost: retried once on a fresh connection, the tail check telling whether the first
    attempt committed; if even that cannot run, the entry is kept and settled before the next write."""
    manager = _manager(proxy.url_for(pg_url), tmp_path, [])
    manager.append_message(_user("q1", 1))
    manager.append_message(_reply("a1", 2))
    proxy.arm(fault, sql="picontext_append")  # type: ignore[arg-type]
    if reachable:
        manager.append_message(_user("q2", 3))
    else:
        proxy.refusing.set()
        with pytest.raises(SessionWriteError) as info:
            manager.append_message(_user("q2", 3))
        assert str(info.value).startswith(f"Cannot confirm that the last 1 entries of session "
                                          f"{manager.get_session_id()} were stored (connection failed: ")
        assert str(info.value).endswith("they stay in this session and are checked, and stored again if missing, "
                                        "before its next write")
        proxy.refusing.clear()
    assert proxy.fired.is_set()
    manager.append_message(_reply("a2", 4))
    check_stored(pg_url, manager, ["q1", "a1", "q2", "a2"])


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("in_section", [True, False], ids=["agent-section", "own-section"])
def test_a_lost_commit_of_a_legacy_sessions_first_append_upgrades_it_once(proxy: FaultProxy, pg_url: str,
                                                                         fault: str, in_section: bool) -> None:
    """A v1 session is upgraded (replaced as v3, the original kept) at its first append, in a
    writer section (the caller's, or its own): the lost COMMIT takes the upgrade with it, or not;
    either way it ends upgraded once, the new entry stored once."""
    lines = [{"type": "session", "id": "legacy-1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/p"},
             {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z",
              "message": {"role": "user", "content": "q1", "timestamp": 1}},
             {"type": "message", "timestamp": "2025-01-01T00:00:02.000Z",
              "message": {"role": "assistant", "content": [{"type": "text", "text": "a1"}], "timestamp": 2}}]
    original = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    import_bytes(database(pg_url), original, source="legacy.jsonl")
    manager = SessionManager.open("legacy-1", store_factory=store_factory(proxy.url_for(pg_url)), warn=[].append)
    proxy.arm(fault)  # type: ignore[arg-type]
    with manager.exclusive(strict=False) if in_section else contextlib.nullcontext():
        manager.append_message(_user("q2", 3))
    assert proxy.fired.is_set()
    manager.append_message(_reply("a2", 4))
    check_stored(pg_url, manager, ["q1", "a1", "q2", "a2"])
    stored = PgSessionStore(pg_url, "legacy-1")
    assert stored.load().entries[0]["version"] == 3
    assert stored.backup(".v1.bak") == original
