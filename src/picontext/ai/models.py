"""Model records, the built-in catalog, user models from `<PICONTEXT_DIR>/models.json`, and cost.

A `Model` is a TypedDict with Pi's camelCase keys, so a `models.json` entry and a built-in row
look the same. Model facts live here and only here (`reasoning`, `input`, `contextWindow`,
`maxTokens`, `cost`, `compat`): the agent loop never checks a provider name.

Lookup is `provider/modelId`; the model id may itself contain `/` (`openrouter/openai/gpt-4o`).

`models.json` (the same shape as Pi's) ::

    {"providers": {"ollama": {"baseUrl": "http://localhost:11434/v1", "api": "openai-completions",
                              "apiKey": "OLLAMA_API_KEY",
                              "models": [{"id": "qwen3:32b", "contextWindow": 40960, "maxTokens": 8192}]}}}

Fields left out of a user model get defaults (`api` from the provider entry, cost 0, window
128000, `maxTokens` 16384, `input` ["text"], `reasoning` false). A user model with the same
`provider/id` as a built-in one replaces it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from picontext._files import read_config_text
from picontext.ai.types import Cost, Usage
from picontext.errors import ConfigError

__all__ = [
    "KNOWN_APIS",
    "Model",
    "ModelCatalog",
    "ModelCost",
    "builtin_models",
    "calculate_cost",
    "default_catalog",
    "is_local_base_url",
    "load_user_models",
    "picontext_dir",
]

KNOWN_APIS = ("openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai")


class ModelCost(TypedDict):
    """US dollars per million tokens."""

    input: float
    output: float
    cacheRead: float
    cacheWrite: float


class Model(TypedDict):
    id: str
    name: str
    api: str
    provider: str
    baseUrl: str
    reasoning: bool
    input: list[str]
    cost: ModelCost
    contextWindow: int
    maxTokens: int
    headers: NotRequired[dict[str, str]]
    compat: NotRequired[dict[str, Any]]
    thinkingLevelMap: NotRequired[dict[str, str | None]]
    """Pi's per-level provider values: a string replaces the level's wire value, None marks the
    level unsupported (e.g. `"off": None` for a model that cannot switch reasoning off)."""
    apiKey: NotRequired[str]
    """Only on user models: a literal key or the name of an environment variable holding it."""


# provider, id, name, api, baseUrl, reasoning, input, (in, out, cacheRead, cacheWrite), window, max
# Numbers from Pi's generated catalog (pi-ai 0.87.0 providers/data/*.json).
# fmt: off
_BUILTIN: tuple[tuple[Any, ...], ...] = (
    ('openai', 'gpt-4o', 'GPT-4o', 'openai-responses', 'https://api.openai.com/v1', False, ('text', 'image'), (2.5, 10, 1.25, 0), 128000, 16384),  # noqa: E501
    ('openai', 'gpt-4o-mini', 'GPT-4o mini', 'openai-responses', 'https://api.openai.com/v1', False, ('text', 'image'), (0.15, 0.6, 0.075, 0), 128000, 16384),  # noqa: E501
    ('openai', 'gpt-4.1', 'GPT-4.1', 'openai-responses', 'https://api.openai.com/v1', False, ('text', 'image'), (2, 8, 0.5, 0), 1047576, 32768),  # noqa: E501
    ('openai', 'gpt-4.1-mini', 'GPT-4.1 mini', 'openai-responses', 'https://api.openai.com/v1', False, ('text', 'image'), (0.4, 1.6, 0.1, 0), 1047576, 32768),  # noqa: E501
    ('openai', 'o3', 'o3', 'openai-responses', 'https://api.openai.com/v1', True, ('text', 'image'), (2, 8, 0.5, 0), 200000, 100000),  # noqa: E501
    ('openai', 'o4-mini', 'o4-mini', 'openai-responses', 'https://api.openai.com/v1', True, ('text', 'image'), (1.1, 4.4, 0.275, 0), 200000, 100000),  # noqa: E501
    ('openai', 'gpt-5', 'GPT-5', 'openai-responses', 'https://api.openai.com/v1', True, ('text', 'image'), (1.25, 10, 0.125, 0), 400000, 128000),  # noqa: E501
    ('openai', 'gpt-5-mini', 'GPT-5 Mini', 'openai-responses', 'https://api.openai.com/v1', True, ('text', 'image'), (0.25, 2, 0.025, 0), 400000, 128000),  # noqa: E501
    ('anthropic', 'claude-opus-4-5', 'Claude Opus 4.5 (latest)', 'anthropic-messages', 'https://api.anthropic.com', True, ('text', 'image'), (5, 25, 0.5, 6.25), 200000, 64000),  # noqa: E501
    ('anthropic', 'claude-sonnet-4-5', 'Claude Sonnet 4.5 (latest)', 'anthropic-messages', 'https://api.anthropic.com', True, ('text', 'image'), (3, 15, 0.3, 3.75), 1000000, 64000),  # noqa: E501
    ('anthropic', 'claude-sonnet-4-6', 'Claude Sonnet 4.6', 'anthropic-messages', 'https://api.anthropic.com', True, ('text', 'image'), (3, 15, 0.3, 3.75), 1000000, 128000),  # noqa: E501
    ('anthropic', 'claude-haiku-4-5', 'Claude Haiku 4.5 (latest)', 'anthropic-messages', 'https://api.anthropic.com', True, ('text', 'image'), (1, 5, 0.1, 1.25), 200000, 64000),  # noqa: E501
    ('google', 'gemini-2.5-pro', 'Gemini 2.5 Pro', 'google-generative-ai', 'https://generativelanguage.googleapis.com/v1beta', True, ('text', 'image'), (1.25, 10, 0.125, 0), 1048576, 65536),  # noqa: E501
    ('google', 'gemini-2.5-flash', 'Gemini 2.5 Flash', 'google-generative-ai', 'https://generativelanguage.googleapis.com/v1beta', True, ('text', 'image'), (0.3, 2.5, 0.03, 0), 1048576, 65536),  # noqa: E501
    ('google', 'gemini-2.5-flash-lite', 'Gemini 2.5 Flash-Lite', 'google-generative-ai', 'https://generativelanguage.googleapis.com/v1beta', True, ('text', 'image'), (0.1, 0.4, 0.01, 0), 1048576, 65536),  # noqa: E501
    ('google', 'gemini-3-flash-preview', 'Gemini 3 Flash Preview', 'google-generative-ai', 'https://generativelanguage.googleapis.com/v1beta', True, ('text', 'image'), (0.5, 3, 0.05, 0), 1048576, 65536),  # noqa: E501
    ('groq', 'llama-3.3-70b-versatile', 'Llama 3.3 70B', 'openai-completions', 'https://api.groq.com/openai/v1', False, ('text',), (0.59, 0.79, 0, 0), 131072, 32768),  # noqa: E501
    ('groq', 'openai/gpt-oss-120b', 'GPT OSS 120B', 'openai-completions', 'https://api.groq.com/openai/v1', True, ('text',), (0.15, 0.6, 0.075, 0), 131072, 65536),  # noqa: E501
    ('deepseek', 'deepseek-v4-pro', 'DeepSeek V4 Pro', 'openai-completions', 'https://api.deepseek.com', True, ('text',), (1.32, 3.96, 0.044, 0), 1000000, 384000),  # noqa: E501
    ('deepseek', 'deepseek-flash', 'DeepSeek V4.1 Flash', 'openai-completions', 'https://api.deepseek.com', True, ('text', 'image'), (0.3, 1.2, 0.006, 0), 1000000, 384000),  # noqa: E501
    ('xai', 'grok-4.3', 'Grok 4.3', 'openai-responses', 'https://api.x.ai/v1', True, ('text', 'image'), (1.25, 2.5, 0.2, 0), 1000000, 30000),  # noqa: E501
    ('mistral', 'mistral-large-latest', 'Mistral Large (latest)', 'openai-completions', 'https://api.mistral.ai/v1', False, ('text', 'image'), (0.5, 1.5, 0.05, 0), 262144, 262144),  # noqa: E501
    ('mistral', 'devstral-medium-latest', 'Devstral 2 (latest)', 'openai-completions', 'https://api.mistral.ai/v1', False, ('text',), (0.4, 2, 0.04, 0), 262144, 262144),  # noqa: E501
    ('cerebras', 'gpt-oss-120b', 'GPT OSS 120B', 'openai-completions', 'https://api.cerebras.ai/v1', True, ('text',), (0.35, 0.75, 0, 0), 131072, 40960),  # noqa: E501
    ('openrouter', 'anthropic/claude-sonnet-4.5', 'Anthropic: Claude Sonnet 4.5', 'openai-completions', 'https://openrouter.ai/api/v1', True, ('text', 'image'), (3, 15, 0.3, 3.75), 1000000, 64000),  # noqa: E501
    ('openrouter', 'openai/gpt-4o', 'OpenAI: GPT-4o', 'openai-completions', 'https://openrouter.ai/api/v1', False, ('text', 'image'), (2.5, 10, 1.25, 0), 128000, 16384),  # noqa: E501
    ('together', 'meta-llama/Llama-3.3-70B-Instruct-Turbo', 'Llama 3.3 70B', 'openai-completions', 'https://api.together.ai/v1', False, ('text',), (1.04, 1.04, 0, 0), 131072, 131072),  # noqa: E501
    ('ollama', 'llama3.1:8b', 'Llama 3.1 8B (Ollama, local)', 'openai-completions', 'http://localhost:11434/v1', False, ('text',), (0, 0, 0, 0), 131072, 8192),  # noqa: E501
)
# fmt: on


def builtin_models() -> list[Model]:
    """A fresh list of the built-in models."""
    out: list[Model] = []
    for provider, mid, name, api, base, reasoning, inputs, cost, window, max_tokens in _BUILTIN:
        out.append(
            {
                "id": mid,
                "name": name,
                "api": api,
                "provider": provider,
                "baseUrl": base,
                "reasoning": reasoning,
                "input": list(inputs),
                "cost": {"input": cost[0], "output": cost[1], "cacheRead": cost[2], "cacheWrite": cost[3]},
                "contextWindow": window,
                "maxTokens": max_tokens,
            }
        )
    return out


def is_local_base_url(base_url: str) -> bool:
    """A server on this machine (llama.cpp, Ollama, LM Studio, vLLM): keyless, and reads
    `max_tokens`. Whether it takes two requests at once is the model's `compat.serialRequests`
    (`ai/request_gate.py`), not where it runs."""
    return any(h in base_url for h in ("://localhost", "://127.0.0.1", "://[::1]", "://0.0.0.0"))


def picontext_dir(env: dict[str, str] | None = None) -> Path:
    """`$PICONTEXT_DIR`, default `~/.picontext` (read at call time, never at import)."""
    value = (env if env is not None else os.environ).get("PICONTEXT_DIR")
    return Path(value).expanduser() if value else Path.home() / ".picontext"


def _user_model(provider: str, pconf: dict[str, Any], raw: dict[str, Any], where: str) -> Model:
    mid = raw.get("id")
    if not isinstance(mid, str) or not mid:
        raise ConfigError(f'{where}: every model needs a string "id"')
    api = raw.get("api", pconf.get("api", "openai-completions"))
    if api not in KNOWN_APIS:
        raise ConfigError(
            f"{where}: model {provider}/{mid} has unknown api {api!r}; use one of {', '.join(KNOWN_APIS)}"
        )
    base = raw.get("baseUrl", pconf.get("baseUrl"))
    if not isinstance(base, str) or not base:
        raise ConfigError(f'{where}: set "baseUrl" for provider {provider!r} (e.g. http://localhost:11434/v1)')
    field = _Fields(raw, f"{where}: model {provider}/{mid}")
    cost = field.object("cost")
    prices = _Fields(cost, f"{where}: model {provider}/{mid}: cost")
    model: Model = {
        "id": mid,
        "name": str(raw.get("name", mid)),
        "api": api,
        "provider": provider,
        "baseUrl": base,
        "reasoning": field.boolean("reasoning", False),
        "input": field.strings("input", ["text"]),
        "cost": {"input": prices.number("input", 0.0), "output": prices.number("output", 0.0),
                 "cacheRead": prices.number("cacheRead", 0.0), "cacheWrite": prices.number("cacheWrite", 0.0)},
        "contextWindow": field.count("contextWindow", 128000),
        "maxTokens": field.count("maxTokens", 16384),
    }
    provider_field = _Fields(pconf, f"{where}: provider {provider}")
    headers = {**provider_field.object("headers"), **field.object("headers")}
    if headers:
        model["headers"] = {str(k): str(v) for k, v in headers.items()}
    compat = {**provider_field.object("compat"), **field.object("compat")}
    if compat:
        model["compat"] = compat
    if isinstance(raw.get("thinkingLevelMap"), dict):
        model["thinkingLevelMap"] = dict(raw["thinkingLevelMap"])
    key = raw.get("apiKey", pconf.get("apiKey"))
    if isinstance(key, str) and key:
        model["apiKey"] = key
    return model


class _Fields:
    """Typed reads of one object of models.json; a value of the wrong type is a one-line
    ConfigError naming the file, the model and the field."""

    def __init__(self, raw: dict[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def _bad(self, key: str, expected: str) -> ConfigError:
        shown = json.dumps(self.raw[key], ensure_ascii=False)
        return ConfigError(f'{self.where}: "{key}" must be {expected}, not {shown[:60]}')

    def count(self, key: str, default: int) -> int:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or value != int(value) or value <= 0:
            raise self._bad(key, "a positive whole number")
        return int(value)

    def number(self, key: str, default: float) -> float:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise self._bad(key, "a number, 0 or more")
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise self._bad(key, "true or false")
        return value

    def strings(self, key: str, default: list[str]) -> list[str]:
        value = self.raw.get(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, 'a list of strings (e.g. ["text", "image"])')
        return list(value)

    def object(self, key: str) -> dict[str, Any]:
        value = self.raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._bad(key, "an object")
        return value

    def objects(self, key: str) -> list[dict[str, Any]]:
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self._bad(key, "a list of model objects")
        return value


def load_user_models(path: Path) -> list[Model]:
    """Models declared in a `models.json` file; [] when it does not exist."""
    text = read_config_text(path)
    if text is None:
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f'{path}: expected an object with "providers"')
    out: list[Model] = []
    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise ConfigError(f'{path}: "providers" must be an object')
    for provider, pconf in providers.items():
        if not isinstance(pconf, dict):
            raise ConfigError(f"{path}: provider {provider!r} must be an object")
        for raw in _Fields(pconf, f"{path}: provider {provider}").objects("models"):
            out.append(_user_model(provider, pconf, raw, str(path)))
    for raw in _Fields(data, str(path)).objects("models"):  # flat form: full records with their own "provider"
        provider = raw.get("provider")
        if not isinstance(provider, str):
            raise ConfigError(f'{path}: each entry of "models" needs a "provider"')
        out.append(_user_model(provider, {}, raw, str(path)))
    return out


class ModelCatalog:
    """Built-in plus user models, looked up as `provider/modelId`.

    Invariant: at most one model per `(provider, id)`; user models override built-in ones.
    """

    def __init__(self, models: list[Model]) -> None:
        self._models: dict[tuple[str, str], Model] = {}
        for m in models:
            self._models[(m["provider"], m["id"])] = m

    def all(self) -> list[Model]:
        return list(self._models.values())

    def providers(self) -> list[str]:
        return sorted({p for p, _ in self._models})

    def find(self, provider: str, model_id: str) -> Model | None:
        return self._models.get((provider, model_id))

    def get(self, ref: str) -> Model:
        """The model for `provider/modelId`; `ConfigError` (one line, says what to do) otherwise."""
        provider, sep, model_id = ref.partition("/")
        if not sep or not provider or not model_id:
            raise ConfigError(
                f"Model must be given as provider/modelId (e.g. anthropic/claude-sonnet-4-5), got {ref!r}"
            )
        model = self.find(provider, model_id)
        if model is not None:
            return model
        if provider not in self.providers():
            raise ConfigError(
                f"Unknown provider {provider!r}: use one of {', '.join(self.providers())} "
                f"or declare it in {picontext_dir() / 'models.json'}"
            )
        raise ConfigError(
            f"Unknown model {ref!r}: add it under providers.{provider}.models in {picontext_dir() / 'models.json'}"
        )


def default_catalog(directory: Path | None = None) -> ModelCatalog:
    """A new catalog: built-in models plus `<dir>/models.json` (dir defaults to `picontext_dir()`)."""
    base = directory if directory is not None else picontext_dir()
    return ModelCatalog([*builtin_models(), *load_user_models(base / "models.json")])


def calculate_cost(model: Model, usage: Usage) -> Cost:
    """Set and return `usage["cost"]` from the model's per-million prices (Pi `calculateCost`).

    1-hour cache writes (`cacheWrite1h`, a subset of `cacheWrite`) cost twice the input price.
    """
    rates = model["cost"]
    long_write = usage.get("cacheWrite1h", 0) or 0
    short_write = usage["cacheWrite"] - long_write
    cost: Cost = {
        "input": rates["input"] / 1_000_000 * usage["input"],
        "output": rates["output"] / 1_000_000 * usage["output"],
        "cacheRead": rates["cacheRead"] / 1_000_000 * usage["cacheRead"],
        "cacheWrite": (rates["cacheWrite"] * short_write + rates["input"] * 2 * long_write) / 1_000_000,
        "total": 0.0,
    }
    cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]
    usage["cost"] = cost
    return cost
