from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from picontext.testing import ScriptedModelServer

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
    from picontext.testing.postgres import PostgresCluster, PostgresUnavailable

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
    from picontext.testing.pgbouncer import PgBouncer, PgBouncerUnavailable

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
