"""Pi reads a database session whose writes met a lost COMMIT (on its way, or its answer on the way
back; for a reply's writer section and for the transaction that creates the session), exported:
no id twice, no parent missing, and the context at its last entry holds the whole history, the
same as picontext's (docs/storage.md, "A lost COMMIT")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sessiongen
from test_projection_vs_pi import PythonSide, compare_file

from picontext.session.manager import SessionManager
from picontext.session.postgres import PgSessionStore, database, store_factory
from picontext.session.postgres.database import close_all
from picontext.session.postgres.transfer import export_bytes
from picontext.testing.pgproxy import FaultProxy

PiReference = Any
pytestmark = pytest.mark.differential


@pytest.fixture
def proxy(pg_cluster: Any) -> Iterator[FaultProxy]:
    with FaultProxy(pg_cluster.port) as fault_proxy:
        yield fault_proxy
    close_all()


def _say(manager: SessionManager, role: str, text: str) -> None:
    content: Any = text if role == "user" else [{"type": "text", "text": text}]
    manager.append_message({"role": role, "content": content, "timestamp": len(manager.get_entries()) + 1})


@pytest.mark.parametrize("where", ["reply", "opening"])
@pytest.mark.parametrize("fault", ["commit", "answer"])
def test_pi_reads_the_whole_history_after_a_lost_commit(pi: PiReference, proxy: FaultProxy, pg_url: str,
                                                        tmp_path: Path, fault: Any, where: str) -> None:
    PgSessionStore(proxy.url_for(pg_url), "warm-up").exists()  # the schema's own commits come first
    manager = SessionManager.create(str(tmp_path), str(tmp_path), store_factory=store_factory(proxy.url_for(pg_url)))
    manager.append_model_change("p", "m")
    manager.append_thinking_level_change("off")
    manager.append_message({"role": "system", "content": "be brief", "timestamp": 0})
    _say(manager, "user", "q1")
    if where == "reply":
        _say(manager, "assistant", "a1")
        _say(manager, "user", "q2")
    proxy.arm(fault)
    with manager.exclusive(strict=False):  # how the agent persists each message
        _say(manager, "assistant", "a2" if where == "reply" else "a1")
    assert proxy.fired.is_set()
    _say(manager, "user", "next")
    _say(manager, "assistant", "done")

    out = tmp_path / "session.jsonl"
    out.write_bytes(export_bytes(database(pg_url), manager.get_session_id()) or b"")
    facts = pi.op("session.treeFacts", str(out))
    messages = 1 + (6 if where == "reply" else 4)  # the system message, then the turns
    assert facts == {"count": len(manager.get_entries()), "duplicates": [], "dangling": [], "messages": messages}
    assert compare_file(pi, PythonSide(tmp_path), out, [sessiongen.UNDEFINED], label=f"{fault} {where}") == 1
