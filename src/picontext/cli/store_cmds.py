"""`picontext store import|export`: session files into and out of the session store.

The store is the one every command works on (`--store URL` / `$PICONTEXT_STORE`, default the
session files under `$PICONTEXT_DIR`; cli/repo.py). Import keeps a file's bytes exactly and
export gives them back, so a session travels between stores and Pi byte for byte.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from picontext.cli.repo import repository
from picontext.errors import PicontextError, SessionFormatError

STORE_ENV = "PICONTEXT_STORE"


def register(sub: Any) -> None:
    from picontext.cli.main import described

    p = sub.add_parser("store", help="copy sessions between JSONL files and the session store "
                       f"(--store URL or ${STORE_ENV})",
                       **described("Copy sessions between JSONL files and the session store (docs/storage.md).",
                                   "picontext --store postgresql:///picontext store import *.jsonl",
                                   "picontext --store postgresql:///picontext store export 01a22be0 > s.jsonl"))
    ssub = p.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    ip = ssub.add_parser("import", help="store session files in the session store, byte for byte",
                         **described("Store session files in the session store, byte for byte.",
                                     "picontext --store postgresql:///picontext store import s1.jsonl s2.jsonl"))
    ip.add_argument("files", nargs="+", metavar="FILE", help="session files (.jsonl)")
    ip.set_defaults(handler=cmd_import)
    ep = ssub.add_parser("export", help="write a stored session to stdout as its JSONL file",
                         **described("Write a stored session to stdout as its JSONL file (readable by Pi).",
                                     "picontext --store postgresql:///picontext store export 01a22be0 > s.jsonl"))
    ep.add_argument("session", metavar="ID", help="session id or a unique prefix")
    ep.set_defaults(handler=cmd_export)


def cmd_import(args: argparse.Namespace) -> int:
    repo = repository()
    failed = 0
    for path in args.files:
        try:
            session_id = repo.import_file(path)
        except FileExistsError:
            failed += 1
            print(f"picontext: {path}: session already in the store; not imported", file=sys.stderr)
        except SessionFormatError as exc:  # not a session, or a FIFO, device or directory
            failed += 1
            print(f"picontext: {exc}", file=sys.stderr)
        except PicontextError as exc:  # the store refused (SessionWriteError is an OSError too)
            failed += 1
            print(f"picontext: {path}: {exc}", file=sys.stderr)
        except OSError as exc:
            failed += 1
            print(f"picontext: cannot read {path}: {exc.strerror}", file=sys.stderr)
        else:
            print(f"{session_id}\t{path}")
    return 2 if failed else 0


def cmd_export(args: argparse.Namespace) -> int:
    data = repository().export_bytes(args.session)
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0
