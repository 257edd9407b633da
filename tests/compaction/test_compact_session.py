"""compact_session: append under the lock, nothing written on failure, strategies, real HTTP."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import tool_session, user

from picontext.ai.retry import RetryPolicy
from picontext.compaction.compact import compact_session, estimated_tokens
from picontext.compaction.completion import ScriptedCompletion, StreamCompletion, assistant_reply
from picontext.compaction.prompts import TURN_PREFIX_PROMPT
from picontext.compaction.records import FAILURE_TYPE
from picontext.compaction.settings import CompactionSettings
from picontext.errors import NothingToCompact, SessionChanged, SummaryError, SummaryTruncated
from picontext.session.manager import SessionManager


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


SMALL = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=1500)


async def test_summary_appends_one_compaction(tmp_path: Path) -> None:
    manager = tool_session(tmp_path)
    model = ScriptedCompletion(default="## Goal\nRead all files.")
    outcome = await compact_session(manager, strategy="summary", completion=model, settings=SMALL)
    assert len(outcome.appended) == 1 and outcome.tokens_after < outcome.tokens_before
    reopened = SessionManager.open(manager.get_session_file())
    entry = reopened.get_entry(outcome.appended[0])
    assert entry["type"] == "compaction" and entry["summary"].startswith("## Goal\nRead all files.")
    assert entry["details"]["readFiles"] and "verifiedFacts" in entry["details"]
    assert entry["tokensBefore"] >= outcome.tokens_before  # Pi's measure: the usage anchor when fresh
    assert reopened.build_session_projection().messages[0]["role"] == "compactionSummary"
    with pytest.raises(NothingToCompact, match="Already compacted"):
        await compact_session(reopened, completion=ScriptedCompletion([]), settings=SMALL)


@pytest.mark.parametrize("reply", [assistant_reply("", stop_reason="error", error="overloaded_error: boom"),
                                   assistant_reply("half a summ", stop_reason="length")])
async def test_a_failing_summarizer_without_fallback_appends_only_its_failure_records(tmp_path: Path,
                                                                                     reply: dict) -> None:
    manager = tool_session(tmp_path)
    file = manager.get_session_file()
    before = _read(file)
    with pytest.raises((SummaryError, SummaryTruncated)):
        await compact_session(manager, completion=ScriptedCompletion(default=reply), settings=SMALL, fallback=False)
    after = _read(file)
    assert after.startswith(before)
    added = [json.loads(line) for line in after[len(before):].splitlines()]
    assert [(e["type"], e["customType"], e["data"]["next"]) for e in added] == [
        ("custom", FAILURE_TYPE, "retry"), ("custom", FAILURE_TYPE, "none")]
    projection = SessionManager.open(file).build_session_projection()
    assert "compactionSummary" not in [m["role"] for m in projection.messages]


async def test_refused_when_the_file_changed_meanwhile(tmp_path: Path) -> None:
    manager = tool_session(tmp_path)
    file = manager.get_session_file()

    def meanwhile(req):  # another process appends while the summary is being written
        if not req.messages[0]["content"][0]["text"].startswith("<conversation>\n[User]: please read file 0"):
            return "prefix"
        other = SessionManager.open(file)
        other.append_message(user("sneaky"))
        return "## Goal\nx"

    before_entries = len(SessionManager.open(file).get_entries())
    with pytest.raises(SessionChanged, match="changed while the summary was being written"):
        await compact_session(manager, completion=ScriptedCompletion(default=meanwhile), settings=SMALL)
    after = SessionManager.open(file).get_entries()
    assert len(after) == before_entries + 1 and all(e["type"] != "compaction" for e in after)


async def test_nothing_to_compact_when_everything_fits(tmp_path: Path) -> None:
    manager = tool_session(tmp_path, turns=1)
    with pytest.raises(NothingToCompact, match="Nothing to compact"):
        await compact_session(manager, completion=ScriptedCompletion([]), settings=CompactionSettings())


async def test_mask_then_summary(tmp_path: Path) -> None:
    manager = tool_session(tmp_path, turns=8)
    # masking brings the context far below a 100k window: no summary request
    outcome = await compact_session(manager, strategy="mask-then-summary", completion=ScriptedCompletion([]),
                                    settings=SMALL, context_window=100_000)
    assert outcome.masked > 0 and outcome.summary is None
    # a tiny window is still exceeded after masking: the summary follows
    manager = tool_session(tmp_path / "b", turns=8)
    model = ScriptedCompletion(default="## Goal\nsmall", context_window=3000)
    outcome = await compact_session(manager, strategy="mask-then-summary", completion=model, settings=SMALL)
    assert outcome.masked > 0 and outcome.summary is not None and len(outcome.appended) == outcome.masked + 1
    assert estimated_tokens(manager) == outcome.tokens_after


async def test_end_to_end_over_http(tmp_path: Path) -> None:
    from picontext.testing import ScriptedModelServer, text

    manager = tool_session(tmp_path)
    with ScriptedModelServer() as server:
        # the cut splits turn 6: a history and a turn-prefix request
        # The two requests are concurrent: route each reply by what its request is about.
        prefix = text("## Original Request\nf6").when_body_contains(TURN_PREFIX_PROMPT.split(".")[0])
        server.expect(prefix, text("## Goal\nRead the files.\n\n## Next Steps\n1. Done."))
        completion = StreamCompletion(server.model("anthropic-messages", max_tokens=1000), api_key="test",
                                      retry=RetryPolicy(enabled=False))
        outcome = await compact_session(manager, completion=completion, settings=SMALL)
        server.assert_complete()
        bodies = sorted((r.body for r in server.requests), key=lambda b: b["max_tokens"])
    assert [b["max_tokens"] for b in bodies] == [1000, 1000]  # 0.8 x / 0.5 x 2000, capped by the model's 1000
    assert all("<conversation>" in str(b["messages"]) for b in bodies) and outcome.summary is not None
    summary = manager.get_entry(outcome.appended[0])["summary"]
    assert "Read the files." in summary and "**Turn Context (split turn):**\n\n## Original Request\nf6" in summary
