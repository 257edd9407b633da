"""A LangChain agent with PicontextMiddleware on the real llama.cpp server (SmolLM2-135M, a 2k
window): the conversation goes on through a compaction whose summary the same small model writes.

`ChatOpenAI` talks to the server with greedy sampling and a fixed seed; the middleware gets the
model as `llama/smollm2` from models.json, as a user declares it. In CI (CI=true) a missing
server fails; elsewhere it skips.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from llama_fixture import serve_llama

from picontext.integrations.langchain import PicontextMiddleware
from support.llama_server import SAMPLING, LlamaServer

N_CTX = 2048
WINDOW = 900  # the window declared in models.json: compaction comes after a few turns, not dozens
ANSWER_TOKENS = 24  # the answers are not the point; the wire and the compaction are
# reserveTokens caps a summary at 0.8 x 256 tokens: the small model on shared cores writes it in time.
SETTINGS = {"compaction": {"reserveTokens": 256, "keepRecentTokens": 100}}

# Varied prose, as a user writes it (a sentence repeated primes a 135M model to repeat itself).
FACTS = [
    "The billing service keeps every invoice in a Postgres ledger table with the customer, the amount in cents "
    "and a status that starts as open.",
    "A nightly job at two o'clock charges the saved card for each open invoice and marks the row as paid or failed.",
    "Failed charges are retried three times over a week, after which the account is suspended and support is told.",
    "Refunds are separate ledger rows pointing back at the invoice they cancel, so no payment history is rewritten.",
    "The web dashboard reads the ledger through a read replica that lags the primary by at most a few seconds.",
    "Currency conversion uses the daily rate published at noon, stored beside each invoice for later audits.",
    "Customers on the annual plan get one invoice a year, with a reminder email sent thirty days ahead.",
    "Tax is computed by an external service; its answer is cached per postcode for a day to save on fees.",
    "Support staff can issue credits, which appear as negative invoices and are applied to the next bill.",
    "An audit export runs monthly and writes every ledger row of the month to a signed CSV file in cold storage.",
    "The ledger table is partitioned by month so the nightly job only scans the current partition.",
    "Webhooks tell the shop front when an invoice changes status; a failed delivery is retried with backoff.",
]


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    yield from serve_llama(N_CTX)


def test_a_langchain_agent_holds_a_conversation_through_a_compaction(llama: LlamaServer, tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    declared = llama.models_json(max_tokens=ANSWER_TOKENS)
    declared["providers"]["llama"]["models"][0]["contextWindow"] = WINDOW
    (home / "models.json").write_text(json.dumps(declared))
    memory = PicontextMiddleware(model="llama/smollm2", cwd=str(tmp_path), settings=SETTINGS)
    chat = ChatOpenAI(model="smollm2", base_url=llama.url + "/v1", api_key="local",  # type: ignore[arg-type]
                      max_tokens=ANSWER_TOKENS, temperature=SAMPLING["temperature"], seed=SAMPLING["seed"],
                      max_retries=0, timeout=600)
    agent = create_agent(chat, tools=[], middleware=[memory], system_prompt="You are a helpful assistant.")
    manager = memory.memory.manager

    def compactions() -> int:
        return sum(e["type"] == "compaction" for e in manager.get_entries())

    def note(turn: int) -> str:
        return f"{FACTS[turn % len(FACTS)]} {FACTS[(turn + 5) % len(FACTS)]} Note this down."

    turns = 0
    while compactions() == 0:
        assert turns < 10, "the window should have filled within ten turns"
        out = agent.invoke({"messages": [HumanMessage(note(turns))]})
        assert isinstance(out["messages"][-1], AIMessage)
        turns += 1
    # The conversation goes on after the compaction, on the projection: a summary and a short tail.
    out = agent.invoke({"messages": [HumanMessage("What does the nightly job do?")]})
    reply = out["messages"][-1]
    assert isinstance(reply, AIMessage) and reply.text.strip()
    assert compactions() >= 1
    compaction = [e for e in manager.get_entries() if e["type"] == "compaction"][-1]
    assert compaction["summary"].strip()
    first = memory.memory.context()[0]
    assert first["role"] == "user" and compaction["summary"] in "".join(b["text"] for b in first["content"])
    # Nothing was lost: every question is in the file, once.
    users = [e["message"]["content"] for e in manager.get_entries()
             if e["type"] == "message" and e["message"]["role"] == "user"]
    assert users == [note(i) for i in range(turns)] + ["What does the nightly job do?"]
    # The reported usage set the threshold: every answer carries the server's token counts.
    replies = [e["message"] for e in manager.get_entries() if e["type"] == "message"
               and e["message"]["role"] == "assistant"]
    assert all(m["usage"]["input"] > 0 for m in replies)
