"""API key resolution, the 0600 auth file and secret hygiene."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from picontext.ai._http import ProviderRequest
from picontext.ai.auth import redact_secret, require_api_key, resolve_api_key, save_api_key
from picontext.ai.models import default_catalog
from picontext.errors import ConfigError


def test_env_var_wins(tmp_path: Path) -> None:
    save_api_key("openai", "from-file", directory=tmp_path)
    assert resolve_api_key("openai", env={"OPENAI_API_KEY": "from-env"}, directory=tmp_path) == "from-env"
    assert resolve_api_key("openai", env={}, directory=tmp_path) == "from-file"
    assert resolve_api_key("google", env={"GEMINI_API_KEY": "g"}, directory=tmp_path) == "g"


def test_auth_file_is_created_0600(tmp_path: Path) -> None:
    path = save_api_key("anthropic", "sk-ant-xyz", directory=tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    save_api_key("openai", "sk-2", directory=tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_api_key("anthropic", env={}, directory=tmp_path) == "sk-ant-xyz"


def test_missing_key_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        require_api_key("anthropic", env={}, directory=tmp_path)
    text = str(err.value)
    assert "ANTHROPIC_API_KEY" in text and "auth.json" in text and "\n" not in text
    with pytest.raises(ConfigError, match="MYCLOUD_API_KEY"):
        require_api_key("mycloud", env={}, directory=tmp_path)


def test_local_models_need_no_key(tmp_path: Path) -> None:
    model = default_catalog().get("ollama/llama3.1:8b")
    assert require_api_key("ollama", model=model, env={}, directory=tmp_path) == "none"


def test_model_api_key_may_name_an_env_var(tmp_path: Path) -> None:
    model = dict(default_catalog().get("ollama/llama3.1:8b"), apiKey="MY_LOCAL_KEY")
    assert resolve_api_key("ollama", model=model, env={"MY_LOCAL_KEY": "v"}, directory=tmp_path) == "v"  # type: ignore[arg-type]
    assert resolve_api_key("ollama", model=model, env={}, directory=tmp_path) == "MY_LOCAL_KEY"  # type: ignore[arg-type]


def test_request_repr_and_error_text_hide_the_key() -> None:
    req = ProviderRequest("POST", "https://x/v1?key=abc", {"authorization": "Bearer sk-secret"}, {})
    assert "sk-secret" not in repr(req) and "abc" not in repr(req)
    assert redact_secret("bad key sk-secret-123", "sk-secret-123") == "bad key <redacted>"
