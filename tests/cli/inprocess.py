"""`python -m picontext ARGS` without the subprocess: `main(argv)` in this process, with its own
stdin/stdout/stderr (UTF-8, strict, not terminals), working directory and environment, restored
afterwards. Most CLI tests need nothing more; a few keep real subprocesses for what only a
process shows (signals, terminals, concurrent writers, the `python -m` entry point)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from picontext.cli.main import main


def run_main(*args: str, cwd: str | Path | None = None, stdin: str = "",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", write_through=True)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_limit = sys.getrecursionlimit()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    try:
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse: --help, usage errors
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_env)
        sys.setrecursionlimit(saved_limit)
    return subprocess.CompletedProcess(["picontext", *args], code, out_bytes.getvalue().decode("utf-8"),
                                       err_bytes.getvalue().decode("utf-8"))
