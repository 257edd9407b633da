"""`picontext models list` and `picontext auth set|list|remove` as real subprocesses."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_main

from picontext.ai.auth import ENV_API_KEYS, require_api_key, resolve_api_key
from picontext.errors import ConfigError

SECRET = "sk-test-abcdefghijklmnop-7890"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not any(k in names for names in ENV_API_KEYS.values())}
    env["COLUMNS"] = "250"
    env.update(extra)
    return env


def run(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return run_main(*args, stdin=stdin or "", env=clean_env(**env))


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("picontext: "), result.stderr
    assert "Traceback" not in result.stderr
    for n in needles:
        assert n in lines[0]


@pytest.fixture
def home() -> Path:
    return Path(os.environ["PICONTEXT_DIR"])


def write_models(home: Path) -> None:
    (home / "models.json").write_text(
        json.dumps(
            {
                "providers": {
                    "ollama": {
                        "baseUrl": "http://localhost:11434/v1",
                        "api": "openai-completions",
                        "models": [{"id": "qwen3:32b", "contextWindow": 40960, "maxTokens": 8192}],
                    },
                    "acme": {
                        "baseUrl": "https://llm.acme.example/v1",
                        "apiKey": "ACME_TOKEN",
                        "models": [
                            {
                                "id": "acme-large",
                                "contextWindow": 262144,
                                "maxTokens": 32768,
                                "reasoning": True,
                                "cost": {"input": 1.5, "output": 6, "cacheRead": 0.15},
                            }
                        ],
                    },
                }
            }
        )
    )


# -- models list ----------------------------------------------------------------------------------------


def test_models_list_json_has_builtin_and_user_models(home: Path) -> None:
    write_models(home)
    r = run("models", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["model"]: row for row in json.loads(r.stdout)}
    son = rows["anthropic/claude-sonnet-4-5"]
    assert son["contextWindow"] == 1_000_000 and son["maxTokens"] == 64000
    assert son["cost"] == {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}
    assert son["keyConfigured"] is False and son["keySource"] is None and son["keyEnv"] == "ANTHROPIC_API_KEY"
    qwen = rows["ollama/qwen3:32b"]
    assert (qwen["contextWindow"], qwen["maxTokens"], qwen["baseUrl"]) == (40960, 8192, "http://localhost:11434/v1")
    assert qwen["keySource"] == "local" and qwen["keyConfigured"] is True
    acme = rows["acme/acme-large"]
    assert acme["reasoning"] is True and acme["cost"]["cacheWrite"] == 0
    assert acme["keySource"] == "model apiKey"  # ACME_TOKEN unset: taken literally, as resolve_api_key does


def test_a_model_declared_by_its_id_alone_gets_the_documented_defaults(home: Path) -> None:
    """docs/providers.md: `api` defaults to openai-completions; window 128000, maxTokens 16384, cost 0,
    input ["text"], reasoning false; the same provider/id as a built-in model replaces it."""
    (home / "models.json").write_text(json.dumps({"providers": {
        "box": {"baseUrl": "http://127.0.0.1:9/v1", "models": [{"id": "tiny"}]},
        "anthropic": {"baseUrl": "http://127.0.0.1:9/v1", "api": "anthropic-messages",
                      "models": [{"id": "claude-sonnet-4-5", "contextWindow": 4096}]}}}))
    r = run("models", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["model"]: row for row in json.loads(r.stdout)}
    tiny = rows["box/tiny"]
    assert tiny["api"] == "openai-completions"
    assert (tiny["contextWindow"], tiny["maxTokens"]) == (128000, 16384)
    assert tiny["reasoning"] is False and tiny["input"] == ["text"]
    assert tiny["cost"] == {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    assert tiny["keySource"] == "local"  # a server on 127.0.0.1 needs no key
    sonnet = [row for row in json.loads(r.stdout) if row["model"] == "anthropic/claude-sonnet-4-5"]
    assert len(sonnet) == 1 and sonnet[0]["contextWindow"] == 4096


def test_models_list_key_sources(home: Path) -> None:
    write_models(home)
    (home / "auth.json").write_text(json.dumps({"google": {"type": "api_key", "key": SECRET}}))
    r = run("models", "list", "--json", OPENAI_API_KEY=SECRET, ACME_TOKEN=SECRET)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout
    rows = {row["model"]: row for row in json.loads(r.stdout)}
    assert rows["openai/gpt-4o"]["keySource"] == "env OPENAI_API_KEY"
    assert rows["google/gemini-2.5-pro"]["keySource"] == "auth file"
    assert rows["acme/acme-large"]["keySource"] == "env ACME_TOKEN"
    assert rows["groq/llama-3.3-70b-versatile"]["keyConfigured"] is False


def test_models_list_table(home: Path) -> None:
    write_models(home)
    r = run("models", "list", ANTHROPIC_API_KEY=SECRET)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.strip()}
    son = lines["anthropic/claude-sonnet-4-5"].split()
    assert son[1:8] == ["anthropic-messages", "1M", "64K", "3", "15", "0.3", "3.75"]
    assert son[8] == "yes" and " ".join(son[9:]) == "env ANTHROPIC_API_KEY"
    qwen = lines["ollama/qwen3:32b"].split()
    assert qwen[1:8] == ["openai-completions", "41K", "8.2K", "-", "-", "-", "-"]
    assert qwen[8:] == ["no", "local"]
    assert lines["openai/gpt-4o"].split()[-1] == "none"
    assert "OPENAI_API_KEY" in r.stdout and "picontext auth set" in r.stdout


def test_models_list_provider_filter(home: Path) -> None:
    write_models(home)
    r = run("models", "list", "--json", "--provider", "ollama")
    assert r.returncode == 0, r.stderr
    assert {row["model"] for row in json.loads(r.stdout)} == {"ollama/qwen3:32b", "ollama/llama3.1:8b"}
    one_line_error(run("models", "list", "--provider", "nope"), "'nope'", "models.json")


def test_models_list_bad_models_json_is_one_line(home: Path) -> None:
    (home / "models.json").write_text("{not json")
    one_line_error(run("models", "list"), "models.json", "not valid JSON")


# -- auth ----------------------------------------------------------------------------------------------


def test_auth_set_from_stdin_writes_0600_file_and_never_prints_the_key(home: Path) -> None:
    r = run("auth", "set", "anthropic", stdin=SECRET + "\n")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr
    assert "…7890" in r.stdout
    path = home / "auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"anthropic": {"type": "api_key", "key": SECRET}}
    # The missing-key error told users to run this; now the key resolves.
    assert require_api_key("anthropic") == SECRET
    r = run("models", "list", "--json", "--provider", "anthropic")
    assert all(row["keySource"] == "auth file" for row in json.loads(r.stdout))


def test_missing_key_error_names_the_command_that_fixes_it(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for names in ENV_API_KEYS.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="picontext auth set groq"):
        require_api_key("groq")
    assert run("auth", "set", "groq", stdin=SECRET).returncode == 0
    assert require_api_key("groq") == SECRET


def test_auth_set_keeps_0600_on_an_existing_loose_file(home: Path) -> None:
    path = home / "auth.json"
    path.write_text(json.dumps({"openai": "sk-old-0000000000000"}))
    path.chmod(0o644)
    assert run("auth", "set", "google", stdin=SECRET).returncode == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert set(json.loads(path.read_text())) == {"openai", "google"}


def test_auth_set_refuses_a_key_in_argv_and_empty_input(home: Path) -> None:
    r = run("auth", "set", "openai", SECRET)
    one_line_error(r, "takes only PROVIDER")
    assert SECRET not in r.stderr + r.stdout  # the error never repeats the key
    assert not (home / "auth.json").exists()
    one_line_error(run("auth", "set", "openai", stdin=""), "no key given for openai")
    one_line_error(run("auth", "set", "../evil", stdin=SECRET), "invalid provider name")
    assert not (home / "auth.json").exists()


def test_auth_set_warns_when_env_var_wins(home: Path) -> None:
    r = run("auth", "set", "openai", stdin=SECRET, OPENAI_API_KEY="sk-env-111111111111")
    assert r.returncode == 0
    assert "OPENAI_API_KEY is set in the environment" in r.stderr


def test_auth_set_on_a_terminal_prompts_without_echo(home: Path) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "picontext", "auth", "set", "openai"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=clean_env(),
        start_new_session=True,
    )
    os.close(slave)
    out = b""

    def read_until(needle: bytes, timeout: float = 60) -> None:
        nonlocal out
        deadline = time.monotonic() + timeout
        while needle not in out and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    out += os.read(master, 4096)
                except OSError:
                    return

    read_until(b"input hidden")
    assert b"API key for openai" in out
    os.write(master, SECRET.encode() + b"\n")
    read_until(b"mode 0600")
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode == 0, out
    assert SECRET.encode() not in out  # not echoed, not printed
    assert json.loads((home / "auth.json").read_text())["openai"]["key"] == SECRET


def test_auth_list_shows_sources_redacted(home: Path) -> None:
    assert run("auth", "set", "openai", stdin=SECRET).returncode == 0
    assert run("auth", "set", "acme", stdin="sk-acme-999999999999").returncode == 0
    r = run("auth", "list", "--json", OPENAI_API_KEY="sk-env-1234567890abcd", GEMINI_API_KEY="short")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout and "sk-env" not in r.stdout and "short" not in r.stdout
    rows = json.loads(r.stdout)
    by = {(row["provider"], row["source"].split()[0]): row for row in rows}
    assert by[("openai", "env")] == {
        "provider": "openai",
        "source": "env OPENAI_API_KEY",
        "key": "…abcd",
        "active": True,
    }
    assert by[("openai", "auth")]["active"] is False and by[("openai", "auth")]["key"] == "…7890"
    assert by[("google", "env")]["key"] == "****"
    assert by[("acme", "auth")]["active"] is True
    assert by[("acme", "auth")]["source"] == f"auth file {home / 'auth.json'}"
    table = run("auth", "list", OPENAI_API_KEY="sk-env-1234567890abcd")
    assert table.returncode == 0 and "no (env wins)" in table.stdout and SECRET not in table.stdout


def test_auth_list_empty(home: Path) -> None:
    r = run("auth", "list")
    assert r.returncode == 0 and "no keys configured" in r.stdout


def test_auth_remove(home: Path) -> None:
    assert run("auth", "set", "openai", stdin=SECRET).returncode == 0
    assert run("auth", "set", "google", stdin=SECRET).returncode == 0
    r = run("auth", "remove", "openai")
    assert r.returncode == 0, r.stderr
    path = home / "auth.json"
    assert set(json.loads(path.read_text())) == {"google"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_api_key("openai", env={}) is None
    one_line_error(run("auth", "remove", "openai"), "no stored key for openai")


# -- the worked examples of docs/providers.md --------------------------------------------------------


def _doc_examples() -> list[dict[str, Any]]:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text()
    section = doc.split("## Your own models: `models.json`", 1)[1].split("\n## ", 1)[0]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S)]


def test_models_json_examples_in_the_docs(home: Path) -> None:
    examples = _doc_examples()
    assert [next(iter(e["providers"])) for e in examples] == [
        "ollama", "llamacpp", "llama-cpp-python", "vllm", "lmstudio", "openrouter"]
    for example in examples:
        (home / "models.json").write_text(json.dumps(example))
        r = run("models", "list", "--json", OPENROUTER_API_KEY=SECRET)
        assert r.returncode == 0, r.stderr
        rows = {row["model"]: row for row in json.loads(r.stdout)}
        [(provider, conf)] = example["providers"].items()
        for model in conf["models"]:
            row = rows[f"{provider}/{model['id']}"]
            assert row["baseUrl"] == conf["baseUrl"] and row["contextWindow"] == model["contextWindow"]
            assert row["keyConfigured"] is True  # local servers need none; OpenRouter's comes from the env var
            assert row["keySource"] == ("env OPENROUTER_API_KEY" if provider == "openrouter" else "local")
    # the errors the section promises: one line naming the file and the field
    (home / "models.json").write_text(json.dumps({"providers": {"x": {"models": [{"id": "m"}]}}}))
    one_line_error(run("models", "list"), "models.json", "baseUrl")
    (home / "models.json").write_text(json.dumps({"providers": {"x": {"baseUrl": "http://h/v1", "models": [{}]}}}))
    one_line_error(run("models", "list"), "models.json", '"id"')
