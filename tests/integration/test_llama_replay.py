"""`picontext eval replay` with a real summarizer: llama-cpp-python's server and SmolLM2-135M.

One cut of a real SWE-agent trajectory, compacted by the summary strategy whose summary the real
server writes. What SmolLM2 writes is not the point (docs/compaction.md says what a 135M model can
and cannot show); the wire and the bookkeeping are: the record names the model, the summary
requests reached the server, and either the context shrank or the failed summary is one line and
the context was left as it was. In CI (CI=true) a missing server fails; elsewhere it skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_fixture import serve_llama

from picontext.testing.llama_server import LlamaServer

# The smallest real trajectory, cut early: one summary request of ~1,100 tokens (SmolLM2 evaluates
# 15-1000 tokens a second on this machine, depending on the load).
SWE = Path(__file__).resolve().parents[1] / "fixtures" / "replay" / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.traj"


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    yield from serve_llama(4096)


def test_a_real_model_summarizes_a_cut_of_a_real_trajectory(llama: LlamaServer) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "models.json").write_text(json.dumps(llama.models_json(max_tokens=384)))
    before = llama.log
    proc = subprocess.run([sys.executable, "-m", "picontext", "eval", "replay", "--json", str(SWE),
                           "--every", "1200", "--max-cuts", "1", "--keep-recent-tokens", "400",
                           "--reserve-tokens", "320", "--strategy", "none", "--strategy", "summary",
                           "--model", "llama/smollm2"], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr
    none, summary = (json.loads(line) for line in proc.stdout.splitlines())
    assert summary["summarizer"] == "llama/smollm2" and summary["tokensBefore"] == none["tokensBefore"]
    assert llama.log.count("POST /v1/chat/completions") > before.count("POST /v1/chat/completions")
    if summary["error"] is None:
        assert summary["tokensAfter"] < summary["tokensBefore"]
    else:  # the small model's reply could not be a summary: reported, nothing compacted
        assert "\n" not in summary["error"] and summary["tokensAfter"] == summary["tokensBefore"]
    assert summary["cost"] == 0 and summary["time"] > 0
