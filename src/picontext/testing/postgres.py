"""A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` in a temporary directory,
a private port on 127.0.0.1 (and a unix socket in the same directory), stopped and deleted at
the end.

PostgreSQL refuses to run as root, so when the caller is root the cluster is created and run as
an unprivileged user (`nobody` unless `PICONTEXT_PG_USER` names another); the data directory is
handed to that user.

    with PostgresCluster() as pg:
        url = pg.url  # postgresql://picontext@127.0.0.1:PORT/picontext
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

DB_USER = "picontext"
DB_NAME = "picontext"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine (run scripts/install/postgres.sh)."""


def find_bindir() -> str:
    """The directory holding `initdb`, `pg_ctl` and `postgres`: `$PICONTEXT_PG_BINDIR` if set,
    else the one on PATH, else the newest Debian server under /usr/lib/postgresql."""
    env = os.environ.get("PICONTEXT_PG_BINDIR")
    if env:  # an explicit choice: only there
        candidates = [env]
    else:
        on_path = shutil.which("initdb")
        candidates = [os.path.dirname(os.path.realpath(on_path))] if on_path else []
        candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for directory in candidates:
        if all(os.access(os.path.join(directory, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return directory
    raise PostgresUnavailable("PostgreSQL server binaries not found (initdb, pg_ctl, postgres); "
                              "install them with scripts/install/postgres.sh")


def _version_key(path: str) -> float:
    try:
        return float(path.split("/")[-2])
    except ValueError:
        return 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """One private server. `settings` are extra `postgresql.conf` lines (name -> value); `durable`
    False turns off fsync for quick tests (benchmarks keep the defaults)."""

    def __init__(self, *, durable: bool = True, settings: dict[str, str] | None = None) -> None:
        self.bindir = find_bindir()
        self.durable = durable
        self.settings = dict(settings or {})
        self.port = 0
        self.root = ""
        self.datadir = ""
        self._user: str | None = None
        self.running = False

    @property
    def url(self) -> str:
        return f"postgresql://{DB_USER}@127.0.0.1:{self.port}/{DB_NAME}"

    def _run(self, args: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), user=self._user, check=True, capture_output=True, text=True,
                              cwd=self.root, **kw)

    def start(self) -> PostgresCluster:
        self.root = tempfile.mkdtemp(prefix="picontext-pg-")
        self.datadir = os.path.join(self.root, "data")
        if os.geteuid() == 0:
            self._user = os.environ.get("PICONTEXT_PG_USER", "nobody")
            entry = pwd.getpwnam(self._user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        try:
            self._run([os.path.join(self.bindir, "initdb"), "-D", self.datadir, "-U", DB_USER, "--auth=trust",
                       "-E", "UTF8", "--locale=C", "--no-sync"])
            conf = {"listen_addresses": "'127.0.0.1'", "unix_socket_directories": f"'{self.root}'",
                    "max_connections": "200", "shared_buffers": "'128MB'", "log_min_messages": "fatal"}
            if not self.durable:
                # fsync off only: commits still reach the OS, so a killed server (not machine) loses nothing
                conf.update(fsync="off", full_page_writes="off")
            conf.update(self.settings)
            with open(os.path.join(self.datadir, "postgresql.auto.conf"), "a", encoding="utf-8") as f:
                f.writelines(f"{k} = {v}\n" for k, v in conf.items())
            self.start_server()
            self._run([os.path.join(self.bindir, "createdb") if os.path.exists(os.path.join(self.bindir, "createdb"))
                       else "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", DB_USER, DB_NAME])
        except BaseException:
            self.close()
            raise
        return self

    def start_server(self) -> None:
        """(Re)start the server, on a fresh free port the first time and on the same port after."""
        if not self.port:
            self.port = _free_port()
        self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-l", os.path.join(self.root, "log"),
                   "-o", f"-p {self.port}", "-w", "-t", "60", "start"])
        self.running = True

    def stop_server(self, mode: str = "fast") -> None:
        """Stop the server (the database becomes unreachable); `start_server()` brings it back."""
        if self.running:
            self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-m", mode, "-w", "stop"])
            self.running = False

    @contextlib.contextmanager
    def standby(self) -> Iterator[str]:
        """A hot standby of this server (a replica: `pg_basebackup -R`, streaming replication,
        read-only), started on a free port; yields its URL, stopped and deleted at the end."""
        directory = os.path.join(self.root, f"standby-{_free_port()}")
        port = _free_port()
        bindir = self.bindir
        self._run([os.path.join(bindir, "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.port), "-U", DB_USER,
                   "-D", directory, "-R", "-X", "stream", "-c", "fast"])  # fast: no wait for a spread checkpoint
        with open(os.path.join(directory, "postgresql.auto.conf"), "a", encoding="utf-8") as f:
            f.write(f"unix_socket_directories = '{directory}'\n")
        pg_ctl = os.path.join(bindir, "pg_ctl")
        self._run([pg_ctl, "-D", directory, "-l", os.path.join(directory, "log"), "-o", f"-p {port}", "-w", "-t", "60",
                   "start"])
        try:
            yield f"postgresql://{DB_USER}@127.0.0.1:{port}/{DB_NAME}"
        finally:
            with contextlib.suppress(subprocess.CalledProcessError, OSError):
                self._run([pg_ctl, "-D", directory, "-m", "immediate", "-w", "stop"])
            shutil.rmtree(directory, ignore_errors=True)

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            self.stop_server("immediate")
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = ""

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
