"""`picontext demo`: a real agent session, offline, that outgrows its context window and survives.

A scripted model (`picontext.testing.ScriptedModelServer`, real HTTP on 127.0.0.1) plays a coding
agent building a small Python package in a temporary directory: the read/write/edit/bash tool
calls are real and run on real files. The model's window is tiny (12k tokens): during the first
prompt the context crosses the compaction threshold and is compacted between turns; the second
prompt pastes a CI log that overflows the window, so the failed attempt is omitted, the session
compacts and the request is retried once. The chat renderer shows it all as it happens (streamed
text, tool calls, compactions, the footer after every turn) and the command ends with the
session file and commands to look inside that work as printed.

The model counts tokens as picontext estimates them (`request_tokens`) and reports that count
with every reply, so the numbers on the screen are one count: the footer before the paste plus
the paste is what the overflow error names and what the compaction starts from. Requests for a
summary are answered by a summary writer; every other request takes the next step of the script,
so the demo does not depend on how many summary calls a compaction makes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
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
from picontext.compaction.tokens import estimate_tokens
from picontext.session.convert import COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, http_error, reply, text, tokens, tool_call
from picontext.testing.model_server import HttpError, RecordedRequest, Reply

WINDOW = 12_000
COMPACTION = {"reserveTokens": 3_000, "keepRecentTokens": 1_500}  # threshold: 12k - 3k = 9k tokens

STRIP = 'STRIP = ".,;:!?\\"\'()"\n'
STRIP_TYPOGRAPHIC = 'STRIP = ".,;:!?\\"\'()\u201c\u201d\u2018\u2019"  # typographic quotes too\n'

WORDSTATS = '''\"\"\"Word statistics for plain text.\"\"\"

from collections import Counter

''' + STRIP + '''

def words(text):
    return [w.strip(STRIP).lower() for w in text.split() if w.strip(STRIP)]


def stats(text):
    found = words(text)
    counts = Counter(found)
    return {
        "words": len(found),
        "unique": len(counts),
        "top": counts.most_common(3),
    }


if __name__ == "__main__":
    import sys

    print(stats(sys.stdin.read()))
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

UNICODE_TEST = '''class UnicodeTest(unittest.TestCase):
    def test_typographic_quotes(self):
        self.assertEqual(words("\u201cHello,\u201d she said. \u2018World\u2019!"), ["hello", "she", "said", "world"])
'''

# Sizes, in the model's count (see `request_tokens`), chosen with ~1k tokens of margin each way:
# the corpus (~5.1k) and the sample (~3.7k) take the first prompt over the 9k threshold at the
# sample, with the corpus older than the 1.5k tokens a compaction keeps; the pasted log (~8.7k)
# on top of what is left (~4.8k) is over the 12k window.
CORPUS_LINES = 240
SAMPLE_LINES = 130
CI_TEST_ROWS = 76
CORPUS_CMD = (
    "python3 -c \"import random; random.seed(7); w='context window session summary agent tool file "
    "token compaction branch'.split(); print('\\n'.join(' '.join(random.choice(w) for _ in range(12)) "
    f"for _ in range({CORPUS_LINES})))\" > corpus.txt && wc -lw corpus.txt"
)


PROMPTS = (
    "Build a word-statistics module with tests and a command line, then try it on a generated corpus.",
    "CI fails since my last push. Here is the log of the failing job:",
)


def ci_log() -> str:
    """What a user pastes: the whole log of a failing CI job (pip's noise, then the one failure)."""
    lines: list[str] = []

    def log(text_: str) -> None:
        n = len(lines)
        lines.append(f"2026-03-02T09:{14 + n // 240:02d}:{n // 4 % 60:02d}.{(n * 7919) % 10_000_000:07d}Z {text_}")

    for step in ("Set up job", "Run actions/checkout@v4", "Run actions/setup-python@v5"):
        log(f"##[group]{step}")
        log("##[endgroup]")
    log("##[group]Run python -m pip install -r requirements-dev.txt")
    packages = ["pytest", "pluggy", "iniconfig", "packaging", "coverage", "hypothesis", "attrs", "sortedcontainers",
                "mypy", "mypy-extensions", "typing-extensions", "ruff", "black", "click", "pathspec",
                "platformdirs", "tomli", "exceptiongroup", "colorama", "pygments", "rich", "markdown-it-py",
                "mdurl", "pyyaml", "requests", "urllib3", "idna", "certifi", "charset-normalizer", "tox",
                "virtualenv", "filelock", "distlib", "cachetools", "chardet", "pyproject-api", "build",
                "pyproject-hooks", "wheel", "setuptools"]
    for i, name in enumerate(packages):
        version = f"{1 + i % 7}.{(i * 3) % 11}.{i % 4}"
        wheel = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        log(f"Collecting {name}>={version.rsplit('.', 1)[0]} (from -r requirements-dev.txt (line {i + 1}))")
        log(f"  Downloading {wheel} ({20 + (i * 37) % 400} kB)")
        log(f"     ---------------------------------------- {20 + (i * 37) % 400}.0/{20 + (i * 37) % 400}.0 kB "
            f"{1 + i % 9}.{i % 10} MB/s eta 0:00:00")
    log("Installing collected packages: " + ", ".join(packages))
    log("Successfully installed " + " ".join(f"{n}-{1 + i % 7}.{(i * 3) % 11}.{i % 4}"
                                              for i, n in enumerate(packages)))
    log("##[endgroup]")
    log("##[group]Run python -m unittest -v")
    tests = [f"test_{kind}_{n} (test_corpus.CorpusTest.test_{kind}_{n}) ... ok"
             for n in range(CI_TEST_ROWS) for kind in ("counts", "unique", "top")]
    for line in tests:
        log(line)
    for line in ["test_typographic_quotes (test_unicode.UnicodeTest.test_typographic_quotes) ... FAIL",
                 "", "=" * 70,
                 "FAIL: test_typographic_quotes (test_unicode.UnicodeTest.test_typographic_quotes)",
                 "-" * 70, "Traceback (most recent call last):",
                 '  File "/home/runner/work/wordstats/wordstats/test_unicode.py", line 8, in test_typographic_quotes',
                 '    self.assertEqual(words("\u201cHello,\u201d she said. \u2018World\u2019!"), '
                 '["hello", "she", "said", "world"])',
                 "AssertionError: Lists differ: ['\u201chello,\u201d', 'she', 'said', '\u2018world\u2019'] != "
                 "['hello', 'she', 'said', 'world']",
                 "", "-" * 70, f"Ran {len(tests) + 1} tests in 0.214s", "", "FAILED (failures=1)",
                 "##[error]Process completed with exit code 1."]:
        log(line)
    return "\n".join(lines)


def sample_text() -> str:
    """A plain text to try the command line on: real sentences, not ten words drawn at random."""
    subjects = ["The agent", "The user", "A summary", "The session", "The model", "A tool call", "The file"]
    verbs = ["reads", "keeps", "writes", "compacts", "branches from", "counts", "quotes", "replaces"]
    objects = ["the context window", "an older message", "the tool output", "a long log", "the first prompt",
               "the summary of a branch", "every token it sends", "the newest reply"]
    return "\n".join(" ".join(f"{subjects[(n + k) % 7]} {verbs[(n * 3 + k) % 8]} {objects[(n * 5 + k * 2) % 8]}."
                              for k in range(3)) for n in range(SAMPLE_LINES)) + "\n"


def agent_script(delay: float) -> list[Reply | HttpError]:
    """The agent's replies, in order, over both prompts (summaries are answered apart, see
    DemoModelServer). Their token usage is not scripted: the server counts what it receives."""
    steps = [
        # the first prompt: a module, its tests and a command line, tried on a generated corpus and
        # a sample text; the context crosses the 9k threshold and is compacted between two turns
        reply(text("I'll build a small word-statistics module with tests. First, what is here?"),
              tool_call("bash", {"command": "ls -la"})),
        reply(text("Empty project. Writing the module, with a command line reading stdin."),
              tool_call("write", {"path": "wordstats.py", "content": WORDSTATS})),
        reply(text("Now the tests."), tool_call("write", {"path": "test_wordstats.py", "content": TESTS})),
        reply(tool_call("bash", {"command": "python3 -m unittest -q test_wordstats 2>&1"})),
        reply(text("Tests pass. Let me make a corpus to try it on."), tool_call("bash", {"command": CORPUS_CMD})),
        reply(tool_call("read", {"path": "corpus.txt"})),
        reply(text("And the command line over it."),
              tool_call("bash", {"command": "python3 wordstats.py < corpus.txt"})),
        reply(text("Ten words drawn at random say little. A sample of real sentences is a better check:"),
              tool_call("write", {"path": "sample.txt", "content": sample_text()})),
        reply(tool_call("bash", {"command": "python3 wordstats.py < sample.txt"})),
        reply(text("Done: `wordstats.py` counts words, unique words and the three most common ones, as a module "
                   "or from the command line (`python3 wordstats.py < sample.txt`); `test_wordstats.py` "
                   "covers it (2 tests).")),
        # the second prompt (a pasted CI log) overflows the window first: see DemoModelServer
        reply(text("The job fails in test_unicode: `words()` does not strip typographic quotes (\u201c \u201d "
                   "\u2018 \u2019). Let me look at the module."), tool_call("read", {"path": "wordstats.py"})),
        reply(text("Adding the typographic quotes to the characters `words()` strips."),
              tool_call("edit", {"path": "wordstats.py", "oldText": STRIP, "newText": STRIP_TYPOGRAPHIC})),
        reply(text("And the failing case from CI as a test here too."),
              tool_call("edit", {"path": "test_wordstats.py", "oldText": 'if __name__ == "__main__":\n',
                                 "newText": UNICODE_TEST + '\n\nif __name__ == "__main__":\n'})),
        reply(tool_call("bash", {"command": "python3 -m unittest -v test_wordstats 2>&1 | tail -4"})),
        reply(text("Passing. End to end, through the command line:"),
              tool_call("bash", {"command": "printf '\u201cHello,\u201d she said. \u2018World\u2019!' | "
                                            "python3 wordstats.py"})),
        reply(text("Fixed: `words()` now strips typographic quotes as well (\u201c \u201d \u2018 \u2019), so "
                   "the CI case passes; `test_wordstats.py` has it as `test_typographic_quotes` (3 tests, all "
                   "passing).")),
    ]
    return [step.slow(delay) for step in steps]


SUMMARY_WORKING = """## Goal
Build a small word-statistics Python module (wordstats.py) with unit tests and a command line.

## Progress
### Done
- [x] wordstats.py: words() strips punctuation and lower-cases; stats() returns words, unique, top 3;
  `python3 wordstats.py < FILE` prints the stats of stdin
- [x] test_wordstats.py: two unittest cases, passing
- [x] corpus.txt generated (240 lines of ten random words) and analysed from the command line

### In Progress
- [ ] Try it on a sample of real sentences (sample.txt)

## Key Decisions
- **Standard library only**: collections.Counter, unittest
"""

SUMMARY_DONE = SUMMARY_WORKING.replace("### In Progress\n- [ ] Try", "- [x] Tried").replace(
    "(sample.txt)", "(sample.txt): plausible counts")

SUMMARY_CI = """## Goal
Fix the failing CI job the user pasted (its whole log).

## Progress
### In Progress
- [ ] The log's only failure: test_unicode.test_typographic_quotes. words() keeps typographic quotes:
  words("\u201cHello,\u201d she said. \u2018World\u2019!") gives
  ['\u201chello,\u201d', 'she', 'said', '\u2018world\u2019'], CI expects ['hello', 'she', 'said', 'world']

## Next Steps
1. Strip \u201c \u201d \u2018 \u2019 in words(); add the CI case to test_wordstats.py
"""


def summary_for(body: Any) -> str:
    """The summary a request asks for, told by what it summarizes (a compaction may send two:
    the history and the prefix of a turn cut in two)."""
    asked = json.dumps(body, ensure_ascii=False)
    if "test_typographic_quotes" in asked:
        return SUMMARY_CI
    return SUMMARY_DONE if "covers it (2 tests)" in asked else SUMMARY_WORKING


def _is_summary_request(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    messages = body.get("messages") or []
    first = messages[0] if messages else {}
    return isinstance(first, dict) and first.get("role") == "system" and first.get("content") == SUMMARY_SYSTEM_PROMPT


# -- how the scripted model counts tokens ------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _as_pi_message(message: dict[str, Any], tools: list[Any]) -> dict[str, Any]:
    """An OpenAI chat message as the Pi message it was made from (for `estimate_tokens`)."""
    role = message.get("role")
    if role == "system":
        return {"role": "system", "content": _text_of(message.get("content")), "toolsAdded": tools}
    if role == "assistant":
        blocks: list[dict[str, Any]] = []
        if _text_of(message.get("content")):
            blocks.append({"type": "text", "text": _text_of(message.get("content"))})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            blocks.append({"type": "toolCall", "name": function.get("name"),
                           "arguments": json.loads(function.get("arguments") or "{}")})
        return {"role": "assistant", "content": blocks}
    if role == "tool":
        return {"role": "toolResult", "content": [{"type": "text", "text": _text_of(message.get("content"))}]}
    said = _text_of(message.get("content"))
    if said.startswith(COMPACTION_SUMMARY_PREFIX) and said.endswith(COMPACTION_SUMMARY_SUFFIX):
        # the session's compaction summary, wrapped for the model: counted as the summary it is
        return {"role": "compactionSummary",
                "summary": said[len(COMPACTION_SUMMARY_PREFIX):len(said) - len(COMPACTION_SUMMARY_SUFFIX)]}
    return {"role": "user", "content": [{"type": "text", "text": said}]}


def request_tokens(body: Any) -> int:
    """The scripted model's token count of a request: Pi's estimate (a token per 4 characters) of
    each session message the request was made from, the tool definitions counted with the system
    prompt. So the footer, the overflow error and the compaction's numbers are one count."""
    tools = [t.get("function") for t in body.get("tools") or [] if isinstance(t, dict)]
    return sum(estimate_tokens(_as_pi_message(m, tools)) for m in body.get("messages") or [] if isinstance(m, dict))


def reply_tokens(step: Reply) -> int:
    """The output tokens of a scripted reply, counted the same way."""
    blocks = [{"type": "text", "text": b.text} if b.kind == "text" else
              {"type": "toolCall", "name": b.name, "arguments": b.arguments} for b in step.blocks]
    return estimate_tokens({"role": "assistant", "content": blocks})


def overflow_error(tokens_: int) -> HttpError:
    """OpenAI's real "too long" error, with the count of the request it refuses."""
    return http_error(400, {"error": {
        "message": f"This model's maximum context length is {WINDOW} tokens. However, your messages resulted in "
                   f"{tokens_} tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})


class DemoModelServer(ScriptedModelServer):
    """A model with a 12k window: the agent's requests take the script's next step, summary
    requests get a summary, and every reply reports the tokens of the request it answers
    (`request_tokens`). A request over the window is refused with the provider's overflow error."""

    def __init__(self, *steps: Reply | HttpError, delay: float = 0.0) -> None:
        super().__init__(*steps)
        self.summary_requests = 0
        self.overflows: list[int] = []
        self._delay = delay

    def _take(self, req: RecordedRequest) -> Reply | HttpError | None:
        counted = request_tokens(req.body) if isinstance(req.body, dict) else 0
        if _is_summary_request(req.body):
            with self._lock:
                self.requests.append(req)
                self.summary_requests += 1
            step = text(summary_for(req.body))
            return step.with_usage(tokens(counted, reply_tokens(step))).slow(self._delay / 4)
        if counted > WINDOW:
            with self._lock:
                self.requests.append(req)
                self.overflows.append(counted)
            return overflow_error(counted)
        taken = super()._take(req)
        if isinstance(taken, Reply):
            return taken.with_usage(tokens(counted, reply_tokens(taken)))
        return taken


def cmd_demo(args: argparse.Namespace) -> int:
    return asyncio.run(run_demo(args.dir, 0.0 if args.fast else 0.03))


def demo_console() -> Console:
    """On a terminal, its width; in a pipe or a file, lines as long as they are (no padding, no
    wrapping at 80 columns)."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=True, width=200)
    return console


def how_to_run_picontext() -> tuple[str, str, str | None]:
    """How the user's shell runs this picontext: (the command from the current directory, the
    same from any directory, a hint or None).

    `picontext` when that name on PATH is this program; else its path, relative to the current
    directory when it lies inside it (`.venv/bin/picontext` from a clone's root), with a hint on
    how to put it on PATH.
    """
    program = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(program) != "picontext" or not os.path.isfile(program):
        # `python -m picontext`: the console script beside this interpreter, when there is one
        beside = os.path.join(os.path.dirname(sys.executable), "picontext")
        program = beside if os.path.isfile(beside) else ""
    if not program:
        anywhere = f"{sys.executable} -m picontext"
        return anywhere, anywhere, None
    found = shutil.which("picontext")
    if found and os.path.realpath(found) == os.path.realpath(program):
        return "picontext", "picontext", None

    def shown(path: str) -> str:
        relative = os.path.relpath(path)
        return path if relative.startswith("..") else relative

    activate = os.path.join(os.path.dirname(program), "activate")
    hint = None
    if os.path.isfile(activate):
        hint = f"picontext is not on your PATH; `source {shown(activate)}` puts it there, then `picontext ...` works"
    return shown(program), program, hint


def print_next_steps(console: Console, manager: SessionManager, project: str) -> None:
    """The session file and commands to look inside it, each one working as printed."""
    console.print(Text("Session file: ", style="bold") + Text(str(manager.get_session_file())),
                  soft_wrap=True)  # a path is never broken
    short_id = manager.get_session_id()[:13]
    command, anywhere, hint = how_to_run_picontext()
    console.print(Text("Look inside (a session id prefix works from any directory):", style="bold"))
    for line in (f"{command} tree {short_id}", f"{command} show {short_id} --tail 20",
                 f"{command} context {short_id}", f"cd {project} && {anywhere} sessions"):
        console.print(Text(f"  {line}"), soft_wrap=True)
    if hint:
        console.print(Text(f"({hint})", style="dim"), soft_wrap=True)


async def run_demo(directory: str | None, delay: float, console: Console | None = None) -> int:
    from picontext.cli.modes.common import Controller
    from picontext.cli.modes.interactive import ReplyView, usage_style

    console = console or demo_console()
    root = directory or tempfile.mkdtemp(prefix="picontext-demo-")
    project = os.path.join(root, "project")
    os.makedirs(project, exist_ok=True)
    settings = Settings().with_overrides({"compaction": COMPACTION}, "demo")
    with DemoModelServer(*agent_script(delay), delay=delay) as server:
        model = server.model("openai-completions", id="scripted-12k", provider="demo", context_window=WINDOW,
                             max_tokens=2_000)
        # the project's default session directory: `picontext sessions` in the project lists it
        manager = SessionManager.create(project)
        tools = coding_tools(project)
        session = AgentSession(manager, model=model, tools=tools, system_prompt=default_system_prompt(project, tools),
                               stream_options=StreamOptions(api_key="demo"), settings=settings)
        controller = Controller(session)
        view = ReplyView(console)
        controller.subscribe(view)

        def footer(event: dict[str, Any]) -> None:
            if event["type"] in ("turn_end", "compaction_end"):
                used, _, percent = controller.context_usage()
                count = f" · {used:,} tokens" if used is not None else \
                    f" · ~{controller.session.estimated_context_tokens():,} tokens (estimated)"
                view.line(f"── {controller.footer()}{count}", usage_style(percent))

        controller.subscribe(footer)
        console.print(Text("picontext demo", style="bold") + Text(
            f" — a scripted model with a {WINDOW // 1000}k-token window (compaction threshold "
            f"{(WINDOW - COMPACTION['reserveTokens']) // 1000}k) works in {project}. It counts a token per 4 "
            "characters, as picontext estimates them, so every number below is the same count.", style="dim"))
        console.print(Text(f"> {PROMPTS[0]}", style="bold cyan"))
        view.start()
        await session.prompt(PROMPTS[0])
        view.close()
        log = ci_log()
        pasted = f"{PROMPTS[1]}\n\n```\n{log}\n```"
        console.print(Text(f"> {PROMPTS[1]} ", style="bold cyan") + Text(
            f"[pasted: {log.count(chr(10)) + 1} lines, {estimate_tokens({'role': 'user', 'content': pasted}):,} "
            "tokens]", style="cyan"))
        view.start()
        await session.prompt(pasted)
        view.close()
    kinds = [e.get("type") for e in manager.get_entries() if isinstance(e, dict)]
    edits = sum(1 for e in manager.get_entries() if isinstance(e, dict) and e.get("type") == "context_edit")
    console.print()
    console.print(Text(f"{kinds.count('compaction')} compaction(s), {edits} context edit(s), "
                       f"{server.summary_requests} summary request(s), {len(server.requests)} requests in all; "
                       f"files in {project}: {', '.join(sorted(os.listdir(project)))}", style="dim"), soft_wrap=True)
    print_next_steps(console, manager, project)
    if server.unexpected:
        console.print(Text(f"demo: {len(server.unexpected)} request(s) the script did not expect", style="bold red"))
        return 1
    return 0
