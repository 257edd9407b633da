"""Sessions far over the window: one compaction brings them under the threshold. How long does it
take per 1M tokens, how much memory does it use against the file's size, and does any summary
request exceed the summarizer's window?

The shape of Pi #8196 (a 25.9 MB session stuck for good): one huge tool output, the newest
message, holding `--huge-share` of the tokens (default 90 %), after a long session of ordinary
turns (a request, a tool call, ~1,500 characters of tool output, an answer) holding the rest. `picontext` continues it
(`AgentSession.prompt`): the compaction before the prompt summarizes the turns hierarchically
(chunks that fit the summarizer's window, several at once, then merges) and shortens the huge
kept output; then the conversation's request is answered.

The conversation model is scripted (ScriptedModelServer, real HTTP, in this process). The
summarizer is either the same scripted server (`--summarizer scripted`: a 16k window, ~0.5 s per
request) or the real llama.cpp server (`--summarizer llama`: llama-cpp-python with SmolLM2-135M,
`--llama-ctx` window, `compat.serialRequests`). The compaction runs in a child process that
opens the file, so its memory is measured alone (VmRSS, VmHWM); the server and its recorded
requests stay here. Reported per size: tokens before and after, threshold, compactions, summary
requests, wall time of the prompt (the compaction and one short reply) and per 1M tokens; the
child's RSS after imports (base), with the session opened and parsed (loaded), its peak while
opening and parsing, and its peak during the compaction alone (VmHWM reset through
/proc/self/clear_refs once the session is loaded; with `--phases`, reset again at every compaction
event, so that each event reports the peak of the step before it); (the higher peak - base) / file size; what
the compaction adds to the loaded session (its peak - loaded); and the largest summary request
(chars/4 of its messages + its output budget) over the summarizer's window.

    .venv/bin/python bench/bench_over_window_compaction.py [--sizes 300000,1000000,3000000]
                                                           [--summarizer scripted|llama]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from picontext.scripted import ScriptedModelServer, text
from picontext.session.manager import SessionManager

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support: test doubles
from scripted_summaries import is_summary, paced

WINDOW = 16_000
SETTINGS = {"reserveTokens": 4000, "keepRecentTokens": 2000}  # threshold 12000
NOTE = ("## Goal\nFinish the refactoring of the build.\n## Progress\n### Done\n- [x] modules reviewed in order\n"
        "## Next Steps\n1. read the build log")


def _usage() -> dict[str, Any]:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def _assistant(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "api": "openai-completions", "provider": "openai-compatible",
            "model": "scripted-model", "usage": _usage(), "stopReason": stop, "timestamp": 1}


def write_session(directory: Path, tokens: int, huge_share: float) -> Path:
    """`tokens` (chars/4): `huge_share` of them in one huge newest tool output, the rest in
    ordinary turns (reading 300 files again and again)."""
    manager = SessionManager.create(str(directory), str(directory / "sessions"))
    turn_chars = 0
    i = 0
    while turn_chars < tokens * 4 * (1 - huge_share):
        request = f"step {i}: please look at module {i} and tell me what its build step does " * 4
        output = "".join(f"{i:06d}.{j:03d} def build_step_{j}(): return compile('module_{i}') \n" for j in range(24))
        answer = f"Module {i} compiles its sources and links them; step {i} is fine. " * 3
        manager.append_message({"role": "user", "content": request, "timestamp": 1})
        manager.append_message(_assistant([{"type": "toolCall", "id": f"c{i}", "name": "read",
                                            "arguments": {"path": f"src/module_{i % 300}.py"}}], "toolUse"))
        manager.append_message({"role": "toolResult", "toolCallId": f"c{i}", "toolName": "read",
                                "content": [{"type": "text", "text": output}], "isError": False, "timestamp": 1})
        manager.append_message(_assistant([{"type": "text", "text": answer}], "stop"))
        turn_chars += len(request) + len(output) + len(answer) + 40
        i += 1
    manager.append_message({"role": "user", "content": "read the whole build log", "timestamp": 1})
    manager.append_message(_assistant([{"type": "toolCall", "id": "log", "name": "read",
                                        "arguments": {"path": "build.log"}}], "toolUse"))
    line = "2025-06-01T12:00:00Z [build] compiling module and linking its objects ... ok\n"
    log = line * (int(tokens * 4 * huge_share) // len(line) + 1)
    manager.append_message({"role": "toolResult", "toolCallId": "log", "toolName": "read",
                            "content": [{"type": "text", "text": log}], "isError": False, "timestamp": 1})
    path = manager.get_session_file()
    assert path is not None
    return Path(path)


CHILD = r'''
import asyncio, json, sys, time

from picontext.agent.session import AgentSession
from picontext.ai.providers import StreamOptions
from picontext.compaction.compact import estimated_tokens
from picontext.compaction.completion import StreamCompletion
from picontext.compaction.settings import Settings
from picontext.session.manager import SessionManager

def status_mb(field):
    # VmHWM, not ru_maxrss: ru_maxrss survives exec and starts at the parent's peak
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

args = json.loads(sys.argv[1])
# The HTTP client's own modules (httpcore, h11, anyio: ~3.5 MB) are imported with the first
# client, whatever the session: part of the interpreter's base, not of what the session costs.
from picontext.ai._http import default_client
default_client()
# anyio's asyncio backend, its streams and the codecs of the replies' decoding load with the
# first request (~1.3 MB), whatever the session: imported here so that the base holds them too.
import anyio._backends._asyncio, anyio.lowlevel, anyio.streams.stapled, anyio.streams.tls, anyio.to_thread
import encodings.unicode_escape, encodings.utf_16_be
baseline = status_mb("VmRSS")

async def main():
    manager = SessionManager.open(args["path"], args["dir"])
    manager.get_branch()  # parsed, as the compaction's plan parses it
    manager.build_session_projection()
    loaded, opening_peak = status_mb("VmRSS"), status_mb("VmHWM")
    with open("/proc/self/clear_refs", "w") as f:  # from here VmHWM is the compaction's own peak
        f.write("5")
    summarizer = StreamCompletion(args["summarizer"], api_key="k") if args["summarizer"] else None
    session = AgentSession(manager, model=args["model"], system_prompt="Bench agent.",
                           stream_options=StreamOptions(api_key="k"),
                           settings=Settings({"compaction": args["settings"]}), summarizer=summarizer)
    events = []
    phases = []  # (what had just happened, RSS then, the peak since the previous mark)

    def mark(label):
        phases.append((label, status_mb("VmRSS"), status_mb("VmHWM")))
        with open("/proc/self/clear_refs", "w") as f:  # VmHWM from here: the next phase's peak
            f.write("5")

    def on_event(e):
        if not e["type"].startswith("compaction"):
            return
        events.append(e)
        if args["phases"]:
            done = e["type"] if e["type"] != "compaction_progress" else (
                f"{e.get('part')} {e.get('stage')} {e.get('done')}/{e.get('total')}")
            mark(done)

    session.subscribe(on_event)
    before = estimated_tokens(manager)
    began = time.perf_counter()
    await session.prompt("go on")
    wall = time.perf_counter() - began
    if args["phases"]:
        mark("the reply")
    times = [e for e in events if e["type"] in ("compaction_start", "compaction_end")]
    ends = [e for e in events if e["type"] == "compaction_end"]
    print(json.dumps({"before": before, "after": estimated_tokens(manager), "wall": wall,
                      "compactions": len([e for e in ends if e.get("result")]),
                      "errors": [e.get("errorMessage") for e in ends if not e.get("result")],
                      "progress": len([e for e in events if e["type"] == "compaction_progress"]),
                      "baselineMb": baseline, "loadedMb": loaded, "openingPeakMb": opening_peak,
                      "peakMb": max([status_mb("VmHWM")] + [p[2] for p in phases]),
                      "phases": [[label, rss - baseline, peak - baseline] for label, rss, peak in phases]}))

asyncio.run(main())
'''


def request_tokens(body: dict[str, Any]) -> int:
    chars = sum(len(json.dumps(m.get("content"))) for m in body.get("messages", []))
    return chars // 4 + int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)


def run_size(tokens: int, huge_share: float, summarizer: str, llama: Any, request_seconds: float,
             llama_max_tokens: int, phases: bool = False) -> dict[str, Any]:
    with ScriptedModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        path = write_session(Path(tmp), tokens, huge_share)
        size = path.stat().st_size
        model = server.model(context_window=WINDOW, max_tokens=4096)
        summary_model = None
        summary_window = WINDOW
        if summarizer == "scripted":
            server.expect(*[paced(text(NOTE), request_seconds).when(is_summary) for _ in range(tokens // 2000 + 50)])
        else:
            summary_model = dict(llama.model(max_tokens=llama_max_tokens))
            summary_window = int(summary_model["contextWindow"])
        server.expect(text("carrying on").when(lambda r: not is_summary(r)))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        args = {"path": str(path), "dir": str(path.parent), "model": model, "summarizer": summary_model,
                "settings": SETTINGS, "phases": phases}
        child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True,
                               env=env, timeout=4 * 3600)
        if child.returncode != 0:
            raise SystemExit(f"the compaction at {tokens} tokens failed:\n{child.stderr[-3000:]}")
        out = json.loads(child.stdout.strip().splitlines()[-1])
        summaries = [r.body for r in server.requests if is_summary(r)]
        largest = max((request_tokens(b) for b in summaries), default=0)
        out.update(tokens=tokens, file=size, summaries=len(summaries), largest=largest, window=summary_window,
                   conversation=sum(1 for r in server.requests if not is_summary(r)))
        if llama is not None:
            out["summaries"] = llama_requests(llama)
        return out


def llama_requests(llama: Any) -> int:
    """Summary requests the llama.cpp server logged (its log is the only record of them)."""
    return llama.log.count("POST /v1/chat/completions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300000,1000000,3000000")
    parser.add_argument("--summarizer", choices=("scripted", "llama"), default="scripted")
    parser.add_argument("--request-seconds", type=float, default=0.5)
    parser.add_argument("--llama-ctx", type=int, default=8192)
    parser.add_argument("--llama-max-tokens", type=int, default=512, help="the llama model's output cap")
    parser.add_argument("--huge-share", type=float, default=0.9,
                        help="share of the tokens in the one huge tool output (the rest: ordinary turns)")
    parser.add_argument("--phases", action="store_true",
                        help="also print, per compaction event, the child's RSS then and its peak since the "
                             "previous event (MB over the base): which step the peak belongs to")
    args = parser.parse_args()
    llama = None
    if args.summarizer == "llama":
        from support.llama_server import LlamaServer

        llama = LlamaServer(n_ctx=args.llama_ctx).start()
    try:
        rows = []
        for tokens in (int(x) for x in args.sizes.split(",")):
            row = run_size(tokens, args.huge_share, args.summarizer, llama, args.request_seconds,
                           args.llama_max_tokens, args.phases)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        if llama is not None:
            llama.stop()
    window = rows[0]["window"] if rows else WINDOW
    print(f"summarizer {args.summarizer} (window {window}"
          + (f", ~{args.request_seconds}s per request" if args.summarizer == "scripted" else ", SmolLM2-135M")
          + f"); {args.huge_share:.0%} of the tokens in one tool output; "
          f"threshold {WINDOW - SETTINGS['reserveTokens']}; load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'tokens':>9}{'file MB':>8}{'after':>7}{'comp.':>6}{'requests':>9}{'wall s':>8}{'s/1M tok':>9}"
          f"{'base MB':>8}{'loaded':>7}{'open peak':>10}{'compaction peak':>16}{'peak-base / file':>17}"
          f"{'compaction own MB':>18}{'largest req / window':>21}")
    for r in rows:
        mb = r["file"] / 2**20
        peak = max(r["openingPeakMb"], r["peakMb"])
        print(f"{r['before']:>9}{mb:>8.1f}{r['after']:>7}{r['compactions']:>6}{r['summaries']:>9}{r['wall']:>8.1f}"
              f"{r['wall'] / (r['before'] / 1e6):>9.1f}{r['baselineMb']:>8.0f}{r['loadedMb']:>7.0f}"
              f"{r['openingPeakMb']:>10.0f}{r['peakMb']:>16.0f}{(peak - r['baselineMb']) / mb:>17.2f}"
              f"{r['peakMb'] - r['loadedMb']:>18.1f}{r['largest'] / r['window']:>21.2f}")
        if r["errors"]:
            print(f"{'':>9}errors: {r['errors']}")
        for label, rss, phase_peak in r.get("phases", []):
            print(f"{'':>9}{label:<32} RSS {rss:5.2f}  peak since the previous event {phase_peak:5.2f}"
                  " MB over the base")


if __name__ == "__main__":
    main()
