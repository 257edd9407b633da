"""PicontextSession with the real SDK Runner and a real model: llama-cpp-python's server with
SmolLM2-135M (temperature 0, fixed seed). The conversation outgrows the 2k window, is compacted
once (the summary written by the same model, or the mechanical fallback if its summary is
unusable) and goes on. In CI (CI=true) a missing server fails; elsewhere it skips."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from llama_fixture import serve_llama
from openai import AsyncOpenAI

from picontext.integrations.openai_agents import PicontextSession
from picontext.testing.llama_server import LlamaServer

set_tracing_disabled(True)
N_CTX = 2048
PARAGRAPH = ("The harbour town keeps its boats in a long stone basin. Fishermen leave before dawn and come back "
             "at noon with cod, herring and crabs, which the market sells by weight until the evening bell. ")


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    yield from serve_llama(N_CTX)


async def test_conversation_holds_through_one_compaction(llama: LlamaServer, tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "models.json").write_text(json.dumps(llama.models_json(max_tokens=512)))
    session = PicontextSession(model="llama/smollm2", store=str(tmp_path / "store"), cwd=str(tmp_path),
                               settings={"compaction": {"reserveTokens": 384, "keepRecentTokens": 100}})
    client = AsyncOpenAI(base_url=llama.url + "/v1", api_key="none", max_retries=0)
    agent = Agent(name="notes", instructions="Answer in one short sentence.",
                  model=OpenAIChatCompletionsModel("smollm2", client),
                  model_settings=ModelSettings(temperature=0, max_tokens=24, extra_args={"seed": 1}))
    turns_after = 0
    for turn in range(12):
        result = await Runner.run(agent, f"Note {turn}: {PARAGRAPH * 8}What is note {turn} about?", session=session)
        assert isinstance(result.final_output, str)
        usage = result.context_wrapper.usage.request_usage_entries[-1]
        assert usage.input_tokens + usage.output_tokens <= N_CTX  # the request fitted the real window
        if session.compactions:
            turns_after += 1
            if turns_after == 2:
                break
    assert session.compactions == 1 and turns_after == 2, (session.compactions, turns_after)
    items = await session.get_items()
    assert "<summary>" in json.dumps(items[0])
    stored = [e for e in session.memory.manager.get_entries() if e["type"] == "message"]
    assert sum(1 for e in stored if e["message"]["role"] == "user") == turn + 1  # nothing lost
