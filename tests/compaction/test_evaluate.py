"""The evaluation's own parts: the offline reader and the extractive summarizer."""

from __future__ import annotations

from picontext.compaction.completion import CompletionOptions, CompletionRequest
from picontext.compaction.evaluate import Fact, extractive_summary, read_answer

PORT = Fact("listen port", "number", "Which port?", "8437", ("listen_port",), "8471")


def test_the_reader_takes_the_value_that_follows_the_cue() -> None:
    assert read_answer("listen_port = 8437\nmetrics_port = 8471", PORT) == "8437"
    assert read_answer("metrics_port = 8437 and listen_port = 8471", PORT) == "8471"  # the distractor: wrong


def test_a_value_without_its_cue_is_not_an_answer() -> None:
    assert read_answer("ports seen: 8437, 8471", PORT) is None
    assert read_answer("nothing about ports", PORT) is None


def _request(text: str, max_tokens: int = 2000) -> CompletionRequest:
    return CompletionRequest("sys", [{"role": "user", "content": [{"type": "text", "text": text}]}], max_tokens,
                             CompletionOptions())


def test_the_extractive_summarizer_follows_the_prompt_and_merges_the_previous_summary() -> None:
    conversation = (
        "[User]: Fix the parser. Never modify vendor/: it is generated.\n\n"
        '[Assistant tool calls]: edit(path="src/parse.py", oldText="a", newText="b")\n\n'
        "[Tool result]: listen_port = 9001\nE   ValueError: bad token\n\n"
        "[User]: Go with the recursive descent parser, not the regex one."
    )
    previous = "## Key values\n- timeout = 37\n\n## Files changed\n- docs/A.md"
    summary = extractive_summary(_request(
        f"<conversation>\n{conversation}\n</conversation>\n\n<previous-summary>\n{previous}\n</previous-summary>\n\n"
        "Update the summary."))
    for kept in ("Never modify vendor/", "Go with the recursive descent parser", "src/parse.py", "docs/A.md",
                 "listen_port = 9001", "timeout = 37", "ValueError: bad token"):
        assert kept in summary, kept
    assert read_answer(summary, PORT) is None  # a different port: the reader does not invent it


def test_the_extractive_summarizer_keeps_to_its_budget() -> None:
    lines = "\n".join(f"key_{i} = {i}" for i in range(400))
    summary = extractive_summary(_request(f"<conversation>\n[Tool result]: {lines}\n</conversation>\n\n", 100))
    assert len(summary) <= 400 and "key_399 = 399" in summary  # the oldest values go first
