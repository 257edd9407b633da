"""Compaction and branch-summary settings: defaults, settings files, per-model overrides.

Files use Pi's settings.json keys, so a Pi file can be copied over unchanged:

    <PICONTEXT_DIR>/settings.json            global       (Pi: ~/.pi/agent/settings.json)
    <cwd>/.picontext/settings.json           project      (Pi: <cwd>/.pi/settings.json)

    {"compaction": {"enabled": true, "reserveTokens": 16384, "keepRecentTokens": 20000,
                    "modelOverrides": {"<provider>/<modelId>": {"reserveTokens": ..., "keepRecentTokens": ...}},
                    "exactSplitTurns": false,
                    # picontext's own, all off unless set (docs/compaction.md "Beyond Pi"):
                    "backgroundTokens": 0 | N | "auto", "resumable": false, "model": null, "calibrateTokens": false,
                    "loopGuard": true, "reusePromptCache": false,
                    # ours, on: a failed summary is retried once, then replaced by a mechanical one
                    "fallbackSummary": true, "summaryTimeoutMs": 180000},
     "branchSummary": {"reserveTokens": 16384, "skipPrompt": false}}

Precedence is the reference's (spec 02 §3.2-3.3): the project file is deep-merged over the global
one (objects merge, everything else replaces, null replaces), runtime overrides over that, and
only then is the model looked up: `modelOverrides["provider/id"].<field>` beats the ordinary
`<field>`, which beats the default. So a global per-model value beats a project-wide ordinary one.

Unlike the reference, which checks values lazily when compaction runs, every value is checked
when the file is loaded; a bad one raises ConfigError naming the file, the key, the value and
what is allowed. Keys we do not know (Pi has many) are ignored.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from picontext._files import read_config_text
from picontext.errors import ConfigError
from picontext.session.paths import agent_dir

MAX_SAFE_INTEGER: Final = 2**53 - 1
DEFAULT_SUMMARY_TIMEOUT_MS: Final = 180_000
"""Three minutes per summary request: hosted models answer in well under one; a slow local model
that needs more sets `compaction.summaryTimeoutMs` (0 = no limit but httpx's 600 s read timeout)."""
SETTINGS_FILE: Final = "settings.json"
PROJECT_DIR: Final = ".picontext"
_INT_RULE: Final = f"a non-negative safe integer (0 to {MAX_SAFE_INTEGER})"


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """Effective compaction settings for one model (Pi CompactionSettings).

    `exact_split_turns` is picontext's opt-in planning improvement (spec 02 §11.7, see
    docs/divergences.md "Compaction planning"): a cut whose first context-visible kept entry
    starts a turn is not a split turn, even when metadata before it travels with the kept part.

    The rest are picontext's own and off by default (the reference has none of them):
    `background_tokens` (> 0: start summarizing in the background above this many tokens;
    "auto": at a mark learned from this session's pace, `agent/background_compaction.py`),
    `resumable` (persist the chosen span before the summary request, resume it after a crash),
    `model` (`"provider/id"` of the summarizing model; None = the session's model),
    `calibrate_tokens` (learn reported/estimated token ratios per model for the trigger),
    `reuse_prompt_cache` (send the summary request as the session's cached prefix plus one
    instruction, where the provider caches prompts: `compaction/prompt_cache.py`).
    `loop_guard` (on by default, like the rest of the anti-thrash rules) refuses a compaction of
    the span the previous one already summarized and stops a run of compactions that free nothing.
    `fallback_summary` (on by default) retries a failed summary once and then writes a mechanical
    summary (`compaction/fallback.py`); `summary_timeout_ms` bounds one summary request (0 = none).
    """

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000
    exact_split_turns: bool = False
    background_tokens: int | Literal["auto"] = 0
    resumable: bool = False
    model: str | None = None
    calibrate_tokens: bool = False
    loop_guard: bool = True
    reuse_prompt_cache: bool = False
    fallback_summary: bool = True
    summary_timeout_ms: int = 180_000

    def to_json(self) -> dict[str, Any]:
        """The reference's object (`{enabled, reserveTokens, keepRecentTokens}`), plus opt-ins when on."""
        out: dict[str, Any] = {"enabled": self.enabled, "reserveTokens": self.reserve_tokens,
                               "keepRecentTokens": self.keep_recent_tokens}
        if self.exact_split_turns:
            out["exactSplitTurns"] = True
        if self.background_tokens:
            out["backgroundTokens"] = self.background_tokens
        if self.resumable:
            out["resumable"] = True
        if self.model is not None:
            out["model"] = self.model
        if self.calibrate_tokens:
            out["calibrateTokens"] = True
        if not self.loop_guard:
            out["loopGuard"] = False
        if self.reuse_prompt_cache:
            out["reusePromptCache"] = True
        if not self.fallback_summary:
            out["fallbackSummary"] = False
        if self.summary_timeout_ms != DEFAULT_SUMMARY_TIMEOUT_MS:
            out["summaryTimeoutMs"] = self.summary_timeout_ms
        return out

    @classmethod
    def from_json(cls, value: Mapping[str, Any], *, source: str = "settings") -> CompactionSettings:
        """Build from an object with the reference's keys (missing keys take the defaults)."""
        _check_compaction(value, source, "compaction")
        default = cls()
        return cls(
            enabled=bool(value.get("enabled", default.enabled)),
            reserve_tokens=_as_int(value.get("reserveTokens", default.reserve_tokens)),
            keep_recent_tokens=_as_int(value.get("keepRecentTokens", default.keep_recent_tokens)),
            exact_split_turns=bool(value.get("exactSplitTurns", default.exact_split_turns)),
            background_tokens=_as_background(value.get("backgroundTokens", default.background_tokens)),
            resumable=bool(value.get("resumable", default.resumable)),
            model=value.get("model", default.model),
            calibrate_tokens=bool(value.get("calibrateTokens", default.calibrate_tokens)),
            loop_guard=bool(value.get("loopGuard", default.loop_guard)),
            reuse_prompt_cache=bool(value.get("reusePromptCache", default.reuse_prompt_cache)),
            fallback_summary=bool(value.get("fallbackSummary", default.fallback_summary)),
            summary_timeout_ms=_as_int(value.get("summaryTimeoutMs", default.summary_timeout_ms)),
        )


DEFAULT_COMPACTION_SETTINGS: Final = CompactionSettings()


@dataclass(frozen=True, slots=True)
class BranchSummarySettings:
    """Pi getBranchSummarySettings(): summary budget headroom and whether to skip the prompt."""

    reserve_tokens: int = 16384
    skip_prompt: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"reserveTokens": self.reserve_tokens, "skipPrompt": self.skip_prompt}


# --- validation ------------------------------------------------------------------------------


def is_safe_non_negative_int(value: Any) -> bool:
    """JavaScript `Number.isSafeInteger(v) && v >= 0` for a JSON value (16384.0 counts, True does not)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value <= MAX_SAFE_INTEGER
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer() and 0 <= value <= MAX_SAFE_INTEGER
    return False


def _as_int(value: Any) -> int:
    return int(value)


AUTO: Final = "auto"


def _as_background(value: Any) -> int | Literal["auto"]:
    return AUTO if value == AUTO else int(value)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _bad(source: str, key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{source}: invalid value {_show(value)} for {key}: expected {allowed}")


def _check_int(container: Mapping[str, Any], name: str, source: str, prefix: str) -> None:
    if name in container and not is_safe_non_negative_int(container[name]):
        raise _bad(source, f"{prefix}.{name}", container[name], _INT_RULE)


def _check_bool(container: Mapping[str, Any], name: str, source: str, prefix: str) -> None:
    if name in container and not isinstance(container[name], bool):
        raise _bad(source, f"{prefix}.{name}", container[name], "true or false")


def _check_background(container: Mapping[str, Any], source: str, prefix: str) -> None:
    value = container.get("backgroundTokens")
    if "backgroundTokens" in container and value != AUTO and not is_safe_non_negative_int(value):
        raise _bad(source, f"{prefix}.backgroundTokens", value, f'{_INT_RULE}, or "auto"')


def _check_model_ref(container: Mapping[str, Any], source: str, prefix: str) -> None:
    value = container.get("model")
    if "model" in container and value is not None and not (
        isinstance(value, str) and "/" in value and value.split("/", 1)[0] and value.split("/", 1)[1]
    ):
        raise _bad(source, f"{prefix}.model", value, 'a model as "provider/modelId", or null')


def _check_compaction(section: Mapping[str, Any], source: str, prefix: str) -> None:
    for name in ("enabled", "exactSplitTurns", "resumable", "calibrateTokens", "loopGuard", "reusePromptCache",
                 "fallbackSummary"):
        _check_bool(section, name, source, prefix)
    _check_int(section, "reserveTokens", source, prefix)
    _check_int(section, "keepRecentTokens", source, prefix)
    _check_background(section, source, prefix)
    _check_int(section, "summaryTimeoutMs", source, prefix)
    _check_model_ref(section, source, prefix)
    overrides = section.get("modelOverrides")
    if overrides is None:
        return
    if not isinstance(overrides, dict):
        raise _bad(source, f"{prefix}.modelOverrides", overrides, 'an object keyed "provider/modelId"')
    for key, entry in overrides.items():
        where = f"{prefix}.modelOverrides[{_show(key)}]"
        if not isinstance(entry, dict):
            raise _bad(source, where, entry, "an object with reserveTokens and/or keepRecentTokens")
        _check_int(entry, "reserveTokens", source, where)
        _check_int(entry, "keepRecentTokens", source, where)
        _check_background(entry, source, where)
        _check_int(entry, "summaryTimeoutMs", source, where)
        _check_model_ref(entry, source, where)


def validate_settings(data: Any, source: str) -> dict[str, Any]:
    """Check the compaction and branchSummary parts of one settings object; return it."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object at the top level, got {_show(data)[:60]}")
    compaction = data.get("compaction")
    if compaction is not None:
        if not isinstance(compaction, dict):
            raise _bad(source, "compaction", compaction, "an object")
        _check_compaction(compaction, source, "compaction")
    branch = data.get("branchSummary")
    if branch is not None:
        if not isinstance(branch, dict):
            raise _bad(source, "branchSummary", branch, "an object")
        _check_int(branch, "reserveTokens", source, "branchSummary")
        _check_bool(branch, "skipPrompt", source, "branchSummary")
    return data


# --- files and merging -----------------------------------------------------------------------


def deep_merge(base: Any, override: Any) -> Any:
    """Pi's settings merge: objects merge recursively, anything else (null too) replaces."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    merged = dict(base)
    for key, value in override.items():
        merged[key] = deep_merge(base[key], value) if key in base else value
    return merged


def read_settings_file(path: str) -> dict[str, Any]:
    """One settings file, validated; `{}` when it does not exist (a FIFO, a device, a directory or
    a file over 16 MiB: one-line ConfigError, see `_files.read_config_text`)."""
    text = read_config_text(path)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    return validate_settings(data, path)


def global_settings_path(env: Mapping[str, str] | None = None) -> str:
    return os.path.join(agent_dir(dict(env) if env is not None else None), SETTINGS_FILE)


def project_settings_path(cwd: str) -> str:
    return os.path.join(cwd, PROJECT_DIR, SETTINGS_FILE)


@dataclass(frozen=True, slots=True)
class Settings:
    """The merged settings object (global, then project, then runtime overrides), already valid."""

    data: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, overrides: Mapping[str, Any], source: str = "overrides") -> Settings:
        """Deep-merge runtime overrides on top (Pi applyOverrides); validated like a file."""
        return Settings(deep_merge(self.data, validate_settings(dict(overrides), source)))

    def compaction(self, model: Any = None) -> CompactionSettings:
        """Effective compaction settings for `model` (Pi getCompactionSettings).

        `model` is None, a `"provider/modelId"` key, a `(provider, model_id)` pair, or an object
        or mapping with `provider` and `id`. Keys match exactly (case-sensitive).
        """
        section = self.data.get("compaction") or {}
        override: dict[str, Any] = {}
        key = model_key(model)
        if key is not None:
            override = (section.get("modelOverrides") or {}).get(key) or {}
        default = DEFAULT_COMPACTION_SETTINGS

        def pick(name: str, fallback: int) -> int:
            if name in override:
                return _as_int(override[name])
            if name in section:
                return _as_int(section[name])
            return fallback

        background = override.get("backgroundTokens", section.get("backgroundTokens", default.background_tokens))

        enabled = section.get("enabled")
        model = override["model"] if "model" in override else section.get("model")
        loop_guard = section.get("loopGuard")
        return CompactionSettings(
            enabled=default.enabled if enabled is None else bool(enabled),
            reserve_tokens=pick("reserveTokens", default.reserve_tokens),
            keep_recent_tokens=pick("keepRecentTokens", default.keep_recent_tokens),
            exact_split_turns=bool(section.get("exactSplitTurns", False)),
            background_tokens=_as_background(background),
            resumable=bool(section.get("resumable", False)),
            model=model if isinstance(model, str) else None,
            calibrate_tokens=bool(section.get("calibrateTokens", False)),
            loop_guard=True if loop_guard is None else bool(loop_guard),
            reuse_prompt_cache=bool(section.get("reusePromptCache", False)),
            fallback_summary=bool(section.get("fallbackSummary", True)),
            summary_timeout_ms=pick("summaryTimeoutMs", default.summary_timeout_ms),
        )

    def branch_summary(self) -> BranchSummarySettings:
        section = self.data.get("branchSummary") or {}
        reserve = section.get("reserveTokens")
        skip = section.get("skipPrompt")
        return BranchSummarySettings(
            reserve_tokens=16384 if reserve is None else _as_int(reserve),
            skip_prompt=False if skip is None else bool(skip),
        )


def model_key(model: Any) -> str | None:
    """`"provider/modelId"` for the ways callers name a model (see Settings.compaction)."""
    if model is None:
        return None
    if isinstance(model, str):
        return model
    if isinstance(model, tuple) and len(model) == 2:
        return f"{model[0]}/{model[1]}"
    if isinstance(model, Mapping):
        return f"{model.get('provider')}/{model.get('id', model.get('modelId'))}"
    return f"{model.provider}/{model.id}"


def load_settings(cwd: str | None = None, *, env: Mapping[str, str] | None = None, trust_project: bool = True,
                  overrides: Mapping[str, Any] | None = None) -> Settings:
    """Global file, then the project file of `cwd` (when trusted), then `overrides`; all validated."""
    data = read_settings_file(global_settings_path(env))
    if trust_project:
        data = deep_merge(data, read_settings_file(project_settings_path(cwd or os.getcwd())))
    settings = Settings(data if isinstance(data, dict) else {})
    return settings.with_overrides(overrides) if overrides else settings


def load_compaction_settings(cwd: str | None = None, model: Any = None, **kwargs: Any) -> CompactionSettings:
    """Shortcut: `load_settings(cwd, ...).compaction(model)`."""
    return load_settings(cwd, **kwargs).compaction(model)
