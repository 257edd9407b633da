"""Model catalog, models.json loading and cost computation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from picontext.ai.models import builtin_models, calculate_cost, default_catalog, picontext_dir
from picontext.ai.types import empty_usage
from picontext.errors import ConfigError


def test_builtin_catalog_covers_the_four_apis_with_realistic_numbers() -> None:
    models = builtin_models()
    assert {m["api"] for m in models} == {
        "openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai",
    }  # fmt: skip
    for m in models:
        assert m["contextWindow"] >= 8192 and 0 < m["maxTokens"] <= m["contextWindow"] * 2
        assert all(v >= 0 for v in m["cost"].values())
    sonnet = default_catalog().get("anthropic/claude-sonnet-4-5")
    assert sonnet["cost"] == {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}
    assert sonnet["reasoning"] is True


def test_model_id_may_contain_slashes() -> None:
    m = default_catalog().get("openrouter/openai/gpt-4o")
    assert (m["provider"], m["id"]) == ("openrouter", "openai/gpt-4o")


def test_user_models_json_adds_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text(
        json.dumps(
            {
                "providers": {
                    "ollama": {
                        "baseUrl": "http://localhost:11434/v1",
                        "api": "openai-completions",
                        "models": [{"id": "qwen3:32b", "contextWindow": 40960, "maxTokens": 8192}],
                    },
                    "anthropic": {
                        "baseUrl": "https://proxy.example/anthropic",
                        "api": "anthropic-messages",
                        "models": [{"id": "claude-sonnet-4-5", "contextWindow": 200000, "reasoning": True}],
                    },
                }
            }
        )
    )
    cat = default_catalog(tmp_path)
    q = cat.get("ollama/qwen3:32b")
    assert q["contextWindow"] == 40960 and q["cost"]["input"] == 0 and q["input"] == ["text"]
    assert cat.get("anthropic/claude-sonnet-4-5")["baseUrl"] == "https://proxy.example/anthropic"


def test_picontext_dir_env_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PICONTEXT_DIR", str(tmp_path))
    assert picontext_dir() == tmp_path


@pytest.mark.parametrize(
    ("ref", "needle"),
    [("gpt-4o", "provider/modelId"), ("nope/x", "Unknown provider 'nope'"), ("openai/gpt-9", "models.json")],
)
def test_unknown_model_is_one_line_config_error(ref: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        default_catalog().get(ref)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_bad_models_json_names_the_field(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"local": {"models": [{"id": "m"}]}}}))
    with pytest.raises(ConfigError, match="baseUrl"):
        default_catalog(tmp_path)


def test_calculate_cost_per_million_and_long_cache_writes() -> None:
    model = default_catalog().get("anthropic/claude-sonnet-4-5")
    usage = empty_usage()
    usage.update(input=1_000_000, output=100_000, cacheRead=2_000_000, cacheWrite=1_000_000, cacheWrite1h=400_000)
    cost = calculate_cost(model, usage)
    assert cost["input"] == pytest.approx(3.0)
    assert cost["output"] == pytest.approx(1.5)
    assert cost["cacheRead"] == pytest.approx(0.6)
    assert cost["cacheWrite"] == pytest.approx(0.6 * 3.75 + 0.4 * 6)
    assert cost["total"] == pytest.approx(3 + 1.5 + 0.6 + 0.6 * 3.75 + 2.4)
    assert usage["cost"] is cost
