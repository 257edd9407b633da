# ruff: noqa: E501 (long literals: realistic file contents, prompts and tool output)
"""Write examples/sessions/refactor-session.jsonl: a realistic, tool-heavy Pi v3 session.

Deterministic (seeded ids, fixed clock): running it again produces the same bytes.

    python examples/make_example_session.py [OUTPUT]

The story: a user asks the agent to split the monolithic `invoicer/core.py` of a small Python
project into modules. The session has a system message (sections + tools), a model change and
thinking-level changes, read/grep/edit/write/bash tool calls with realistic results and usage
numbers that grow with the context, a failed test run, an abandoned branch (an attempt to
switch to pydantic) summarized by a branch_summary, a label, a session name, and a compaction
with a structured summary whose first kept entry lies in the middle of the session.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "sessions" / "refactor-session.jsonl"
PROVIDER, MODEL, API = "anthropic", "claude-sonnet-4-5", "anthropic-messages"

TOOLS = [
    {
        "name": "read",
        "description": "Read the contents of a file. Supports text files and images. Output is truncated to 2000 lines or 50KB.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
                "offset": {"type": "number"},
                "limit": {"type": "number"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "bash",
        "description": "Execute a bash command in the current working directory. Returns stdout and stderr.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
            "required": ["command"],
        },
    },
    {
        "name": "edit",
        "description": "Edit a file by replacing exact text. The oldText must match exactly (including whitespace).",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "oldText": {"type": "string"}, "newText": {"type": "string"}},
            "required": ["path", "oldText", "newText"],
        },
    },
    {
        "name": "write",
        "description": "Write content to a file. Creates the file if it doesn't exist, overwrites if it does.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "grep",
        "description": "Search file contents for a pattern. Returns matching lines with file paths and line numbers.",
        "parameters": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}, "glob": {"type": "string"}},
            "required": ["pattern"],
        },
    },
]
SECTIONS = {
    "intro": "You are an expert coding assistant operating inside pi, a coding agent harness. You help users by reading files, "
    "executing commands, editing code, and writing new files.",
    "guidelines": "Guidelines:\n- Use read to examine files before editing.\n- Use edit for precise changes (old text must match exactly).\n"
    "- Use write only for new files or complete rewrites.\n- Be concise in your responses.\n- Show file paths clearly when working with files.",
    "agentsMd": "# AGENTS.md\n\n- Python 3.11, run tests with `pytest -q`.\n- Keep the public API of `invoicer` stable: `from invoicer import ...` must keep working.\n"
    "- No new runtime dependencies without asking.",
    "environment": "Current date: 2026-03-02\nCurrent working directory: /home/dana/src/invoicer",
}

CORE_PY = '''"""Invoice generation: parsing, tax and rendering in one place (to be split up)."""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

TAX_RATES = {"standard": Decimal("0.20"), "reduced": Decimal("0.05"), "zero": Decimal("0")}


@dataclass
class LineItem:
    description: str
    quantity: int
    unit_price: Decimal
    tax_class: str = "standard"

    @property
    def net(self) -> Decimal:
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    number: str
    customer: str
    items: list[LineItem] = field(default_factory=list)


def parse_csv(path: Path) -> Invoice:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no rows")
    inv = Invoice(number=rows[0]["invoice"], customer=rows[0]["customer"])
    for row in rows:
        inv.items.append(LineItem(row["description"], int(row["qty"]), Decimal(row["unit_price"]), row.get("tax") or "standard"))
    return inv


def round_money(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def tax_for(item: LineItem) -> Decimal:
    try:
        rate = TAX_RATES[item.tax_class]
    except KeyError:
        raise ValueError(f"unknown tax class {item.tax_class!r}") from None
    return round_money(item.net * rate)


def totals(inv: Invoice) -> dict[str, Decimal]:
    net = sum((i.net for i in inv.items), Decimal("0"))
    tax = sum((tax_for(i) for i in inv.items), Decimal("0"))
    return {"net": round_money(net), "tax": tax, "gross": round_money(net + tax)}


def render_text(inv: Invoice) -> str:
    lines = [f"Invoice {inv.number} — {inv.customer}", ""]
    for i in inv.items:
        lines.append(f"{i.description:<30} {i.quantity:>4} x {i.unit_price:>8} = {round_money(i.net):>9}")
    t = totals(inv)
    lines += ["", f"{'Net':<30} {t['net']:>26}", f"{'Tax':<30} {t['tax']:>26}", f"{'Total':<30} {t['gross']:>26}"]
    return "\\n".join(lines)
'''

TEST_PY = """from decimal import Decimal
from pathlib import Path

import pytest

from invoicer import Invoice, LineItem, parse_csv, render_text, totals

DATA = Path(__file__).parent / "data"


def test_parse_csv_reads_items():
    inv = parse_csv(DATA / "acme.csv")
    assert inv.number == "2026-0042"
    assert [i.description for i in inv.items] == ["Consulting", "Travel", "Books"]


def test_totals_round_half_up():
    inv = Invoice("1", "x", [LineItem("a", 3, Decimal("0.125"))])
    assert totals(inv) == {"net": Decimal("0.38"), "tax": Decimal("0.08"), "gross": Decimal("0.46")}


def test_unknown_tax_class():
    inv = Invoice("1", "x", [LineItem("a", 1, Decimal("1"), "luxury")])
    with pytest.raises(ValueError, match="unknown tax class"):
        totals(inv)


def test_render_text_snapshot(snapshot):
    assert render_text(parse_csv(DATA / "acme.csv")) == snapshot
"""

INIT_PY = """from invoicer.core import Invoice, LineItem, parse_csv, render_text, totals

__all__ = ["Invoice", "LineItem", "parse_csv", "render_text", "totals"]
"""

MODELS_PY = '''"""Invoice data model."""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal


@dataclass
class LineItem:
    description: str
    quantity: int
    unit_price: Decimal
    tax_class: str = "standard"

    @property
    def net(self) -> Decimal:
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    number: str
    customer: str
    items: list[LineItem] = field(default_factory=list)
'''

PARSING_PY = '''"""Reading invoices from CSV exports."""
from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

from invoicer.models import Invoice, LineItem


def parse_csv(path: Path) -> Invoice:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no rows")
    inv = Invoice(number=rows[0]["invoice"], customer=rows[0]["customer"])
    for row in rows:
        inv.items.append(LineItem(row["description"], int(row["qty"]), Decimal(row["unit_price"]), row.get("tax") or "standard"))
    return inv
'''

TAX_PY = '''"""Tax rates, rounding and invoice totals."""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from invoicer.models import Invoice, LineItem

TAX_RATES = {"standard": Decimal("0.20"), "reduced": Decimal("0.05"), "zero": Decimal("0")}
CENT = Decimal("0.01")


def round_money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def tax_for(item: LineItem) -> Decimal:
    try:
        rate = TAX_RATES[item.tax_class]
    except KeyError:
        raise ValueError(f"unknown tax class {item.tax_class!r}") from None
    return round_money(item.net * rate)


def totals(inv: Invoice) -> dict[str, Decimal]:
    net = sum((i.net for i in inv.items), Decimal("0"))
    tax = sum((tax_for(i) for i in inv.items), Decimal("0"))
    return {"net": round_money(net), "tax": tax, "gross": round_money(net + tax)}
'''

RENDER_PY = '''"""Plain-text rendering of invoices."""
from __future__ import annotations

from invoicer.models import Invoice
from invoicer.tax import round_money, totals


def render_text(inv: Invoice) -> str:
    lines = [f"Invoice {inv.number} — {inv.customer}", ""]
    for i in inv.items:
        lines.append(f"{i.description:<30} {i.quantity:>4} x {i.unit_price:>8} = {round_money(i.net):>9}")
    t = totals(inv)
    lines += ["", f"{'Net':<30} {t['net']:>26}", f"{'Tax':<30} {t['tax']:>26}", f"{'Total':<30} {t['gross']:>26}"]
    return "\\n".join(lines)
'''


def pytest_ok(n: int, t: float) -> str:
    return f"{'.' * n}{' ' * (72 - n)}[100%]\n{n} passed in {t:.2f}s\n"


class Session:
    def __init__(self) -> None:
        self.rng = random.Random(20260302)
        self.ms = int(datetime(2026, 3, 2, 9, 14, 5, tzinfo=UTC).timestamp() * 1000)
        self.lines: list[dict[str, Any]] = []
        self.leaf: str | None = None
        self.context_tokens = 4_300  # system prompt and tool declarations
        self.tokens_by_id: dict[str, int] = {}
        self.ids: set[str] = set()

    def iso(self) -> str:
        return datetime.fromtimestamp(self.ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.ms % 1000:03d}Z"

    def tick(self, lo: int, hi: int) -> None:
        self.ms += self.rng.randrange(lo, hi)

    def new_id(self) -> str:
        while True:
            i = f"{self.rng.getrandbits(32):08x}"
            if i not in self.ids:
                self.ids.add(i)
                return i

    def append(self, etype: str, **fields: Any) -> str:
        eid = self.new_id()
        self.lines.append({"type": etype, "id": eid, "parentId": self.leaf, "timestamp": self.iso(), **fields})
        self.leaf = eid
        return eid

    def message(self, msg: dict[str, Any]) -> str:
        tokens = len(json.dumps(msg, ensure_ascii=False)) // 4
        self.context_tokens += tokens
        eid = self.append("message", message=msg)
        self.tokens_by_id[eid] = tokens
        return eid

    def tokens_since(self, first_id: str) -> int:
        ids = list(self.tokens_by_id)
        return sum(self.tokens_by_id[i] for i in ids[ids.index(first_id) :])

    def usage(self, output: int) -> dict[str, Any]:
        cache_read = int(self.context_tokens * 0.9)
        fresh = self.context_tokens - cache_read + self.rng.randrange(40, 400)
        cache_write = self.rng.randrange(200, 1500)
        cost = {
            "input": round(fresh * 3e-6, 6),
            "output": round(output * 1.5e-5, 6),
            "cacheRead": round(cache_read * 3e-7, 6),
            "cacheWrite": round(cache_write * 3.75e-6, 6),
        }
        cost["total"] = round(sum(cost.values()), 6)
        return {
            "input": fresh,
            "output": output,
            "cacheRead": cache_read,
            "cacheWrite": cache_write,
            "totalTokens": fresh + output + cache_read + cache_write,
            "cost": cost,
        }

    # -- conversation helpers -----------------------------------------------------------------
    def user(self, text: str) -> str:
        self.tick(8_000, 90_000)
        return self.message({"role": "user", "content": text, "timestamp": self.ms})

    def assistant(
        self,
        *,
        thinking: str | None = None,
        text: str | None = None,
        calls: list[tuple[str, dict[str, Any]]] = (),
        stop: str | None = None,
    ) -> list[str]:
        self.tick(2_000, 14_000)
        content: list[dict[str, Any]] = []
        if thinking:
            content.append(
                {
                    "type": "thinking",
                    "thinking": thinking,
                    "thinkingSignature": "Eq"
                    + "".join(
                        self.rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                        for _ in range(86)
                    ),
                }
            )
        if text:
            content.append({"type": "text", "text": text})
        call_ids = []
        for name, args in calls:
            cid = "toolu_01" + "".join(
                self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789") for _ in range(22)
            )
            content.append({"type": "toolCall", "id": cid, "name": name, "arguments": args})
            call_ids.append(cid)
        out_tokens = max(12, len(json.dumps(content)) // 4)
        msg = {
            "role": "assistant",
            "content": content,
            "api": API,
            "provider": PROVIDER,
            "model": MODEL,
            "usage": self.usage(out_tokens),
            "stopReason": stop or ("toolUse" if calls else "stop"),
            "timestamp": self.ms,
            "responseId": "msg_01" + "".join(self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ123456789") for _ in range(20)),
        }
        self.message(msg)
        return call_ids

    def result(self, call_id: str, name: str, text: str, *, error: bool = False, details: Any = None) -> str:
        self.tick(30, 2_500)
        msg: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": text}],
            "isError": error,
            "timestamp": self.ms,
        }
        if details is not None:
            msg["details"] = details
        return self.message(msg)

    def tool(
        self,
        name: str,
        args: dict[str, Any],
        result: str,
        *,
        thinking: str | None = None,
        text: str | None = None,
        error: bool = False,
        details: Any = None,
    ) -> str:
        (cid,) = self.assistant(thinking=thinking, text=text, calls=[(name, args)])
        return self.result(cid, name, result, error=error, details=details)

    def parallel(self, calls: list[tuple[str, dict[str, Any], str]], *, thinking: str | None = None) -> None:
        ids = self.assistant(thinking=thinking, calls=[(name, args) for name, args, _ in calls])
        for cid, (name, _, out) in zip(ids, calls, strict=True):
            self.result(cid, name, out)

    def read(self, path: str, content: str, **kw: Any) -> str:
        return self.tool("read", {"path": path}, content, **kw)

    def bash(self, command: str, output: str, **kw: Any) -> str:
        return self.tool("bash", {"command": command}, output, **kw)

    def edit(self, path: str, old: str, new: str, **kw: Any) -> str:
        diff = (
            "\n".join(f"-{line}" for line in old.splitlines())
            + "\n"
            + "\n".join(f"+{line}" for line in new.splitlines())
        )
        return self.tool(
            "edit",
            {"path": path, "oldText": old, "newText": new},
            f"Successfully replaced text in {path}.",
            details={"diff": diff, "firstChangedLine": self.rng.randrange(1, 40)},
            **kw,
        )

    def write(self, path: str, content: str, **kw: Any) -> str:
        return self.tool(
            "write",
            {"path": path, "content": content},
            f"Successfully wrote {len(content.encode())} bytes to {path}",
            **kw,
        )

    def grep(self, pattern: str, output: str, **kw: Any) -> str:
        return self.tool("grep", {"pattern": pattern, "path": "."}, output, **kw)


def build() -> list[dict[str, Any]]:
    s = Session()
    s.append("model_change", provider=PROVIDER, modelId=MODEL)
    s.append("thinking_level_change", thinkingLevel="medium")
    system_ms = s.ms
    s.message({"role": "system", "content": "", "sections": SECTIONS, "toolsAdded": TOOLS, "timestamp": s.ms})

    # -- exploration ---------------------------------------------------------------------------
    s.user(
        "invoicer/core.py has grown into a grab bag. Please split it into modules (models, parsing, tax, rendering) "
        "without changing behaviour. `from invoicer import ...` must keep working and the tests must stay green."
    )
    s.append("session_info", name="Split invoicer/core.py into modules")
    s.bash(
        "git status --short && ls -R invoicer tests",
        "invoicer:\n__init__.py\ncore.py\ncli.py\n\ntests:\ndata\ntest_core.py\ntest_cli.py\n__snapshots__\n\ntests/data:\nacme.csv\nempty.csv\n",
        thinking="Start by getting an overview of the repository layout and whether the tree is clean.",
        text="Let me look at the project first.",
    )
    s.read("invoicer/core.py", CORE_PY, thinking="core.py is the file to split. Read it whole.")
    s.read("invoicer/__init__.py", INIT_PY)
    s.read(
        "pyproject.toml",
        '[project]\nname = "invoicer"\nversion = "0.3.1"\nrequires-python = ">=3.11"\ndependencies = []\n\n'
        '[project.optional-dependencies]\ntest = ["pytest>=8", "syrupy>=4", "mypy>=1.10", "ruff>=0.6"]\n\n[project.scripts]\ninvoicer = "invoicer.cli:main"\n',
    )
    s.parallel(
        [
            (
                "read",
                {"path": "tests/data/acme.csv"},
                "invoice,customer,description,qty,unit_price,tax\n2026-0042,ACME Ltd,Consulting,10,120.00,standard\n"
                "2026-0042,ACME Ltd,Travel,1,310.40,standard\n2026-0042,ACME Ltd,Books,3,19.99,reduced\n",
            ),
            (
                "read",
                {"path": "tests/test_cli.py"},
                "from invoicer.cli import main\n\n\ndef test_cli_prints_invoice(capsys, tmp_path):\n"
                '    assert main(["tests/data/acme.csv"]) == 0\n    assert "Total" in capsys.readouterr().out\n',
            ),
        ],
        thinking="Look at the test data and the CLI test together.",
    )
    s.read("tests/test_core.py", TEST_PY)
    s.grep(
        "from invoicer",
        "invoicer/__init__.py:1:from invoicer.core import Invoice, LineItem, parse_csv, render_text, totals\n"
        "invoicer/cli.py:4:from invoicer.core import parse_csv, render_text\ntests/test_core.py:6:from invoicer import Invoice, LineItem, parse_csv, render_text, totals\n"
        "tests/test_cli.py:3:from invoicer.cli import main\n",
        thinking="Who imports from core directly? cli.py does; tests go through the package.",
    )
    s.bash("python -m pytest -q", pytest_ok(9, 0.41), text="Baseline test run before touching anything:")
    s.assistant(
        thinking="Dependencies inside core.py: models <- parsing, models <- tax <- render. No cycles if render imports tax. "
        "Keep core.py as a thin re-export module so `invoicer.core` imports keep working for one release.",
        text="The module splits cleanly along four seams:\n\n1. `invoicer/models.py`: `LineItem`, `Invoice`\n"
        "2. `invoicer/parsing.py`: `parse_csv`\n3. `invoicer/tax.py`: `TAX_RATES`, `round_money`, `tax_for`, `totals`\n"
        "4. `invoicer/render.py`: `render_text`\n\n`core.py` would become a re-export shim so `from invoicer.core import ...` "
        "(used by `cli.py`) keeps working. Baseline: 9 tests pass. Shall I go ahead?",
    )

    # -- models and parsing --------------------------------------------------------------------
    s.user("Sounds good. Go ahead, one module at a time, and run the tests after each step.")
    s.write(
        "invoicer/models.py",
        MODELS_PY,
        thinking="Models first: they have no dependencies.",
        text="Starting with the data model.",
    )
    old_models = CORE_PY[CORE_PY.index("@dataclass\nclass LineItem") : CORE_PY.index("def parse_csv")]
    s.edit("invoicer/core.py", old_models, "")
    s.edit(
        "invoicer/core.py",
        "from pathlib import Path\n",
        "from pathlib import Path\n\nfrom invoicer.models import Invoice, LineItem\n",
    )
    s.bash("python -m pytest -q", pytest_ok(9, 0.39))
    s.write("invoicer/parsing.py", PARSING_PY, text="Models are out. Now the CSV parsing.")
    s.edit("invoicer/core.py", PARSING_PY[PARSING_PY.index("def parse_csv") :], "")
    s.bash(
        "python -m pytest -q",
        "F........                                                                [100%]\n=================================== FAILURES ===================================\n"
        "_________________________ test_parse_csv_reads_items __________________________\n\n    from invoicer import Invoice, LineItem, parse_csv, render_text, totals\n"
        "E   ImportError: cannot import name 'parse_csv' from 'invoicer.core' (/home/dana/src/invoicer/invoicer/core.py)\n"
        "=========================== short test summary info ============================\nFAILED tests/test_core.py::test_parse_csv_reads_items - ImportError\n"
        "1 failed, 8 passed in 0.44s\n",
        error=True,
    )
    s.edit(
        "invoicer/core.py",
        "from invoicer.models import Invoice, LineItem\n",
        "from invoicer.models import Invoice, LineItem\nfrom invoicer.parsing import parse_csv\n",
        thinking="core.py no longer defines parse_csv but __init__ imports it from core. Re-export it from core for now.",
        text="`__init__` still imports `parse_csv` from `core`; re-exporting it there.",
    )
    s.bash("python -m pytest -q", pytest_ok(9, 0.40))
    s.bash(
        "python -m ruff check invoicer",
        "invoicer/core.py:4:1: F401 [*] `csv` imported but unused\nFound 1 error.\n[*] 1 fixable with the `--fix` option.\n",
        error=True,
    )
    s.edit("invoicer/core.py", "import csv\n", "")
    s.bash("python -m ruff check invoicer && python -m pytest -q", "All checks passed!\n" + pytest_ok(9, 0.38))
    models_done = s.assistant(
        text="Step 1 and 2 done: `models.py` and `parsing.py` exist, `core.py` re-exports them, ruff is clean and 9/9 tests pass."
    )
    del models_done
    checkpoint_user = s.user("Nice. Continue with tax.")
    s.append("label", targetId=checkpoint_user, label="models+parsing done")

    # -- tax: first kept entry of the later compaction lies in here -----------------------------
    s.append("thinking_level_change", thinkingLevel="high")
    tax_user = s.user(
        "Before you move the tax code: is the rounding right? I think we round per line but the accountant wants per invoice."
    )
    s.read(
        "invoicer/core.py",
        CORE_PY[CORE_PY.index("def round_money") :],
        thinking="Look at round_money/tax_for/totals as they are now.",
    )
    s.grep(
        "round_money|tax_for",
        "invoicer/core.py:12:def round_money(value: Decimal) -> Decimal:\ninvoicer/core.py:16:def tax_for(item: LineItem) -> Decimal:\n"
        'invoicer/core.py:21:    return round_money(item.net * rate)\ninvoicer/core.py:25:    tax = sum((tax_for(i) for i in inv.items), Decimal("0"))\n'
        'invoicer/core.py:26:    return {"net": round_money(net), "tax": tax, "gross": round_money(net + tax)}\n',
    )
    s.bash(
        "python - <<'EOF'\nfrom decimal import Decimal\nfrom invoicer import Invoice, LineItem, totals\n"
        "inv = Invoice('1', 'x', [LineItem('a', 1, Decimal('0.125')), LineItem('b', 1, Decimal('0.125'))])\nprint(totals(inv))\nEOF",
        "{'net': Decimal('0.25'), 'tax': Decimal('0.06'), 'gross': Decimal('0.31')}\n",
        thinking="Per-line rounding: 0.025 -> 0.03 twice = 0.06. Per-invoice: 0.05. Show the difference concretely.",
    )
    s.assistant(
        thinking="This is a behaviour change, not part of a pure refactor. Recommend doing it as a separate commit after the split.",
        text="You're right: tax is rounded **per line** (`tax_for` quantizes each item) and then summed. For two items of 0.125 at 20% "
        "that gives 0.06, per-invoice rounding would give 0.05.\n\nSince this changes results, I suggest finishing the pure refactor first "
        "and then changing the rounding in a separate commit with its own test. OK?",
    )
    s.user("Agreed, finish the split first.")
    s.write("invoicer/tax.py", TAX_PY, text="Moving the tax code unchanged.")
    tax_start = CORE_PY.index("def round_money")
    tax_end = CORE_PY.index("def render_text")
    s.edit("invoicer/core.py", CORE_PY[tax_start:tax_end], "")
    s.edit(
        "invoicer/core.py",
        "from invoicer.parsing import parse_csv\n",
        "from invoicer.parsing import parse_csv\nfrom invoicer.tax import TAX_RATES, round_money, tax_for, totals\n",
    )
    s.bash("python -m pytest -q", pytest_ok(9, 0.42))
    for i in range(3):
        s.bash(
            f"python -m pytest -q -p no:cacheprovider tests/test_core.py -k {['totals', 'tax', 'render'][i]}",
            f"{'.' * (i + 1)}\n{i + 1} passed, {8 - i} deselected in 0.2{i}s\n",
            thinking="Run the tax-related tests individually to be sure the move did not shadow anything."
            if i == 0
            else None,
        )
    s.assistant(text="`tax.py` is in place and all tests pass. Next: rendering.")

    # -- render ---------------------------------------------------------------------------------
    s.user("Go on.")
    s.write("invoicer/render.py", RENDER_PY)
    s.edit("invoicer/core.py", CORE_PY[CORE_PY.index("def render_text") :], "")
    s.edit(
        "invoicer/core.py",
        "from invoicer.tax import TAX_RATES, round_money, tax_for, totals\n",
        "from invoicer.render import render_text\nfrom invoicer.tax import TAX_RATES, round_money, tax_for, totals\n",
    )
    s.read(
        "invoicer/core.py",
        '"""Compatibility shim: the implementation moved to submodules."""\nfrom __future__ import annotations\n\nfrom decimal import ROUND_HALF_UP, Decimal\n'
        "from pathlib import Path\n\nfrom invoicer.models import Invoice, LineItem\nfrom invoicer.parsing import parse_csv\nfrom invoicer.render import render_text\n"
        "from invoicer.tax import TAX_RATES, round_money, tax_for, totals\n",
        thinking="Check what is left in core.py.",
    )
    s.write(
        "invoicer/core.py",
        '"""Compatibility shim: the implementation moved to submodules. Import from `invoicer` instead."""\n\n'
        "from invoicer.models import Invoice, LineItem\nfrom invoicer.parsing import parse_csv\nfrom invoicer.render import render_text\n"
        'from invoicer.tax import TAX_RATES, round_money, tax_for, totals\n\n__all__ = ["TAX_RATES", "Invoice", "LineItem", "parse_csv", '
        '"render_text", "round_money", "tax_for", "totals"]\n',
        text="Only imports are left; turning core.py into an explicit shim.",
    )
    s.write(
        "invoicer/__init__.py",
        "from invoicer.models import Invoice, LineItem\nfrom invoicer.parsing import parse_csv\nfrom invoicer.render import render_text\n"
        'from invoicer.tax import totals\n\n__all__ = ["Invoice", "LineItem", "parse_csv", "render_text", "totals"]\n',
    )
    s.edit(
        "invoicer/cli.py",
        "from invoicer.core import parse_csv, render_text\n",
        "from invoicer import parse_csv, render_text\n",
    )
    s.bash("python -m pytest -q && python -m ruff check .", pytest_ok(9, 0.40) + "All checks passed!\n")
    s.bash(
        "python -m invoicer.cli tests/data/acme.csv",
        "Invoice 2026-0042 — ACME Ltd\n\nConsulting                        10 x   120.00 =   1200.00\n"
        "Travel                             1 x   310.40 =    310.40\nBooks                              3 x    19.99 =     59.97\n\n"
        "Net                                                 1570.37\nTax                                                  304.08\nTotal                                               1874.45\n",
    )
    s.bash(
        "git diff --stat",
        " invoicer/__init__.py |  7 +++--\n invoicer/cli.py      |  2 +-\n invoicer/core.py     | 71 ++--------------------------\n"
        " invoicer/models.py   | 24 ++++++++++\n invoicer/parsing.py  | 19 ++++++++\n invoicer/render.py   | 15 +++++++\n invoicer/tax.py      | 28 ++++++++++++\n"
        " 7 files changed, 95 insertions(+), 72 deletions(-)\n",
    )
    s.assistant(
        text="The split is complete:\n\n| module | contents |\n|---|---|\n| `models.py` | `LineItem`, `Invoice` |\n| `parsing.py` | `parse_csv` |\n"
        "| `tax.py` | `TAX_RATES`, `round_money`, `tax_for`, `totals` |\n| `render.py` | `render_text` |\n\n`core.py` is a re-export shim, "
        "`cli.py` imports from the package, 9/9 tests pass, ruff is clean and the CLI output is unchanged."
    )

    # -- more reading to grow the context before the compaction ---------------------------------
    s.user("Great. Now add type-checking: run mypy in strict mode over the package and fix what it finds.")
    mypy_out = (
        'invoicer/parsing.py:17: error: Argument 4 to "LineItem" has incompatible type "str | None"; expected "str"  [arg-type]\n'
        "invoicer/cli.py:9: error: Function is missing a return type annotation  [no-untyped-def]\n"
        'invoicer/cli.py:14: error: Call to untyped function "main" in typed context  [no-untyped-call]\n'
        "Found 3 errors in 2 files (checked 7 source files)\n"
    )
    s.bash("python -m mypy --strict invoicer", mypy_out, error=True, thinking="See what strict mypy reports first.")
    s.read(
        "invoicer/cli.py",
        "import argparse\nimport sys\n\nfrom invoicer import parse_csv, render_text\n\n\ndef main(argv=None):\n"
        '    p = argparse.ArgumentParser(prog="invoicer")\n    p.add_argument("csv")\n    args = p.parse_args(argv)\n    print(render_text(parse_csv(args.csv)))\n'
        '    return 0\n\n\nif __name__ == "__main__":\n    sys.exit(main())\n',
    )
    s.edit("invoicer/cli.py", "def main(argv=None):\n", "def main(argv: list[str] | None = None) -> int:\n")
    s.edit(
        "invoicer/parsing.py",
        'row.get("tax") or "standard"',
        'row.get("tax") or "standard"  # DictReader gives str | None',
        thinking="`row.get('tax') or 'standard'` is already str; mypy infers str | None because of DictReader's typing. Check again.",
    )
    s.bash(
        "python -m mypy --strict invoicer",
        'invoicer/parsing.py:17: error: Argument 4 to "LineItem" has incompatible type "str | None"; expected "str"  [arg-type]\n'
        "Found 1 error in 1 file (checked 7 source files)\n",
        error=True,
    )
    s.edit(
        "invoicer/parsing.py",
        'row.get("tax") or "standard"  # DictReader gives str | None',
        'str(row.get("tax") or "standard")',
        thinking="The comment did nothing of course; typeshed declares DictReader rows as dict[str | Any, str | Any]. An explicit str() is the least noisy fix.",
    )
    s.bash(
        "python -m mypy --strict invoicer && python -m pytest -q",
        "Success: no issues found in 7 source files\n" + pytest_ok(9, 0.43),
    )
    s.parallel(
        [
            ("read", {"path": "invoicer/models.py"}, MODELS_PY),
            ("read", {"path": "invoicer/tax.py"}, TAX_PY),
            ("read", {"path": "invoicer/render.py"}, RENDER_PY),
        ],
        thinking="Re-read the new modules once more for leftover imports.",
    )
    s.grep(
        "^import |^from ",
        "invoicer/models.py:2:from __future__ import annotations\ninvoicer/models.py:4:from dataclasses import dataclass, field\n"
        "invoicer/models.py:5:from decimal import Decimal\ninvoicer/parsing.py:2:from __future__ import annotations\ninvoicer/parsing.py:4:import csv\n"
        "invoicer/parsing.py:5:from decimal import Decimal\ninvoicer/parsing.py:6:from pathlib import Path\ninvoicer/parsing.py:8:from invoicer.models import Invoice, LineItem\n"
        "invoicer/tax.py:4:from decimal import ROUND_HALF_UP, Decimal\ninvoicer/tax.py:6:from invoicer.models import Invoice, LineItem\n"
        "invoicer/render.py:4:from invoicer.models import Invoice\ninvoicer/render.py:5:from invoicer.tax import round_money, totals\n",
    )
    s.bash(
        "python -X importtime -c 'import invoicer' 2>&1 | tail -6",
        "import time:       412 |        412 |     invoicer.models\nimport time:       655 |       1803 |     invoicer.parsing\n"
        "import time:       301 |        301 |     invoicer.tax\nimport time:       188 |        489 |     invoicer.render\nimport time:        97 |         97 |     invoicer.core\n"
        "import time:       240 |       3021 |   invoicer\n",
        text="Import graph looks acyclic; quick import-time sanity check:",
    )
    s.assistant(
        text="mypy --strict is clean now (3 fixes: return/param annotations in `cli.py`, an explicit `str()` in `parsing.py`). Tests still pass."
    )

    # -- compaction ------------------------------------------------------------------------------
    s.tick(5_000, 9_000)
    summary = (
        "## Goal\nSplit the monolithic `invoicer/core.py` into `models`, `parsing`, `tax` and `render` modules without behaviour changes; "
        "keep `from invoicer import ...` working; then make the package pass `mypy --strict`.\n\n"
        "## Constraints & Preferences\n- Python 3.11, tests via `pytest -q`, lint via `ruff check`\n- No new runtime dependencies without asking (AGENTS.md)\n"
        "- One module at a time, tests after every step\n- Rounding change (per-invoice instead of per-line tax) comes later, as a separate commit\n\n"
        "## Progress\n### Done\n- [x] `invoicer/models.py` (`LineItem`, `Invoice`)\n- [x] `invoicer/parsing.py` (`parse_csv`)\n"
        "- [x] `invoicer/tax.py` (`TAX_RATES`, `round_money`, `tax_for`, `totals`)\n- [x] `invoicer/render.py` (`render_text`)\n"
        "- [x] `core.py` reduced to a re-export shim with `__all__`; `cli.py` imports from the package\n- [x] mypy --strict clean (annotations in cli.py, `str()` in parsing.py)\n\n"
        "### In Progress\n- [ ] Per-invoice tax rounding\n\n### Blocked\n- (none)\n\n"
        "## Key Decisions\n- **Keep `core.py` as a shim**: external code may import `invoicer.core`; remove in a later release\n"
        "- **Rounding change deferred**: it changes results, so it gets its own commit and test\n\n"
        "## Next Steps\n1. Change `totals` to round tax once per invoice\n2. Add a regression test with two 0.125 items (expected tax 0.05)\n3. Update the render snapshot if totals change\n\n"
        "## Critical Context\n- Baseline and current state: 9 tests pass\n- `python -m invoicer.cli tests/data/acme.csv` prints Net 1570.37, Tax 304.08, Total 1874.45\n\n"
        "<read-files>\ninvoicer/__init__.py\ninvoicer/cli.py\ninvoicer/core.py\ninvoicer/models.py\ninvoicer/render.py\ninvoicer/tax.py\ntests/test_core.py\n</read-files>\n\n"
        "<modified-files>\ninvoicer/__init__.py\ninvoicer/cli.py\ninvoicer/core.py\ninvoicer/models.py\ninvoicer/parsing.py\ninvoicer/render.py\ninvoicer/tax.py\n</modified-files>"
    )
    compaction_ms = s.ms
    tokens_before = s.context_tokens
    s.context_tokens = 4_300 + len(summary) // 4 + s.tokens_since(tax_user)
    s.append(
        "compaction",
        summary=summary,
        firstKeptEntryId=tax_user,
        tokensBefore=tokens_before,
        details={
            "readFiles": [
                "invoicer/__init__.py",
                "invoicer/cli.py",
                "invoicer/core.py",
                "invoicer/models.py",
                "invoicer/render.py",
                "invoicer/tax.py",
                "tests/test_core.py",
            ],
            "modifiedFiles": [
                "invoicer/__init__.py",
                "invoicer/cli.py",
                "invoicer/core.py",
                "invoicer/models.py",
                "invoicer/parsing.py",
                "invoicer/render.py",
                "invoicer/tax.py",
            ],
        },
        usage={
            "input": tokens_before,
            "output": 1_204,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": tokens_before + 1_204,
            "cost": {
                "input": round(tokens_before * 3e-6, 6),
                "output": 0.01806,
                "cacheRead": 0,
                "cacheWrite": 0,
                "total": round(tokens_before * 3e-6 + 0.01806, 6),
            },
        },
        systemMessage={
            "role": "system",
            "content": "",
            "sections": SECTIONS,
            "toolsAdded": TOOLS,
            "timestamp": compaction_ms,
        },
    )
    del system_ms

    # -- per-invoice rounding, with an abandoned pydantic detour ---------------------------------
    s.user("Now the rounding change, please.")
    s.read("invoicer/tax.py", TAX_PY, thinking="After compaction: re-read tax.py before editing.")
    s.edit(
        "invoicer/tax.py",
        '    tax = sum((tax_for(i) for i in inv.items), Decimal("0"))\n    return {"net": round_money(net), "tax": tax, "gross": round_money(net + tax)}',
        '    tax = round_money(sum((i.net * rate_for(i) for i in inv.items), Decimal("0")))\n    return {"net": round_money(net), "tax": tax, "gross": round_money(net + tax)}',
    )
    s.edit(
        "invoicer/tax.py",
        "def tax_for(item: LineItem) -> Decimal:\n    try:\n        rate = TAX_RATES[item.tax_class]\n    except KeyError:\n"
        '        raise ValueError(f"unknown tax class {item.tax_class!r}") from None\n    return round_money(item.net * rate)',
        "def rate_for(item: LineItem) -> Decimal:\n    try:\n        return TAX_RATES[item.tax_class]\n    except KeyError:\n"
        '        raise ValueError(f"unknown tax class {item.tax_class!r}") from None\n\n\ndef tax_for(item: LineItem) -> Decimal:\n    return round_money(item.net * rate_for(item))',
    )
    s.edit(
        "tests/test_core.py",
        "def test_unknown_tax_class():",
        'def test_tax_rounded_once_per_invoice():\n    inv = Invoice("1", "x", [LineItem("a", 1, Decimal("0.125")), '
        'LineItem("b", 1, Decimal("0.125"))])\n    assert totals(inv)["tax"] == Decimal("0.05")\n\n\ndef test_unknown_tax_class():',
    )
    s.bash(
        "python -m pytest -q",
        "........F.                                                               [100%]\n=================================== FAILURES ===================================\n"
        "__________________________ test_render_text_snapshot ___________________________\nE   AssertionError: assert [+ received] == [- snapshot]\n"
        "E     - Tax                                                  304.08\nE     + Tax                                                  304.07\n"
        "E     - Total                                               1874.45\nE     + Total                                               1874.44\n"
        "1 failed, 9 passed in 0.47s\n",
        error=True,
    )
    after_rounding = s.assistant(
        thinking="Expected: the snapshot encodes the old per-line rounding (1 cent difference). Ask before updating the snapshot.",
        text="The new test passes. The render snapshot now differs by one cent (tax 304.08 → 304.07), which is exactly the intended "
        "behaviour change. Update the snapshot?",
    )
    del after_rounding
    fork_point = s.leaf
    s.user("Before that: would the models be nicer as pydantic models? Try it.")
    s.bash(
        "pip install 'pydantic>=2'",
        "Collecting pydantic>=2\n  Downloading pydantic-2.12.3-py3-none-any.whl (460 kB)\nSuccessfully installed annotated-types-0.7.0 pydantic-2.12.3 pydantic-core-2.41.4\n",
        thinking="AGENTS.md says no new runtime deps without asking; the user asked explicitly, so try it in a way that is easy to revert.",
    )
    s.write(
        "invoicer/models.py",
        MODELS_PY.replace("from dataclasses import dataclass, field\n", "from pydantic import BaseModel, Field\n")
        .replace("@dataclass\nclass LineItem:", "class LineItem(BaseModel):")
        .replace("@dataclass\nclass Invoice:", "class Invoice(BaseModel):")
        .replace("field(default_factory=list)", "Field(default_factory=list)"),
    )
    s.bash(
        "python -m pytest -q",
        "FFFF......\nE   TypeError: BaseModel.__init__() takes 1 positional argument but 4 were given\n4 failed, 6 passed in 0.61s\n",
        error=True,
    )
    s.assistant(
        text="Pydantic models are keyword-only, so every positional `LineItem(...)` call (parser and tests) would have to change, and pydantic "
        "becomes a runtime dependency. I'd not do this as part of the refactor."
    )
    s.user("OK, forget pydantic, go back.")
    abandoned = s.leaf
    s.leaf = fork_point
    s.append(
        "branch_summary",
        fromId=abandoned,
        summary="Tried converting `invoicer/models.py` to pydantic v2 models. Rejected: pydantic models are keyword-only, so 4 tests and "
        "`parse_csv` broke with `BaseModel.__init__() takes 1 positional argument`, and it would add a runtime dependency "
        "(against AGENTS.md). The dataclass version of models.py must be restored; `pip uninstall pydantic` is optional.",
        details={"readFiles": [], "modifiedFiles": ["invoicer/models.py"]},
    )
    s.user("Yes, update the snapshot.")
    s.bash(
        "python -m pytest -q --snapshot-update",
        "..........                                                               [100%]\n10 passed, 1 snapshot updated in 0.45s\n",
        thinking="The branch summary says models.py was changed on the abandoned branch, but on this branch it never was. Just update the snapshot.",
    )
    s.bash(
        "git status --short",
        " M invoicer/__init__.py\n M invoicer/cli.py\n M invoicer/core.py\n M invoicer/parsing.py\n M invoicer/tax.py\n"
        " M tests/__snapshots__/test_core.ambr\n M tests/test_core.py\n?? invoicer/models.py\n?? invoicer/render.py\n",
    )
    s.bash(
        "python -m mypy --strict invoicer && python -m ruff check . && python -m pytest -q",
        "Success: no issues found in 7 source files\nAll checks passed!\n" + pytest_ok(10, 0.44),
    )
    s.assistant(
        text="Done:\n\n- tax is now rounded once per invoice (`rate_for` + a single `round_money` in `totals`), `tax_for` kept for callers\n"
        "- new test `test_tax_rounded_once_per_invoice`, snapshot updated (tax 304.07, total 1874.44)\n- mypy --strict, ruff and 10 tests green\n\n"
        "The pydantic experiment left no traces on this branch."
    )
    s.user("Commit it in two commits: the refactor, then the rounding change.")
    s.bash(
        "git add invoicer/models.py invoicer/parsing.py invoicer/render.py invoicer/__init__.py invoicer/cli.py invoicer/core.py && "
        "git commit -qm 'Split core.py into models, parsing, tax and render modules' -- invoicer/models.py invoicer/parsing.py invoicer/render.py "
        "invoicer/__init__.py invoicer/cli.py invoicer/core.py && git log --oneline -1",
        "[main 4be1c0d] Split core.py into models, parsing, tax and render modules\n 6 files changed, 88 insertions(+), 72 deletions(-)\n4be1c0d Split core.py into models, parsing, tax and render modules\n",
        thinking="tax.py also contains the rounding change now; commit it with the second commit. The shim in core.py imports tax, so check that the first "
        "commit alone would still import... it would not, tax.py is untracked. Mention it.",
    )
    s.bash(
        "git add invoicer/tax.py tests && git commit -qm 'Round tax once per invoice' && git log --oneline -2",
        "[main 9d31e77] Round tax once per invoice\n 3 files changed, 41 insertions(+), 1 deletion(-)\n9d31e77 Round tax once per invoice\n4be1c0d Split core.py into models, parsing, tax and render modules\n",
    )
    s.assistant(
        text="Committed as `4be1c0d` (split) and `9d31e77` (rounding). Note: `tax.py` landed in the second commit, so `4be1c0d` alone does not import; "
        "if you need every commit to be green I can move `tax.py`'s original version into the first one."
    )
    return s.lines


def write(path: Path) -> None:
    header = {
        "type": "session",
        "version": 3,
        "id": "019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e9f",
        "timestamp": "2026-03-02T09:14:04.871Z",
        "cwd": "/home/dana/src/invoicer",
    }
    lines = [header, *build()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in lines), encoding="utf-8"
    )


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
