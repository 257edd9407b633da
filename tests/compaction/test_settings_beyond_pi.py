"""picontext's own compaction settings: off by default, validated on load, per-model overrides."""

from __future__ import annotations

import pytest

from picontext.compaction.settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings, Settings
from picontext.errors import ConfigError


def test_all_off_by_default_and_absent_from_the_reference_object() -> None:
    s = Settings().compaction(("p", "m"))
    values = (s.background_tokens, s.resumable, s.model, s.calibrate_tokens, s.loop_guard)
    assert values == (0, False, None, False, True)
    assert s == DEFAULT_COMPACTION_SETTINGS
    assert s.to_json() == {"enabled": True, "reserveTokens": 16384, "keepRecentTokens": 20000}


def test_values_and_per_model_overrides() -> None:
    s = Settings({"compaction": {"backgroundTokens": 100_000, "resumable": True, "model": "openai/gpt-mini",
                                 "calibrateTokens": True, "loopGuard": False,
                                 "modelOverrides": {"p/big": {"backgroundTokens": 150_000, "model": "p/small"},
                                                    "p/self": {"model": None}}}})
    plain = s.compaction(("p", "other"))
    assert (plain.background_tokens, plain.resumable, plain.model, plain.calibrate_tokens, plain.loop_guard) == (
        100_000, True, "openai/gpt-mini", True, False)
    big = s.compaction(("p", "big"))
    assert (big.background_tokens, big.model) == (150_000, "p/small")
    assert s.compaction(("p", "self")).model is None  # an override can go back to the session's model
    assert CompactionSettings.from_json(plain.to_json()) == plain


def test_background_tokens_auto_top_level_and_per_model() -> None:
    s = Settings({"compaction": {"backgroundTokens": "auto",
                                 "modelOverrides": {"p/fixed": {"backgroundTokens": 90_000},
                                                    "p/auto": {"backgroundTokens": "auto"}}}})
    assert s.compaction(("p", "other")).background_tokens == "auto"
    assert s.compaction(("p", "fixed")).background_tokens == 90_000
    fixed_top = Settings({"compaction": {"backgroundTokens": 50_000,
                                         "modelOverrides": {"p/auto": {"backgroundTokens": "auto"}}}})
    assert fixed_top.compaction(("p", "auto")).background_tokens == "auto"
    auto = s.compaction(("p", "other"))
    assert auto.to_json()["backgroundTokens"] == "auto"
    assert CompactionSettings.from_json(auto.to_json()) == auto


@pytest.mark.parametrize("value", ["Auto", "fast", True, None, -1])
def test_background_tokens_takes_a_number_or_auto_only(value: object) -> None:
    with pytest.raises(ConfigError, match=r'compaction\.backgroundTokens: expected .*or "auto"'):
        Settings().with_overrides({"compaction": {"backgroundTokens": value}}, "f.json")


@pytest.mark.parametrize(("section", "key"), [
    ({"backgroundTokens": -5}, "compaction.backgroundTokens"),
    ({"resumable": "yes"}, "compaction.resumable"),
    ({"calibrateTokens": 1}, "compaction.calibrateTokens"),
    ({"loopGuard": None}, "compaction.loopGuard"),
    ({"model": "no-slash"}, "compaction.model"),
    ({"model": 7}, "compaction.model"),
    ({"modelOverrides": {"p/m": {"model": "/x"}}}, 'compaction.modelOverrides["p/m"].model'),
    ({"modelOverrides": {"p/m": {"backgroundTokens": 1.5}}}, 'compaction.modelOverrides["p/m"].backgroundTokens'),
])
def test_bad_values_fail_at_load_naming_the_key(section: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings().with_overrides({"compaction": section}, "f.json")
    assert "f.json" in str(info.value) and key in str(info.value)
