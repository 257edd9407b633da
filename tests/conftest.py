from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from picontext.scripted import ScriptedModelServer

REPO = Path(__file__).resolve().parent.parent
SHARED_SESSIONS = REPO.parent / "shared" / "data" / "pi-sessions"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own PICONTEXT_DIR (and cache directory) so nothing touches the user's
    real sessions or caches."""
    home = tmp_path_factory.mktemp("picontext-home")
    monkeypatch.setenv("PICONTEXT_DIR", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.delenv("PICONTEXT_CACHE_DIR", raising=False)
    return home


@pytest.fixture(scope="session")
def _model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def server(_model_server: ScriptedModelServer) -> Iterator[ScriptedModelServer]:
    """The scripted model server (real HTTP on 127.0.0.1), reset for each test; fails the test on
    unexpected requests or unused steps."""
    _model_server.reset()
    yield _model_server
    _model_server.assert_complete()


# --- PostgreSQL (tests of the PostgreSQL session store) --------------------------------------


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL server for the whole run (initdb in a temporary directory, a private
    port on 127.0.0.1, stopped at the end). Without server binaries the tests are skipped locally
    and fail in CI (CI=true), where scripts/install/postgres.sh must have installed them."""
    from support.postgres import PostgresCluster, PostgresUnavailable

    try:
        cluster = PostgresCluster(durable=False).start()
    except PostgresUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI needs PostgreSQL for the session store tests: {exc}")
        pytest.skip(str(exc))
    yield cluster
    cluster.close()


_pg_databases = itertools.count(1)


@pytest.fixture
def pg_url(pg_cluster: Any) -> Iterator[str]:
    """The URL of a fresh, empty database on the test cluster, dropped after the test."""
    import psycopg

    from picontext.session.postgres.database import close_all

    name = f"t{os.getpid()}_{next(_pg_databases)}"
    admin = pg_cluster.url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin.rsplit("/", 1)[0] + f"/{name}"
    yield url
    close_all()
    if pg_cluster.running:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_bouncer(pg_cluster: Any) -> Iterator[Any]:
    """A real PgBouncer in transaction-pooling mode in front of the test cluster (a private port on
    127.0.0.1, stopped at the end). Without the pgbouncer binary the tests are skipped locally and
    fail in CI (CI=true), where scripts/install/pgbouncer.sh must have installed it."""
    from support.pgbouncer import PgBouncer, PgBouncerUnavailable

    try:
        bouncer = PgBouncer(pg_cluster).start()
    except PgBouncerUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI needs PgBouncer for the session store tests: {exc}")
        pytest.skip(str(exc))
    yield bouncer
    bouncer.close()


@pytest.fixture
def pgbouncer_url(pg_bouncer: Any, pg_url: str) -> str:
    """A fresh database on the test cluster (as `pg_url`), reached through the PgBouncer."""
    return str(pg_bouncer.url_for(pg_url.rsplit("/", 1)[1]))


# --- every kind of session store -------------------------------------------------------------

STORE_KINDS = ("jsonl", "memory", "postgres", "sqlite")
SQLITE_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sqlite_store"


def third_party_sqlite() -> None:
    """Register the third-party store of examples/sqlite_store for `sqlite:` URLs, as its entry
    point would once installed (tests/stores/test_third_party_store.py checks the entry point)."""
    import importlib.util

    from picontext.session.repository import register_store

    spec = importlib.util.spec_from_file_location("picontext_sqlite", SQLITE_EXAMPLE / "picontext_sqlite.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.get("picontext_sqlite") or importlib.util.module_from_spec(spec)
    if "picontext_sqlite" not in sys.modules:
        sys.modules["picontext_sqlite"] = module
        spec.loader.exec_module(module)
    register_store("sqlite", module.open_sqlite_repository)


@pytest.fixture(params=STORE_KINDS)
def repository_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of an empty session repository of each kind: a JSONL directory, a private memory
    store, a fresh PostgreSQL database (skipped locally without PostgreSQL, as `pg_url`)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    if request.param == "memory":
        return f"memory:t{os.getpid()}-{next(_memory_names)}"
    if request.param == "sqlite":
        third_party_sqlite()
        return f"sqlite://{tmp_path_factory.mktemp('sqlite')}/sessions.db"
    return str(tmp_path_factory.mktemp("sessions"))


_memory_names = itertools.count(1)
