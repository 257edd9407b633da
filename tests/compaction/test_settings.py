"""Settings: spec 02 §10 cases 15-24, files and load-time validation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from picontext.compaction.settings import (
    DEFAULT_COMPACTION_SETTINGS,
    BranchSummarySettings,
    CompactionSettings,
    Settings,
    load_compaction_settings,
    load_settings,
)
from picontext.errors import ConfigError


def write_global(data: object) -> Path:
    path = Path(os.environ["PICONTEXT_DIR"]) / "settings.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def write_project(cwd: Path, data: object) -> Path:
    path = cwd / ".picontext" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_case_15_defaults(tmp_path: Path) -> None:
    settings = load_settings(str(tmp_path))
    assert settings.compaction() == CompactionSettings(True, 16384, 20000) == DEFAULT_COMPACTION_SETTINGS
    assert settings.compaction().to_json() == {"enabled": True, "reserveTokens": 16384, "keepRecentTokens": 20000}
    assert settings.branch_summary() == BranchSummarySettings(16384, False)


def test_case_16_17_18_model_overrides() -> None:
    s = Settings({"compaction": {"modelOverrides": {"p/m": {"reserveTokens": 400000},
                                                    "openrouter/anthropic/claude-sonnet-4": {"keepRecentTokens": 7}}}})
    assert s.compaction(("p", "m")) == CompactionSettings(True, 400000, 20000)
    assert s.compaction("P/m") == CompactionSettings()  # keys are case-sensitive
    assert s.compaction({"provider": "openrouter", "id": "anthropic/claude-sonnet-4"}).keep_recent_tokens == 7


@pytest.mark.parametrize("bad", [-1, 1.5, "100", True, None, 2**53])
def test_case_19_bad_ordinary_value_fails_at_load(tmp_path: Path, bad: object) -> None:
    path = write_global({"compaction": {"reserveTokens": bad, "modelOverrides": {"p/m": {"reserveTokens": 5}}}})
    with pytest.raises(ConfigError) as info:
        load_settings(str(tmp_path))
    message = str(info.value)
    assert str(path) in message and "compaction.reserveTokens" in message and json.dumps(bad) in message
    assert "non-negative safe integer" in message


@pytest.mark.parametrize("entry", [5, None, []])
def test_case_20_override_entry_must_be_an_object(tmp_path: Path, entry: object) -> None:
    write_global({"compaction": {"modelOverrides": {"p/m": entry}}})
    with pytest.raises(ConfigError, match=r'modelOverrides\["p/m"\].*expected an object'):
        load_settings(str(tmp_path))


def test_case_20_override_field_is_checked(tmp_path: Path) -> None:
    write_global({"compaction": {"modelOverrides": {"p/m": {"keepRecentTokens": "5"}}}})
    with pytest.raises(ConfigError, match=r'modelOverrides\["p/m"\]\.keepRecentTokens'):
        load_settings(str(tmp_path))


def test_case_21_fields_resolve_independently() -> None:
    s = Settings({"compaction": {"reserveTokens": 3000, "modelOverrides": {"p/m": {"keepRecentTokens": 5}}}})
    assert s.compaction("p/m") == CompactionSettings(True, 3000, 5)


def test_case_22_global_model_value_beats_project_ordinary(tmp_path: Path) -> None:
    write_global({"compaction": {"modelOverrides": {"p/m": {"reserveTokens": 1000}}}})
    write_project(tmp_path, {"compaction": {"reserveTokens": 5000}})
    settings = load_settings(str(tmp_path))
    assert settings.compaction("p/m").reserve_tokens == 1000
    assert settings.compaction("p/other").reserve_tokens == 5000


def test_case_23_override_entries_merge_field_by_field(tmp_path: Path) -> None:
    write_global({"compaction": {"modelOverrides": {"p/m": {"reserveTokens": 1000, "keepRecentTokens": 10}}}})
    write_project(tmp_path, {"compaction": {"modelOverrides": {"p/m": {"reserveTokens": 2000}}}})
    assert load_compaction_settings(str(tmp_path), "p/m") == CompactionSettings(True, 2000, 10)
    assert load_compaction_settings(str(tmp_path), "p/m", trust_project=False) == CompactionSettings(True, 1000, 10)


def test_case_24_zero_reserve_is_valid(tmp_path: Path) -> None:
    write_global({"compaction": {"reserveTokens": 0, "keepRecentTokens": 16384.0}})
    s = load_compaction_settings(str(tmp_path))
    assert s.reserve_tokens == 0 and s.keep_recent_tokens == 16384 and isinstance(s.keep_recent_tokens, int)


def test_a_pi_settings_file_can_be_copied_over(tmp_path: Path) -> None:
    pi_file = {"defaultProvider": "anthropic", "defaultModel": "claude-sonnet-4-5", "theme": "dark",
               "compaction": {"enabled": False, "reserveTokens": 8192, "keepRecentTokens": 12000},
               "branchSummary": {"reserveTokens": 4096, "skipPrompt": True}, "packages": ["x"]}
    write_global(pi_file)
    settings = load_settings(str(tmp_path))
    assert settings.compaction() == CompactionSettings(False, 8192, 12000)
    assert settings.branch_summary() == BranchSummarySettings(4096, True)


def test_project_null_replaces_global_section(tmp_path: Path) -> None:
    write_global({"compaction": {"reserveTokens": 1}})
    write_project(tmp_path, {"compaction": None})
    assert load_compaction_settings(str(tmp_path)) == CompactionSettings()


def test_runtime_overrides_merge_on_top_before_the_model_lookup(tmp_path: Path) -> None:
    write_global({"compaction": {"modelOverrides": {"p/m": {"keepRecentTokens": 10}}}})
    settings = load_settings(str(tmp_path), overrides={"compaction": {"keepRecentTokens": 99}})
    assert settings.compaction("p/m").keep_recent_tokens == 10
    assert settings.compaction().keep_recent_tokens == 99


@pytest.mark.parametrize(("data", "key"), [
    ({"compaction": {"enabled": "false"}}, "compaction.enabled"),
    ({"compaction": []}, "compaction"),
    ({"compaction": {"exactSplitTurns": 1}}, "compaction.exactSplitTurns"),
    ({"branchSummary": {"reserveTokens": -5}}, "branchSummary.reserveTokens"),
    ({"branchSummary": {"skipPrompt": "yes"}}, "branchSummary.skipPrompt"),
    ({"compaction": {"modelOverrides": [1]}}, "compaction.modelOverrides"),
])
def test_stricter_than_the_reference_at_load(tmp_path: Path, data: dict, key: str) -> None:
    write_project(tmp_path, data)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(str(tmp_path))


def test_unreadable_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = write_project(tmp_path, {})
    path.write_text('{\n  "compaction": {,\n}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"settings\.json: not valid JSON \(line 2"):
        load_settings(str(tmp_path))
    path.write_text("[1]", encoding="utf-8")
    with pytest.raises(ConfigError, match="JSON object"):
        load_settings(str(tmp_path))


def test_exact_split_turns_is_opt_in_and_round_trips() -> None:
    assert not CompactionSettings().exact_split_turns
    s = Settings({"compaction": {"exactSplitTurns": True}}).compaction()
    assert s.exact_split_turns and s.to_json()["exactSplitTurns"] is True
    assert CompactionSettings.from_json(s.to_json()) == s
    with pytest.raises(ConfigError):
        CompactionSettings.from_json({"keepRecentTokens": -1})
