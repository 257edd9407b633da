"""The calibrated token estimate against the prompt tokens a real server counts (docs/compaction.md).

llama-cpp-python's server with SmolLM2-135M: its own tokenizer and chat template (which drops
the tool schemas). A coding session of 30 requests is built turn by turn on a real session file,
with picontext's default system prompt and tools, plain prose, numeric-heavy tool output
(tables, hex, JSON), code, and a compaction after the 14th request. Before every request the
trigger's estimate is computed from the file (Pi's chars/4 and `compaction.calibrateTokens`), then
the request picontext would stream is sent unstreamed (this server reports usage only then) and
its `prompt_tokens` is the truth. The reply's usage is recorded on the assistant message, as a
provider that reports usage in streams would have it.

Target (issue 14): the calibrated estimate within ±15 % of the reported prompt tokens on >= 95 %
of the requests after calibration, i.e. every request but the first (before the first report
nothing is known: that estimate is Pi's, and it is 2.2x too high here, the tool schemas that this
server's chat template drops). 30 requests, so at most one of the 29 may miss.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from llama_fixture import serve_llama

from picontext.agent.loop import request_messages, system_declaration
from picontext.agent.prompt import default_system_prompt
from picontext.agent.tools import coding_tools
from picontext.agent.types import AgentContext, tool_declaration
from picontext.ai.providers import StreamOptions
from picontext.ai.providers.openai_completions import build_request
from picontext.compaction.calibration import calibrated_projected_tokens
from picontext.compaction.tokens import estimate_projected_context_tokens
from picontext.session.manager import SessionManager
from support.llama_server import LlamaServer

N_CTX = 4096
REPLY_TOKENS = 12
TOLERANCE = 0.15


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    yield from serve_llama(N_CTX)


def numeric_table(rng: random.Random, rows: int) -> str:
    lines = ["ts,latency_ms,p50,p99,bytes,status"]
    for _ in range(rows):
        lines.append(f"{rng.randint(1_700_000_000, 1_800_000_000)},{rng.uniform(0, 900):.3f},"
                     f"{rng.uniform(0, 90):.2f},{rng.uniform(100, 990):.2f},{rng.randint(0, 10**7)},"
                     f"{rng.choice([200, 201, 404, 500])}")
    return "\n".join(lines)


def hex_dump(rng: random.Random, rows: int) -> str:
    return "\n".join(f"{i * 16:08x}  " + " ".join(f"{rng.randint(0, 255):02x}" for _ in range(16))
                     for i in range(rows))


def json_blob(rng: random.Random, items: int) -> str:
    import json

    return json.dumps([{"id": rng.randint(1, 99999), "score": round(rng.random(), 6), "tags": ["a", "b"],
                        "pos": [rng.randint(-500, 500), rng.randint(-500, 500)]} for _ in range(items)])


CODE = '''def load_config(path: str) -> dict[str, object]:
    """Read the settings file and merge the defaults under it."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    merged = dict(DEFAULTS)
    for key, value in data.items():
        if key not in DEFAULTS:
            raise KeyError(f"unknown setting {key!r} in {path}")
        merged[key] = value
    return merged
'''

PROSE = ("The service keeps a small cache of recent lookups. When a request misses the cache, the "
         "handler asks the database, stores the answer for a few minutes and returns it. Errors are "
         "logged with the request id so that a failing call can be traced across the three services. ")


def script(rng: random.Random) -> list[tuple[str, str]]:
    """(kind, text) steps: "user" prompts and "tool" outputs (each after an assistant tool call).

    Sizes are those of a short coding session (each step adds 50-400 real tokens); the server
    evaluates every token on two shared cores, so the whole run stays under ~4,000 tokens.
    """
    return [
        ("user", "Our API got slow last week. Please look at the latency logs and the config loader, "
                 "find out why, and propose a fix. " + PROSE),
        ("tool", CODE),
        ("tool", numeric_table(rng, 8)),
        ("tool", PROSE * 2),
        ("user", "What did you find in the table? Summarize the p99 column in a sentence or two."),
        ("tool", json_blob(rng, 5)),
        ("tool", hex_dump(rng, 5)),
        ("user", "Good. Now check the config loader for the unknown-key bug the on-call team reported."),
        ("tool", CODE),
        ("tool", "Traceback (most recent call last):\n  File \"app/config.py\", line 7, in load_config\n"
                 "KeyError: \"unknown setting 'listen_port' in /etc/app.json\"\n" * 2),
        ("tool", numeric_table(rng, 6)),
        ("user", "Fix it so unknown keys are reported with the file and line, and add a test."),
        ("tool", PROSE),
        ("tool", json_blob(rng, 4)),
        # -- a compaction is appended here --
        ("user", "Where were we? Continue with the test for the config loader."),
        ("tool", CODE),
        ("tool", numeric_table(rng, 6)),
        ("tool", PROSE * 2),
        ("user", "Run the tests again and show me the failures only."),
        ("tool", "FAILED tests/test_config.py::test_unknown_key - AssertionError: 3 != 4\n" * 3),
        ("tool", hex_dump(rng, 4)),
        ("user", "Thanks. Write a short summary of the change for the pull request."),
        ("tool", json_blob(rng, 3)),
        ("tool", PROSE),
        ("user", "One more thing: the p99 values above 900 ms, which hours were they in?"),
        ("tool", numeric_table(rng, 5)),
        ("tool", CODE),
        ("tool", hex_dump(rng, 3)),
        ("user", "OK, that is all for today."),
        ("tool", PROSE),
    ]


class Run:
    """One session on a real file; `send()` is one request to the real server."""

    def __init__(self, llama: LlamaServer, tmp: Path) -> None:
        self.llama = llama
        self.model = llama.model(max_tokens=REPLY_TOKENS)
        self.tools = coding_tools(str(tmp))
        self.manager = SessionManager.create(str(tmp), str(tmp / "sessions"))
        prompt = default_system_prompt(str(tmp), self.tools)
        declaration = system_declaration(AgentContext([], prompt, self.tools), 0)
        assert declaration is not None
        self.manager.append_message(dict(declaration))
        self.client = httpx.Client(timeout=300)
        self.calls = 0

    def estimates(self) -> tuple[int, int]:
        projection, branch = self.manager.build_session_projection(), self.manager.branch_view()
        pi = int(estimate_projected_context_tokens(projection, branch)["tokens"])
        calibrated = int(calibrated_projected_tokens(projection, branch, "llama/smollm2")["tokens"])
        return pi, calibrated

    def send(self) -> tuple[str, int, int]:
        """The request picontext would stream, sent unstreamed: (reply text, prompt, completion tokens)."""
        context: Any = {"messages": request_messages(self.manager.build_session_projection().messages),
                        "tools": [tool_declaration(t) for t in self.tools]}
        request = build_request(self.model, context, StreamOptions(max_tokens=REPLY_TOKENS), "")
        body = {**request.body, "stream": False, "temperature": 0}
        body.pop("stream_options", None)
        response = self.client.post(request.url, json=body)
        response.raise_for_status()
        data = response.json()
        self.calls += 1
        text = data["choices"][0]["message"].get("content") or ""
        return text, int(data["usage"]["prompt_tokens"]), int(data["usage"]["completion_tokens"])

    def reply(self, text: str, prompt: int, completion: int, call: dict[str, Any] | None) -> None:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text.strip() else []
        if call is not None:
            content.append(call)
        self.manager.append_message({
            "role": "assistant", "content": content, "api": "openai-completions", "provider": "llama",
            "model": "smollm2", "stopReason": "toolUse" if call else "stop", "timestamp": 0,
            "usage": {"input": prompt, "output": completion, "cacheRead": 0, "cacheWrite": 0,
                      "totalTokens": prompt + completion,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        })


def test_calibrated_estimate_is_within_15_percent_on_95_percent_of_real_requests(
        llama: LlamaServer, tmp_path: Path) -> None:
    run = Run(llama, tmp_path)
    rows: list[tuple[int, int, int]] = []  # (reported, Pi's estimate, calibrated estimate)
    steps = script(random.Random(14))
    compact_after = 14
    for n, (kind, content) in enumerate(steps):
        if n == compact_after:  # keep the last user turn (4 entries back), summarize the rest
            branch = run.manager.get_branch()
            kept = next(e for e in reversed(branch) if e["type"] == "message" and e["message"]["role"] == "user")
            run.manager.append_compaction(
                "## Goal\nFind why the API got slow and fix the config loader.\n\n## Progress\n### Done\n"
                "- [x] Read the latency table (p99 up to 990 ms) and app/config.py\n\n## Next Steps\n"
                "1. Report unknown keys with file and line\n2. Add a test", kept["id"], 5000)
        if kind == "user":
            run.manager.append_message({"role": "user", "content": [{"type": "text", "text": content}],
                                        "timestamp": 0})
        else:
            run.manager.append_message({"role": "toolResult", "toolCallId": f"call_{n}", "toolName": "read",
                                        "content": [{"type": "text", "text": content}], "isError": False,
                                        "timestamp": 0})
        pi, calibrated = run.estimates()
        text, prompt, completion = run.send()
        rows.append((prompt, pi, calibrated))
        calls_tool = n + 1 < len(steps) and steps[n + 1][0] == "tool"
        call = {"type": "toolCall", "id": f"call_{n + 1}", "name": "read",
                "arguments": {"path": f"logs/{n + 1}.txt"}} if calls_tool else None
        run.reply(text, prompt, completion, call)

    def within(estimate: int, reported: int) -> bool:
        return abs(estimate - reported) <= TOLERANCE * reported

    calibrated_ok = sum(within(c, r) for r, _p, c in rows[1:])
    pi_ok = sum(within(p, r) for r, p, _c in rows[1:])
    report = "\n".join(f"{i + 1:>2} reported {r:>5}  chars/4 {p:>5} ({(p - r) / r:+.0%})  calibrated {c:>5} "
                       f"({(c - r) / r:+.0%})" for i, (r, p, c) in enumerate(rows))
    print(f"\n{report}\nwithin ±15 % after the first report: chars/4 {pi_ok}/{len(rows) - 1}, "
          f"calibrated {calibrated_ok}/{len(rows) - 1}")
    assert len(rows) == 30 and run.calls == 30
    assert rows[0][1] == rows[0][2]  # nothing reported yet: the estimate is Pi's
    assert calibrated_ok >= 0.95 * (len(rows) - 1), report
    assert pi_ok < calibrated_ok, report  # the server's tokenizer really disagrees with chars/4 here
