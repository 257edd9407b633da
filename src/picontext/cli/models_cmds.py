"""`picontext models list [--json] [--provider P]`: the model catalog (built-in + models.json).

One row per model: `provider/id`, wire API, context window, maximum output tokens, prices in US
dollars per million tokens (input / output / cache read / cache write), reasoning support, and
where its key would come from (`env NAME`, `auth file`, `model apiKey`, `local` for keyless
local servers, or `-` when none is configured). Keys themselves are never printed.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import orjson
from rich.table import Table

from picontext.ai.auth import ENV_API_KEYS, KEYLESS_PROVIDERS, env_var_for, resolve_api_key
from picontext.ai.models import Model, default_catalog, is_local_base_url, picontext_dir
from picontext.cli import render
from picontext.cli.base import CliError


def key_source(model: Model) -> str | None:
    """Where the key for `model` comes from, or None; never the key itself.

    Same order as `picontext.ai.auth.resolve_api_key`: the model's `apiKey`, env vars, auth file.
    """
    ref = model.get("apiKey")
    if ref:
        return f"env {ref}" if os.environ.get(ref) else "model apiKey"
    provider = model["provider"]
    for name in ENV_API_KEYS.get(provider, (env_var_for(provider),)):
        if os.environ.get(name):
            return f"env {name}"
    if resolve_api_key(provider, model=model):
        return "auth file"
    if provider in KEYLESS_PROVIDERS or is_local_base_url(model["baseUrl"]):
        return "local"
    return None


def _row(model: Model) -> dict[str, Any]:
    source = key_source(model)
    return {
        "model": f"{model['provider']}/{model['id']}",
        "provider": model["provider"],
        "id": model["id"],
        "name": model["name"],
        "api": model["api"],
        "baseUrl": model["baseUrl"],
        "contextWindow": model["contextWindow"],
        "maxTokens": model["maxTokens"],
        "cost": dict(model["cost"]),
        "reasoning": model["reasoning"],
        "input": list(model["input"]),
        "keyConfigured": source is not None,
        "keySource": source,
        "keyEnv": env_var_for(model["provider"]),
    }


def _tokens(n: int) -> str:
    """1000000 -> 1M, 64000 -> 64K, 40960 -> 41K, 8192 -> 8.2K."""
    for size, unit in ((1_000_000, "M"), (1000, "K")):
        if n >= size:
            return f"{n / size:.1f}".rstrip("0").rstrip(".") + unit
    return str(n)


def _price(value: float) -> str:
    return "-" if value == 0 else f"{value:g}"


def cmd_models_list(args: argparse.Namespace) -> int:
    catalog = default_catalog()
    models = sorted(catalog.all(), key=lambda m: (m["provider"], m["id"]))
    if args.provider:
        models = [m for m in models if m["provider"] == args.provider]
        if not models:
            raise CliError(
                f"no models for provider {args.provider!r}: use one of {', '.join(catalog.providers())} "
                f"or declare it in {picontext_dir() / 'models.json'}"
            )
    rows = [_row(m) for m in models]
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    table = Table(box=None, pad_edge=False)
    for col, justify in (
        ("model", "left"),
        ("api", "left"),
        ("window", "right"),
        ("max out", "right"),
        ("$ in", "right"),
        ("$ out", "right"),
        ("$ cache r", "right"),
        ("$ cache w", "right"),
        ("reasoning", "left"),
        ("key", "left"),
    ):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in rows:
        c = r["cost"]
        table.add_row(
            r["model"],
            r["api"],
            _tokens(r["contextWindow"]),
            _tokens(r["maxTokens"]),
            _price(c["input"]),
            _price(c["output"]),
            _price(c["cacheRead"]),
            _price(c["cacheWrite"]),
            "yes" if r["reasoning"] else "no",
            r["keySource"] or "none",
        )
    out = render.console()
    out.print(table)
    out.print("prices: US$ per million tokens; key: where it comes from (the key itself is never shown)")
    missing = sorted({r["keyEnv"] for r in rows if not r["keyConfigured"]})
    if missing:
        out.print(f"no key: set {', '.join(missing)} or run `picontext auth set PROVIDER`")
    return 0
