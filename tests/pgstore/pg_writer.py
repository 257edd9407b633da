"""A writer process for the concurrency tests: `python pg_writer.py URL SESSION MODE [N]`.

race: load the tail, print "ready", wait for a line on stdin, append one entry that continues
      the loaded leaf with expect=tail, print "ok" or "stale <message>"; after a stale, re-read and
      append again, printing "ok-after-reload".
loop: append N entries, each continuing the current leaf; on StaleSessionError read what the other
      writers appended (read_since) and retry on the new leaf. Prints "done <stale count>".
acks: like loop, alone on the session, printing "ack <entry id>" after each append returned.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

from picontext.errors import StaleSessionError
from picontext.session.postgres import PgSessionStore


def _leaf(entries: list[Any], leaf: Any) -> Any:
    ids = [e["id"] for e in entries if isinstance(e, dict) and e.get("type") != "session" and "id" in e]
    return ids[-1] if ids else leaf


def _entry(parent: Any, who: str, n: int) -> dict[str, Any]:
    return {"type": "custom", "customType": "writer", "data": {"who": who, "n": n}, "id": uuid.uuid4().hex[:16],
            "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z"}


def main() -> None:
    url, session, mode = sys.argv[1:4]
    store = PgSessionStore(url, session)
    loaded = store.load()
    tail, leaf = loaded.tail, _leaf(loaded.entries, None)
    who = uuid.uuid4().hex[:6]
    if mode == "race":
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            store.append([_entry(leaf, who, 0)], expect=tail)
            print("ok", flush=True)
        except StaleSessionError as exc:
            print(f"stale {exc}", flush=True)
            loaded = store.load()
            store.append([_entry(_leaf(loaded.entries, None), who, 1)], expect=loaded.tail)
            print("ok-after-reload", flush=True)
        return
    if mode == "acks":
        for n in range(int(sys.argv[4])):
            entry = _entry(leaf, who, n)
            tail = store.append([entry], expect=tail)
            leaf = entry["id"]
            print(f"ack {leaf}", flush=True)
        return
    stale = 0
    for n in range(int(sys.argv[4])):
        while True:
            entry = _entry(leaf, who, n)
            try:
                tail = store.append([entry], expect=tail)
                leaf = entry["id"]
                break
            except StaleSessionError:
                stale += 1
                assert tail is not None
                new = store.read_since(tail)
                assert new is not None
                tail, leaf = new.tail, _leaf(new.entries, leaf)
    print(f"done {stale}", flush=True)


if __name__ == "__main__":
    main()
