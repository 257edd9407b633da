"""PicontextHistory with a real model: pydantic-ai's OpenAI client against llama.cpp (SmolLM2-135M,
greedy, fixed seed) holds a conversation through one compaction written by the same model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_fixture import serve_llama
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from picontext.integrations.pydantic_ai import PicontextHistory
from support.llama_server import SAMPLING, LlamaServer

N_CTX = 2048
SETTINGS = {"compaction": {"reserveTokens": 384, "keepRecentTokens": 100}}
PASSAGE = ("The lighthouse keeper wrote in the log that the fog came in at dusk, the lamp was lit, "
           "and the ships passed safely through the narrow channel near the rocks. ") * 10


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    yield from serve_llama(N_CTX)


@pytest.mark.slow
async def test_a_conversation_with_llama_survives_a_compaction(llama: LlamaServer, tmp_path: Path) -> None:
    history = PicontextHistory(model=llama.model(max_tokens=384), cwd=str(tmp_path), settings=SETTINGS)
    compacted: list[dict[str, object]] = []
    history.memory.subscribe(lambda e: compacted.append(e) if e["type"] == "compaction_end" else None)
    model = OpenAIChatModel("smollm2", provider=OpenAIProvider(base_url=llama.url + "/v1", api_key="none"))
    settings = ModelSettings(max_tokens=16, temperature=SAMPLING["temperature"], seed=SAMPLING["seed"])
    agent: Agent[None, str] = Agent(model, system_prompt="You are a helpful assistant.", capabilities=[history],
                                    model_settings=settings)
    turn = 0
    while not compacted and turn < 12:
        result = await agent.run(f"Log page {turn}: {PASSAGE} What did the keeper see on page {turn}?")
        assert result.output.strip()
        turn += 1
    assert compacted, "the conversation never reached the threshold"
    assert compacted[0].get("result"), compacted[0]
    # The conversation goes on after the compaction, on the compacted context.
    result = await agent.run("In one word: what came in at dusk?")
    assert result.output.strip()
    roles = [m["role"] for m in history.memory.messages()]
    assert roles[:2] == ["system", "compactionSummary"]  # the prompt, then the summary, then the recent turns
    assert not history.memory.should_compact()
    # Every request fit the window, by the server's own count.
    manager = history.memory.manager
    prompts = [e["message"]["usage"]["input"] + e["message"]["usage"]["cacheRead"]
               for e in manager.get_entries() if e.get("type") == "message" and e["message"]["role"] == "assistant"]
    assert len(prompts) == turn + 1 and max(prompts) < N_CTX
    assert sum(e.get("type") == "compaction" for e in manager.get_entries()) == 1
