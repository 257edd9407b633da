"""PostgreSQL session store benchmarks (docs/performance.md, "PostgreSQL store").

    .venv/bin/python bench/bench_pg_store.py [load|resume|listing|all] [--url URL] [options]

Without --url a throwaway cluster is started (durable: fsync on, the server's defaults).

load     P writer processes x S sessions x A appends. Neighbouring writers share `--shared`
         sessions (two processes continuing the same session); writers are killed with kill -9 at
         random and restarted until every session holds A bench entries. Then every session is
         checked: entries acknowledged to a writer but missing (lost), the same append counter
         twice (duplicated), an entry that does not continue the one before it (forked). p50/p95/
         p99 of the appends' latency (the `append` call, as the writer saw it).
resume   a realistic N-entry session (bench/gen_sessions.py) opened and projected from JSONL and
         from PostgreSQL (read + parse + first context), then the per-turn cost (append one entry +
         project) at that length.
listing  K sessions in the database; time of the listing query and of `picontext sessions --all`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support: test doubles

BENCH_TYPE = "bench_append"


# ------------------------------------------------------------------ load: the writer process


def _state(entries: list[Any]) -> tuple[Any, int]:
    """(leaf id, bench entries on the log) of a loaded or extended log."""
    leaf, count = None, 0
    for e in entries:
        if isinstance(e, dict) and e.get("type") != "session":
            leaf = e.get("id", leaf)
            if e.get("customType") == BENCH_TYPE:
                count += 1
    return leaf, count


def worker(url: str, sessions: list[str], appends: int, log_path: str, think_ms: float = 0.0) -> None:
    from picontext.errors import StaleSessionError
    from picontext.session.postgres import PgSessionStore

    stores = {sid: PgSessionStore(url, sid) for sid in sessions}
    state: dict[str, list[Any]] = {}
    for sid, store in stores.items():
        loaded = store.load()
        leaf, count = _state(loaded.entries)
        state[sid] = [loaded.tail, leaf, count]
    log = open(log_path, "a", buffering=1)  # one line per acknowledged append, written after the ack
    rng = random.Random(os.getpid())
    pending = [sid for sid in sessions if state[sid][2] < appends]
    while pending:
        sid = rng.choice(pending)
        tail, leaf, count = state[sid]
        entry = {"type": "custom", "customType": BENCH_TYPE, "data": {"n": count, "pid": os.getpid()},
                 "id": uuid.uuid4().hex[:12], "parentId": leaf, "timestamp": "2026-03-01T10:00:00.000Z"}
        if think_ms:
            time.sleep(rng.expovariate(1 / think_ms) / 1000)  # an agent's model call between appends
        started, cpu = time.perf_counter(), time.process_time()
        try:
            tail = stores[sid].append([entry], expect=tail)
        except StaleSessionError:
            new = stores[sid].read_since(tail)
            if new is None:
                loaded = stores[sid].load()
                state[sid] = [loaded.tail, *_state(loaded.entries)]
            else:
                leaf2, added = _state(new.entries)
                state[sid] = [new.tail, leaf2 if leaf2 is not None else leaf, count + added]
            if state[sid][2] >= appends:
                pending.remove(sid)
            continue
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        log.write(f"{sid} {entry['id']} {count} {elapsed * 1e6:.0f} {cpu * 1e6:.0f}\n")
        state[sid] = [tail, entry["id"], count + 1]
        if count + 1 >= appends:
            pending.remove(sid)
    log.close()


# ------------------------------------------------------------------ load: the driver


def _proc_cpu(pid: int, *, children: bool = False) -> float:
    """CPU seconds of a process (with children=True: of its exited, reaped children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[13]) + int(fields[14]) if children else int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _server_cpu(postmaster: int | None) -> float:
    """CPU seconds the server has used: the postmaster, its live processes and its exited backends."""
    if postmaster is None:
        return 0.0
    total = _proc_cpu(postmaster) + _proc_cpu(postmaster, children=True)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster:
                    total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def _server_transactions(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        time.sleep(1.0)  # backends report their counters when they exit or about once a second
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database"
                           " WHERE datname = current_database()").fetchone()
        return int(row[0]) - 1  # this statement's own transaction is counted


def bench_load(url: str, procs: int, sessions: int, appends: int, shared: int, kills: int,
               postmaster: int | None = None, think_ms: float = 0.0) -> dict[str, Any]:
    import resource

    from picontext.session.postgres import PgSessionStore

    workdir = Path(tempfile.mkdtemp(prefix="pg-load-"))
    groups = [[f"load-{p}-{s}" for s in range(sessions)] for p in range(procs)]
    for group in groups:
        for sid in group:
            PgSessionStore(url, sid).create([{"type": "session", "version": 3, "id": sid,
                                              "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/bench"}])
    # Writer p also continues the first `shared` sessions of writer p+1: two processes per session.
    assignments = [groups[p] + groups[(p + 1) % procs][:shared] for p in range(procs)]

    def spawn(p: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, __file__, "worker", url, str(appends), str(workdir / f"w{p}.log"),
                                 str(think_ms), *assignments[p]])

    rng = random.Random(7)
    xacts0, server0, busy0 = _server_transactions(url), _server_cpu(postmaster), _machine_busy()
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()[0]
    load_max = load_before
    started = time.perf_counter()
    running = {p: spawn(p) for p in range(procs)}
    killed = 0
    while running:
        time.sleep(rng.uniform(0.2, 1.0))
        load_max = max(load_max, os.getloadavg()[0])
        for p, proc in list(running.items()):
            code = proc.poll()
            if code is None:
                continue
            if code != 0 and code != -signal.SIGKILL:
                raise SystemExit(f"writer {p} failed with {code}")
            del running[p]
        if killed < kills and running:
            p = rng.choice(sorted(running))
            running[p].send_signal(signal.SIGKILL)
            running[p].wait()
            killed += 1
            running[p] = spawn(p)  # the restarted writer resumes its sessions from the database
    wall = time.perf_counter() - started
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    server1, busy1 = _server_cpu(postmaster), _machine_busy()
    load_after = os.getloadavg()[0]
    xacts = _server_transactions(url) - xacts0

    acked: dict[str, set[str]] = {}
    latencies: list[float] = []
    append_cpu: list[int] = []
    for log in workdir.glob("w*.log"):
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) != 5:
                continue  # a line cut by kill -9 (its append was acknowledged: checked below anyway)
            sid, eid, _n, us, cpu_us = parts
            acked.setdefault(sid, set()).add(eid)
            latencies.append(int(us) / 1000)
            append_cpu.append(int(cpu_us))
    lost = duplicated = forked = total = 0
    for group in groups:
        for sid in group:
            entries = [e for e in PgSessionStore(url, sid).load().entries if e.get("type") != "session"]
            total += len(entries)
            ids = [e["id"] for e in entries]
            counters = [e["data"]["n"] for e in entries]
            duplicated += len(counters) - len(set(counters))
            lost += len(acked.get(sid, set()) - set(ids)) + (appends - len(set(counters)))
            forked += sum(1 for a, b in itertools.pairwise(entries) if b["parentId"] != a["id"])
            forked += sum(1 for e in entries[:1] if e["parentId"] is not None)
    shutil.rmtree(workdir, ignore_errors=True)
    latencies.sort()
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    attempts = len(latencies)  # acknowledged appends (plus the stale ones, counted by the server)
    client_cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    cost = {"append_call_cpu_ms": round(statistics.mean(append_cpu) / 1000, 3),
            "client_cpu_ms_per_append": round(client_cpu / attempts * 1000, 3),
            "client_waits_per_append": round((usage1.ru_nvcsw - usage0.ru_nvcsw) / attempts, 2),
            "server_transactions_per_append": round(xacts / attempts, 2),
            "machine_busy": round((busy1[0] - busy0[0]) / (busy1[1] - busy0[1]), 2),
            "load_avg": f"{load_before:.1f}-{max(load_max, load_after):.1f}"}
    if postmaster is not None:
        cost["server_cpu_ms_per_append"] = round((server1 - server0) / attempts * 1000, 3)
    return {"processes": procs, "sessions": procs * sessions, "appends_per_session": appends,
            "shared_sessions": procs * shared, "kills": killed, "entries": total, "lost": lost,
            "duplicated": duplicated, "forked": forked, "append_ms_p50": round(q[49], 2),
            "append_ms_p95": round(q[94], 2), "append_ms_p99": round(q[98], 2), "wall_s": round(wall, 1),
            "appends_per_s": round(total / wall), "think_ms": think_ms, **cost}


# ------------------------------------------------------------------ resume


def _first_request(repo: Any, ref: str) -> Any:
    """What resuming costs before the first model request: open the session, project the leaf."""
    manager = repo.open(ref, warn=lambda m: None)
    return manager, manager.build_session_context()


def bench_resume(url: str, entries: int, repeat: int) -> dict[str, Any]:
    from gen_sessions import generate
    from picontext.session.postgres import PgSessionStore, database
    from picontext.session.postgres.repository import PostgresRepository
    from picontext.session.postgres.transfer import import_file
    from picontext.session.repository import JsonlRepository

    path = os.path.join(tempfile.mkdtemp(prefix="pg-resume-"), f"s{entries}.jsonl")
    generate(path, entries)
    db = database(url)
    with contextlib.suppress(FileExistsError):
        import_file(db, path)
    sid = json.loads(Path(path).read_bytes().split(b"\n", 1)[0])["id"]
    store = PgSessionStore(db, sid)

    repo = PostgresRepository(db)

    def jsonl() -> Any:
        return _first_request(JsonlRepository(os.path.dirname(path)), path)

    def pg() -> Any:
        return _first_request(repo, sid)

    out: dict[str, Any] = {"entries": entries, "bytes": os.path.getsize(path)}
    for name, fn in (("jsonl", jsonl), ("postgres", pg)):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        out[f"{name}_first_request_ms"] = round(min(times) * 1000, 1)
        out[f"{name}_first_request_ms_median"] = round(statistics.median(times) * 1000, 1)
    out["ratio"] = round(out["postgres_first_request_ms"] / out["jsonl_first_request_ms"], 2)
    # Per turn: append a user and an assistant message and project again, on the live manager.
    for name, fn in (("jsonl", jsonl), ("postgres", pg)):
        manager, _ = fn()
        turns = []
        for i in range(30):
            t = time.perf_counter()
            manager.append_message({"role": "user", "content": f"turn {i}", "timestamp": 1772445600000 + i})
            manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                                    "timestamp": 1772445600001 + i})
            manager.build_session_context()
            turns.append(time.perf_counter() - t)
        out[f"{name}_per_turn_ms_median"] = round(statistics.median(turns) * 1000, 2)
    assert store.exists()
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return out


# ------------------------------------------------------------------ listing


def bench_listing(url: str, count: int) -> dict[str, Any]:
    import psycopg

    from picontext.session.postgres import database
    from picontext.session.postgres.listing import list_sessions

    db = database(url)
    with db.connection() as conn:
        have = conn.execute("SELECT count(*) FROM picontext_session WHERE id LIKE 'list-%%'").fetchone()[0]
    if have < count:
        # Bulk-create small sessions through COPY (the listing reads only the session rows).
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            with cur.copy("COPY picontext_session (id, next_seq, cwd, header_timestamp, created_ms, name,"
                          " first_message, entry_count, message_count, size, last_activity_ms) FROM STDIN") as copy:
                for i in range(have, count):
                    copy.write_row((f"list-{i:06d}", 1, f"/home/u/p{i % 37}", "2026-03-01T10:00:00.000Z",
                                    1772359200000.0, None, f"task number {i}".encode(), 40, 20, 60_000,
                                    1772359200000.0 + i * 1000))
            with cur.copy("COPY picontext_entry (session_id, seq, entry_id, type, line) FROM STDIN") as copy:
                for i in range(have, count):
                    sid = f"list-{i:06d}"
                    header = json.dumps({"type": "session", "version": 3, "id": sid,
                                         "timestamp": "2026-03-01T10:00:00.000Z", "cwd": f"/home/u/p{i % 37}"},
                                        separators=(",", ":")).encode()
                    copy.write_row((sid, 0, None, "session", header))
    times = []
    for _ in range(5):
        t = time.perf_counter()
        infos = list_sessions(db)
        times.append(time.perf_counter() - t)
    env = {**os.environ, "PICONTEXT_STORE": url}
    cli = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "picontext", "sessions", "--all", "--json"], env=env, check=True,
                       capture_output=True)
        cli.append(time.perf_counter() - t)
    return {"sessions": len(infos), "list_query_s": round(min(times), 3),
            "list_query_s_median": round(statistics.median(times), 3),
            "cli_sessions_all_json_s": round(min(cli), 3)}


# ------------------------------------------------------------------ main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        url, appends, log, think = sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
        worker(url, sys.argv[6:], appends, log, think)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("load", "resume", "listing", "all"))
    ap.add_argument("--url", help="an existing database (default: a throwaway durable cluster)")
    ap.add_argument("--async-commit", action="store_true",
                    help="synchronous_commit=off (the JSONL store's durability: no fsync per append)")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--shared", type=int, default=5, help="sessions per writer also continued by its neighbour")
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--think-ms", type=float, default=0.0,
                    help="mean pause before each append (exponential), as an agent waits for its model")
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--list-count", type=int, default=10_000)
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        url, postmaster = args.url, None
        if url is None:
            from support.postgres import PostgresCluster

            cluster = stack.enter_context(PostgresCluster(durable=True))
            url = cluster.url
            postmaster = int(Path(cluster.datadir, "postmaster.pid").read_text().split()[0])
        if args.async_commit:
            url += ("&" if "?" in url else "?") + "options=-csynchronous_commit%3Doff"
        results: dict[str, Any] = {}
        if args.what in ("load", "all"):
            results["load"] = bench_load(url, args.procs, args.sessions, args.appends, args.shared, args.kills,
                                         postmaster, args.think_ms)
            print(json.dumps({"load": results["load"]}), flush=True)
        if args.what in ("resume", "all"):
            results["resume"] = bench_resume(url, args.entries, args.repeat)
            print(json.dumps({"resume": results["resume"]}), flush=True)
        if args.what in ("listing", "all"):
            results["listing"] = bench_listing(url, args.list_count)
            print(json.dumps({"listing": results["listing"]}), flush=True)
        from picontext.session.postgres.database import close_all

        close_all()


if __name__ == "__main__":
    main()
