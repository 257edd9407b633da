"""`picontext demo`: a real agent session, offline, that outgrows its context window and survives.

A scripted model (`picontext.testing.ScriptedModelServer`, real HTTP on 127.0.0.1) plays a coding
agent building a small Python package in a temporary directory: the read/write/edit/bash tool
calls are real and run on real files. The model's window is tiny (12k tokens), so the session
crosses the compaction threshold mid-task and is compacted between turns; later a request
overflows the window, the failed attempt is omitted, the session compacts and the request is
retried once. The chat renderer shows it all as it happens (streamed text, tool calls, the
compaction indicator, the footer after every turn) and the command ends with the session file.

Requests for a summary are answered by a summary writer; every other request takes the next
step of the script, so the demo does not depend on how many summary calls a compaction makes.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import tempfile
from typing import Any

from rich.console import Console
from rich.text import Text

from picontext.agent.prompt import default_system_prompt
from picontext.agent.session import AgentSession
from picontext.agent.tools import coding_tools
from picontext.ai.providers import StreamOptions
from picontext.compaction.prompts import SYSTEM_PROMPT as SUMMARY_SYSTEM_PROMPT
from picontext.compaction.settings import Settings
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, http_error, reply, text, tokens, tool_call
from picontext.testing.model_server import HttpError, RecordedRequest, Reply

WINDOW = 12_000
COMPACTION = {"reserveTokens": 3_000, "keepRecentTokens": 1_500}  # threshold: 12k - 3k = 9k tokens

WORDSTATS = '''"""Word statistics for plain text."""

from collections import Counter


def words(text):
    return [w.strip(".,;:!?\\"'()").lower() for w in text.split() if w.strip(".,;:!?\\"'()")]


def stats(text):
    found = words(text)
    counts = Counter(found)
    return {
        "words": len(found),
        "unique": len(counts),
        "top": counts.most_common(3),
    }
'''

TESTS = '''import unittest

from wordstats import stats, words


class WordStatsTest(unittest.TestCase):
    def test_words_strip_punctuation(self):
        self.assertEqual(words("Hello, world! Hello."), ["hello", "world", "hello"])

    def test_stats(self):
        result = stats("a b a c a b")
        self.assertEqual(result["words"], 6)
        self.assertEqual(result["unique"], 3)
        self.assertEqual(result["top"][0], ("a", 3))


if __name__ == "__main__":
    unittest.main()
'''

CORPUS_CMD = (
    "python3 -c \"import random; random.seed(7); w='context window session summary agent tool file "
    "token compaction branch'.split(); print('\\n'.join(' '.join(random.choice(w) for _ in range(12)) "
    "for _ in range(120)))\" > corpus.txt && wc -lw corpus.txt"
)


def _step(reply_: Reply, used: int, delay: float) -> Reply:
    return reply_.with_usage(tokens(used, 60)).slow(delay)


def agent_script(delay: float, *, overflow_once: bool) -> list[Reply | HttpError]:
    """The agent's side of the conversation: (reply, context tokens the server reports) per request."""
    steps: list[Reply | HttpError] = [
        _step(reply(text("I'll build a small word-statistics module with tests. First, what is here?"),
                    tool_call("bash", {"command": "ls -la"})), 1_900, delay),
        _step(reply(text("Empty project. Writing the module."),
                    tool_call("write", {"path": "wordstats.py", "content": WORDSTATS})), 2_700, delay),
        _step(reply(text("Now the tests."), tool_call("write", {"path": "test_wordstats.py", "content": TESTS})),
              3_400, delay),
        _step(reply(tool_call("bash", {"command": "python3 -m unittest -q test_wordstats 2>&1"})), 4_200, delay),
        _step(reply(text("Tests pass. Let me make a realistic corpus to try it on."),
                    tool_call("bash", {"command": CORPUS_CMD})), 5_000, delay),
        _step(reply(tool_call("read", {"path": "corpus.txt"})), 6_300, delay),
        _step(reply(text("And run the statistics over it."),
                    tool_call("bash", {"command": "python3 -c 'import wordstats; print(wordstats.stats("
                                                  "open(\"corpus.txt\").read()))'"})), 9_400, delay),
        # -> over the 9k threshold: the session compacts between turns, then the run goes on
        _step(reply(text("The module works on the corpus. Next: a command-line entry point."),
                    tool_call("edit", {"path": "wordstats.py", "oldText": '        "top": counts.most_common(3),\n'
                                                                          "    }\n",
                                       "newText": '        "top": counts.most_common(3),\n    }\n\n\n'
                                                  'if __name__ == "__main__":\n    import sys\n\n'
                                                  "    print(stats(sys.stdin.read()))\n"})), 3_100, delay),
        _step(reply(tool_call("bash", {"command": "python3 wordstats.py < corpus.txt"})), 3_900, delay),
        _step(reply(text("Same numbers as before. A look at the corpus itself, to check them by eye:"),
                    tool_call("read", {"path": "corpus.txt"})), 4_800, delay),
        _step(reply(text("Plausible. Now the tests, to add one for the command line."),
                    tool_call("read", {"path": "test_wordstats.py"})), 7_600, delay),
    ]
    if overflow_once:
        # The next request is "too long" (OpenAI's real error shape, numbers matching the demo's
        # window): the failed attempt is omitted, the session compacts and retries once.
        steps.append(http_error(400, {"error": {
            "message": f"This model's maximum context length is {WINDOW} tokens. However, your messages "
                       f"resulted in {WINDOW + 873} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}))
    steps += [
        _step(reply(text("Adding a test for the command-line entry point."),
                    tool_call("edit", {"path": "test_wordstats.py",
                                       "oldText": 'if __name__ == "__main__":\n',
                                       "newText": "class CliTest(unittest.TestCase):\n"
                                                  "    def test_cli(self):\n"
                                                  "        import subprocess, sys\n"
                                                  "        out = subprocess.run([sys.executable, 'wordstats.py'], "
                                                  "input='a a b', capture_output=True, text=True).stdout\n"
                                                  "        self.assertIn(\"'words': 3\", out)\n\n\n"
                                                  'if __name__ == "__main__":\n'})), 3_300, delay),
        _step(reply(tool_call("bash", {"command": "python3 -m unittest -v test_wordstats 2>&1 | tail -4"})),
              4_000, delay),
        _step(reply(text("Done. `wordstats.py` counts words, unique words and the most common ones; it runs as "
                         "a module or from the command line (`python3 wordstats.py < corpus.txt`), and "
                         "`test_wordstats.py` covers both (3 tests, all passing).")), 4_300, delay),
    ]
    return steps


SUMMARY = """## Goal
Build a small word-statistics Python module (wordstats.py) with unit tests in the demo project.

## Progress
### Done
- [x] wordstats.py: words() strips punctuation and lower-cases; stats() returns words, unique, top 3
- [x] test_wordstats.py: two unittest cases, passing
- [x] corpus.txt generated (120 lines) and analysed with stats()

### In Progress
- [ ] Command-line entry point and its test

## Key Decisions
- **Standard library only**: collections.Counter, unittest

## Next Steps
1. Add `if __name__ == "__main__"` reading stdin
2. Test it through a subprocess
"""


def _is_summary_request(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    messages = body.get("messages") or []
    first = messages[0] if messages else {}
    return isinstance(first, dict) and first.get("role") == "system" and first.get("content") == SUMMARY_SYSTEM_PROMPT


class DemoModelServer(ScriptedModelServer):
    """The agent's requests take the script's next step; summary requests get a summary."""

    def __init__(self, *steps: Reply | HttpError, delay: float = 0.0) -> None:
        super().__init__(*steps)
        self.summary_requests = 0
        self._delay = delay

    def _take(self, req: RecordedRequest) -> Reply | HttpError | None:
        if _is_summary_request(req.body):
            with self._lock:
                self.requests.append(req)
                self.summary_requests += 1
            return text(SUMMARY).with_usage(tokens(2_500, 300)).slow(self._delay / 4)
        return super()._take(req)


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="watch an agent session outgrow its window and survive (offline, scripted)")
    p.add_argument("--fast", action="store_true", help="no pauses while streaming")
    p.add_argument("--dir", help="work here instead of a new temporary directory")
    p.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    return asyncio.run(run_demo(args.dir, 0.0 if args.fast else 0.03))


async def run_demo(directory: str | None, delay: float, console: Console | None = None) -> int:
    from picontext.cli.modes.common import Controller
    from picontext.cli.modes.interactive import ReplyView, usage_style

    console = console or Console(highlight=False)
    root = directory or tempfile.mkdtemp(prefix="picontext-demo-")
    project = os.path.join(root, "project")
    os.makedirs(project, exist_ok=True)
    automatic = "settings" in inspect.signature(AgentSession).parameters
    settings = Settings().with_overrides({"compaction": COMPACTION}, "demo")
    with DemoModelServer(*agent_script(delay, overflow_once=automatic), delay=delay) as server:
        model = server.model("openai-completions", id="scripted-12k", provider="demo", context_window=WINDOW,
                             max_tokens=2_000)
        manager = SessionManager.create(project, os.path.join(root, "sessions"))
        tools = coding_tools(project)
        extra: dict[str, Any] = {"settings": settings} if automatic else {}
        session = AgentSession(manager, model=model, tools=tools, system_prompt=default_system_prompt(project, tools),
                               stream_options=StreamOptions(api_key="demo"), **extra)
        controller = Controller(session)
        view = ReplyView(console)
        controller.subscribe(view)

        def footer(event: dict[str, Any]) -> None:
            if event["type"] in ("turn_end", "compaction_end"):
                _, _, percent = controller.context_usage()
                view.line(f"── {controller.footer()}", usage_style(percent))

        controller.subscribe(footer)
        console.print(Text("picontext demo", style="bold") + Text(
            f" — a scripted model with a {WINDOW // 1000}k-token window (compaction threshold "
            f"{(WINDOW - COMPACTION['reserveTokens']) // 1000}k) works in {project}", style="dim"))
        task = "Build a word-statistics module with tests, try it on a generated corpus, then add a command line."
        console.print(Text(f"> {task}", style="bold cyan"))
        if automatic:
            await session.prompt(task)
        else:  # a runtime without automatic compaction: compact by hand between two prompts
            await session.prompt(task)
            await controller.compact()
            await session.prompt("Go on: add the command-line entry point and its test.")
        view.close()
    path = manager.get_session_file()
    kinds = [e.get("type") for e in manager.get_entries() if isinstance(e, dict)]
    edits = sum(1 for e in manager.get_entries() if isinstance(e, dict) and e.get("type") == "context_edit")
    console.print()
    console.print(Text(f"{kinds.count('compaction')} compaction(s), {edits} context edit(s), "
                       f"{server.summary_requests} summary request(s), {len(server.requests)} requests in all; "
                       f"files in {project}: {', '.join(sorted(os.listdir(project)))}", style="dim"))
    console.print(Text("Session file: ", style="bold") + Text(str(path)))
    console.print(Text(f"Look inside: picontext tree {path}   |   picontext show {path}", style="dim"))
    if server.unexpected:
        console.print(Text(f"demo: {len(server.unexpected)} request(s) the script did not expect", style="bold red"))
        return 1
    return 0
