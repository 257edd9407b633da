"""API keys: environment variables first, then `<PICONTEXT_DIR>/auth.json` (mode 0600).

No network calls. Keys are only ever placed in request headers: they never go into messages,
events, session files or `repr()` of a request (see `_http.ProviderRequest`), and providers scrub
them from error texts (`redact_secret`).

`auth.json` uses Pi's shape, a provider → credential map::

    {"anthropic": {"type": "api_key", "key": "sk-ant-..."}, "openai": "sk-..."}
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from picontext._files import read_config_text
from picontext.ai.models import Model, is_local_base_url, picontext_dir
from picontext.errors import ConfigError

__all__ = [
    "ENV_API_KEYS",
    "KEYLESS_PROVIDERS",
    "auth_file",
    "env_var_for",
    "read_auth",
    "redact_secret",
    "remove_api_key",
    "require_api_key",
    "resolve_api_key",
    "save_api_key",
]

# Pi env-api-keys.js; the first variable that is set wins.
ENV_API_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "nvidia": ("NVIDIA_API_KEY",),
    "huggingface": ("HF_TOKEN",),
}

# Local servers usually accept any key; a placeholder keeps the Authorization header well-formed.
KEYLESS_PROVIDERS = frozenset({"ollama", "llama.cpp", "llamacpp", "lmstudio", "vllm", "local"})


def env_var_for(provider: str) -> str:
    """The variable a user should set for `provider` (e.g. `OPENAI_API_KEY`)."""
    names = ENV_API_KEYS.get(provider)
    if names:
        return names[0]
    return provider.upper().replace("-", "_").replace(".", "_") + "_API_KEY"


def auth_file(directory: Path | None = None) -> Path:
    return (directory if directory is not None else picontext_dir()) / "auth.json"


def read_auth(path: Path) -> dict[str, object]:
    """The stored keys of `auth.json` by provider ({} when there is no file)."""
    text = read_config_text(path)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); fix or delete the file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object of provider -> key")
    return data


def resolve_api_key(
    provider: str,
    *,
    model: Model | None = None,
    env: dict[str, str] | None = None,
    directory: Path | None = None,
) -> str | None:
    """The key for `provider`, or None.

    Order: the model's own `apiKey` (an env var name if such a variable is set, else the literal
    value), the provider's environment variables, then `auth.json`.
    """
    environ = env if env is not None else os.environ
    if model is not None and model.get("apiKey"):
        ref = model["apiKey"]
        return environ.get(ref) or ref
    for name in ENV_API_KEYS.get(provider, (env_var_for(provider),)):
        value = environ.get(name)
        if value:
            return value
    entry = read_auth(auth_file(directory)).get(provider)
    if isinstance(entry, str) and entry:
        return entry
    if isinstance(entry, dict):
        key = entry.get("key") or entry.get("apiKey") or entry.get("access")
        if isinstance(key, str) and key:
            return key
    return None


def require_api_key(
    provider: str,
    *,
    model: Model | None = None,
    env: dict[str, str] | None = None,
    directory: Path | None = None,
) -> str:
    """Like `resolve_api_key`, but a missing key is a one-line `ConfigError` saying what to set."""
    key = resolve_api_key(provider, model=model, env=env, directory=directory)
    if key:
        return key
    if provider in KEYLESS_PROVIDERS or (model is not None and is_local_base_url(model["baseUrl"])):
        return "none"
    raise ConfigError(
        f"No API key for provider {provider!r}: set {env_var_for(provider)} "
        f"or run `picontext auth set {provider}` (stores it in {auth_file(directory)})"
    )


def save_api_key(provider: str, key: str, *, directory: Path | None = None) -> Path:
    """Store `key` for `provider` in `auth.json`, creating the file with mode 0600."""
    path = auth_file(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        data = read_auth(path)
        data[provider] = {"type": "api_key", "key": key}
        _write_private(path, json.dumps(data, indent=2) + "\n")
    return path


def remove_api_key(provider: str, *, directory: Path | None = None) -> bool:
    path = auth_file(directory)
    if not path.exists():
        return False
    with _locked(path):
        data = read_auth(path)
        if provider not in data:
            return False
        del data[provider]
        _write_private(path, json.dumps(data, indent=2) + "\n")
    return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialize read-modify-write of `auth.json` between processes: without it two concurrent
    `auth set` each write their own copy and one key is lost."""
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write_private(path: Path, text: str) -> None:
    """Replace `path` atomically: a unique temporary file (mode 0600) written in full, fsynced,
    read back and compared, then renamed over the old file. A short write (a full disk) raises
    `ConfigError` and leaves the old file as it was."""
    data = text.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(errno.ENOSPC, "short write")
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        with open(tmp, "rb") as check:
            if check.read() != data:
                raise OSError(errno.EIO, "the written file reads back differently")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}; the file was not changed") from None
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def redact_secret(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced (error bodies sometimes echo the key)."""
    if not secret or len(secret) < 6 or secret == "none":
        return text
    return text.replace(secret, "<redacted>")
