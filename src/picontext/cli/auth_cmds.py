"""`picontext auth set|list|remove`: API keys in `<PICONTEXT_DIR>/auth.json` (mode 0600).

* `auth set PROVIDER` reads the key from standard input: a hidden prompt on a terminal, else the
  first line of the piped input (`printenv KEY | picontext auth set openai`). There is no way to
  pass the key as an argument, so it never lands in shell history or `ps` output.
* `auth list` shows every provider with a key source: environment variables (which win) and the
  auth file. Keys are redacted to their last four characters.
* `auth remove PROVIDER` deletes the provider's entry from the auth file.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sys
from typing import Any

import orjson
from rich.table import Table

from picontext.ai.auth import (
    ENV_API_KEYS,
    auth_file,
    env_var_for,
    read_auth,
    remove_api_key,
    save_api_key,
)
from picontext.cli import render
from picontext.cli.base import CliError

_PROVIDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def redact(key: str) -> str:
    """`…` plus the last four characters; keys shorter than 12 characters show nothing."""
    return "…" + key[-4:] if len(key) >= 12 else "****"


def _check_provider(provider: str) -> str:
    if not _PROVIDER.match(provider):
        raise CliError(f"invalid provider name {provider!r}: use letters, digits, '.', '_' or '-'")
    return provider


def _read_key(provider: str) -> str:
    if sys.stdin is None:
        raise CliError("no standard input to read the key from")
    if sys.stdin.isatty():
        key = getpass.getpass(f"API key for {provider} (input hidden): ")
    else:
        key = sys.stdin.readline()
    return key.strip()


def cmd_auth_set(args: argparse.Namespace) -> int:
    if getattr(args, "extra", None):
        # Not repeated back: it is most likely the key, and error output ends up in logs.
        raise CliError("`auth set` takes only PROVIDER; pipe the key on stdin, e.g. "
                       f"`printenv KEY | picontext auth set {args.provider}` (the argument was not stored)")
    provider = _check_provider(args.provider)
    key = _read_key(provider)
    if not key:
        raise CliError(
            f"no key given for {provider}: pipe it on stdin, e.g. `printenv KEY | picontext auth set {provider}`"
        )
    if any(ch.isspace() for ch in key):
        raise CliError("the key contains whitespace; pass only the key on the first line of stdin")
    path = save_api_key(provider, key)
    print(f"stored key {redact(key)} for {provider} in {path} (mode 0600)")
    shadow = [n for n in ENV_API_KEYS.get(provider, (env_var_for(provider),)) if os.environ.get(n)]
    if shadow:
        print(f"note: {shadow[0]} is set in the environment and takes precedence", file=sys.stderr)
    return 0


def _entry_key(entry: object) -> str | None:
    if isinstance(entry, str) and entry:
        return entry
    if isinstance(entry, dict):
        key = entry.get("key") or entry.get("apiKey") or entry.get("access")
        if isinstance(key, str) and key:
            return key
    return None


def key_sources() -> list[dict[str, Any]]:
    """Every configured key source, env vars first (they win), keys redacted."""
    rows: list[dict[str, Any]] = []
    env_providers: dict[str, tuple[str, ...]] = dict(ENV_API_KEYS)
    stored = read_auth(auth_file())
    for provider in stored:
        env_providers.setdefault(provider, (env_var_for(provider),))
    active: set[str] = set()
    for provider, names in sorted(env_providers.items()):
        for name in names:
            value = os.environ.get(name)
            if value:
                rows.append({"provider": provider, "source": f"env {name}", "key": redact(value), "active": True})
                active.add(provider)
                break
    path = auth_file()
    for provider, entry in sorted(stored.items()):
        key = _entry_key(entry)
        if key is None:
            continue
        rows.append(
            {"provider": provider, "source": f"auth file {path}", "key": redact(key), "active": provider not in active}
        )
    rows.sort(key=lambda r: (r["provider"], not r["active"]))
    return rows


def cmd_auth_list(args: argparse.Namespace) -> int:
    rows = key_sources()
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    out = render.console()
    if not rows:
        out.print(f"no keys configured: set e.g. OPENAI_API_KEY, or run `picontext auth set PROVIDER` ({auth_file()})")
        return 0
    table = Table(box=None, pad_edge=False)
    for col in ("provider", "key", "source", "used"):
        table.add_column(col, no_wrap=True)
    for r in rows:
        table.add_row(r["provider"], r["key"], r["source"], "yes" if r["active"] else "no (env wins)")
    out.print(table)
    return 0


def cmd_auth_remove(args: argparse.Namespace) -> int:
    provider = _check_provider(args.provider)
    if not remove_api_key(provider):
        raise CliError(f"no stored key for {provider} in {auth_file()}")
    print(f"removed the key for {provider} from {auth_file()}")
    shadow = [n for n in ENV_API_KEYS.get(provider, (env_var_for(provider),)) if os.environ.get(n)]
    if shadow:
        print(f"note: {shadow[0]} is still set in the environment", file=sys.stderr)
    return 0
