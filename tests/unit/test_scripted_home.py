"""The scripted model server lives in `picontext.scripted` (what `picontext demo` runs on); the
names code built on picontext imports from `picontext.testing` keep working."""

from __future__ import annotations

import importlib
import pkgutil

import picontext


def test_old_names_give_the_same_objects() -> None:
    import picontext.scripted as scripted
    import picontext.scripted.model_server as home
    import picontext.testing as testing
    import picontext.testing.model_server as old

    assert old is home
    assert testing.ScriptedModelServer is scripted.ScriptedModelServer is home.ScriptedModelServer
    assert old.RecordedRequest is home.RecordedRequest and old.frames_gemini is home.frames_gemini


def test_the_package_holds_no_test_double_of_the_suite() -> None:
    """PostgreSQL, PgBouncer, the fault proxy and the llama.cpp server are tests/support's."""
    names = {m.name for m in pkgutil.walk_packages(picontext.__path__, "picontext.")}
    assert not names & {"picontext.testing.postgres", "picontext.testing.pgbouncer", "picontext.testing.pgproxy",
                        "picontext.testing.llama_server"}
    assert importlib.import_module("support.postgres").PostgresCluster.__module__ == "support.postgres"
