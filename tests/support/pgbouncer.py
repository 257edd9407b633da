"""A throwaway PgBouncer in front of a `PostgresCluster`, for tests: transaction pooling (the
mode a managed pooler usually runs in), a private port on 127.0.0.1, a temporary directory for its
configuration, log and pid file, stopped and deleted at the end.

PgBouncer refuses to run as root, so as root it runs as the cluster's unprivileged user.

    with PostgresCluster() as pg, PgBouncer(pg) as bouncer:
        url = bouncer.url  # postgresql://picontext@127.0.0.1:PORT/picontext
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any

from support.postgres import DB_NAME, DB_USER, PostgresCluster, free_port


class PgBouncerUnavailable(RuntimeError):
    """No pgbouncer binary on this machine (run scripts/install/pgbouncer.sh)."""


def find_pgbouncer() -> str:
    """`$PICONTEXT_PGBOUNCER` if set, else `pgbouncer` on PATH or in /usr/sbin (Debian's place)."""
    env = os.environ.get("PICONTEXT_PGBOUNCER")
    candidates = [env] if env else [shutil.which("pgbouncer") or "", "/usr/sbin/pgbouncer"]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise PgBouncerUnavailable("pgbouncer not found; install it with scripts/install/pgbouncer.sh")


class PgBouncer:
    """One PgBouncer for `cluster`'s databases. `pool_size` server connections per database and
    user: small, so that clients really share server connections."""

    def __init__(self, cluster: PostgresCluster, *, pool_mode: str = "transaction", pool_size: int = 3) -> None:
        self.binary = find_pgbouncer()
        self.cluster = cluster
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.port = 0
        self.root = ""
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_for(DB_NAME)

    def url_for(self, database: str) -> str:
        return f"postgresql://{DB_USER}@127.0.0.1:{self.port}/{database}"

    @property
    def admin_url(self) -> str:
        """The console (`SHOW POOLS`, `SHOW CONFIG`), as the admin user."""
        return f"postgresql://{DB_USER}@127.0.0.1:{self.port}/pgbouncer"

    def start(self) -> PgBouncer:
        self.root = tempfile.mkdtemp(prefix="picontext-pgbouncer-")
        self.port = free_port()
        user = None
        if os.geteuid() == 0:
            user = os.environ.get("PICONTEXT_PG_USER", "nobody")
            entry = pwd.getpwnam(user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        with open(os.path.join(self.root, "users.txt"), "w", encoding="utf-8") as f:
            f.write(f'"{DB_USER}" ""\n')
        config = os.path.join(self.root, "pgbouncer.ini")
        with open(config, "w", encoding="utf-8") as f:
            f.write(
                "[databases]\n"
                f"* = host=127.0.0.1 port={self.cluster.port}\n"
                "[pgbouncer]\n"
                "listen_addr = 127.0.0.1\n"
                f"listen_port = {self.port}\n"
                "unix_socket_dir =\n"
                "auth_type = trust\n"
                f"auth_file = {self.root}/users.txt\n"
                f"admin_users = {DB_USER}\n"
                f"pool_mode = {self.pool_mode}\n"
                f"default_pool_size = {self.pool_size}\n"
                "max_client_conn = 200\n"
                f"logfile = {self.root}/pgbouncer.log\n"
            )
        if user is not None:
            for name in ("users.txt", "pgbouncer.ini"):
                os.chown(os.path.join(self.root, name), pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
        self._proc = subprocess.Popen([self.binary, config], user=user, cwd=self.root,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                raise RuntimeError(f"pgbouncer exited with {self._proc.returncode}: {err.strip()[-500:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"pgbouncer did not listen on port {self.port} within {timeout:g}s")
            time.sleep(0.05)  # polling a port: there is no readiness event to wait on

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGINT)  # SIGINT: immediate shutdown
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            if self._proc.stderr is not None:
                self._proc.stderr.close()
            self._proc = None
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = ""

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
