"""`picontext store import|export`: session files into and out of the session store.

The store is the one every command works on (`--store URL` / `$PICONTEXT_STORE`, default the
session files under `$PICONTEXT_DIR`; cli/repo.py). Import keeps a file's bytes exactly and
export gives them back, so a session travels between stores and Pi byte for byte.
"""

from __future__ import annotations

import argparse
import sys

from picontext.cli.repo import repository
from picontext.errors import PicontextError, SessionFormatError

STORE_ENV = "PICONTEXT_STORE"




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
