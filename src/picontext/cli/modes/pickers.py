"""Arrow-key selectors for the chat: the conversation tree (/tree) and a list of choices.

Both run as small prompt_toolkit applications below the transcript (not full screen):
↑/↓ (or k/j) move, PgUp/PgDn and Home/End jump, Enter picks, Esc or q cancels. The tree
selector draws branches as a tree (├─ └─ │), marks the current path and the leaf, shows labels,
folds a subtree with ← (→ unfolds it again), and `l` labels the selected entry.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.layout.dimension import Dimension

from picontext.cli import render
from picontext.cli.base import CliError

SHOWN_IN_TREE = frozenset({"message", "compaction", "branch_summary", "custom_message"})


@dataclass
class TreeRow:
    id: str
    prefix: str  # the tree drawing before the text
    text: str
    on_path: bool
    leaf: bool
    label: str | None
    parent: str | None  # the shown row above this one in the tree
    children: list[str] = field(default_factory=list)


def _shown(entry: Any) -> bool:
    """Entries worth picking; one whose id is not a string cannot be gone to, nor a type that is
    a list or an object be one of ours."""
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        return False
    kind = entry.get("type")
    if type(kind) is not str or kind not in SHOWN_IN_TREE:
        return False
    message = entry.get("message")
    return not (entry.get("type") == "message" and isinstance(message, dict) and message.get("role") == "system")


def tree_rows(manager: Any, width: int = 100) -> list[TreeRow]:
    """The entries worth picking, in tree order; entries not shown (settings, labels, the system
    message) pass their children up to the nearest shown ancestor, so the drawing stays a tree."""
    leaf = manager.get_leaf_id()
    on_path = {e.get("id") for e in manager.get_branch() if isinstance(e, dict) and isinstance(e.get("id"), str)}

    def shown_children(node: Any) -> list[Any]:
        out: list[Any] = []
        stack = list(reversed(node.children))
        while stack:
            child = stack.pop()
            if _shown(child.entry):
                out.append(child)
            else:
                stack.extend(reversed(child.children))
        return out

    class _Root:
        children = manager.get_tree()

    rows: list[TreeRow] = []
    by_id: dict[str, TreeRow] = {}
    stack: list[tuple[Any, str, str, str | None]] = [
        (n, "", "", None) for n in reversed(shown_children(_Root))]
    while stack:
        node, prefix, child_prefix, parent = stack.pop()
        entry = node.entry
        row = TreeRow(entry["id"], prefix, render.entry_summary(entry, width), entry["id"] in on_path,
                      entry["id"] == leaf, node.label, parent)
        rows.append(row)
        by_id[row.id] = row
        if parent is not None:
            by_id[parent].children.append(row.id)
        kids = shown_children(node)
        inner = row.id
        if len(kids) == 1:
            stack.append((kids[0], child_prefix, child_prefix, inner))
        else:
            for i in range(len(kids) - 1, -1, -1):
                last = i == len(kids) - 1
                stack.append((kids[i], child_prefix + ("└─ " if last else "├─ "),
                              child_prefix + ("   " if last else "│  "), inner))
    # the leaf may be an entry that is not shown (a label, a model change): mark its shown ancestor
    if rows and not any(r.leaf for r in rows):
        path_rows = [r for r in rows if r.on_path]
        if path_rows:
            path_rows[-1].leaf = True
    return rows


def _page(size: int) -> int:
    return max(3, size - 4)


class TreePicker:
    """Pick an entry of the tree; `run()` returns its id, or None when cancelled."""

    HINT = "↑↓ move · ← fold · → unfold · l label · Enter go there · Esc cancel"

    def __init__(self, rows: list[TreeRow], height: int = 20) -> None:
        self.rows = rows
        self.folded: set[str] = set()
        self.height = max(5, height)
        start = next((i for i, r in enumerate(rows) if r.leaf), len(rows) - 1)
        self.selected = rows[start].id if rows else ""
        self.action = "go"  # or "label": the user asked to label the selected entry

    def visible(self) -> list[TreeRow]:
        """The rows not inside a folded subtree; one pass, since parents come before children."""
        if not self.folded:
            return self.rows
        hidden: set[str] = set()
        out = []
        for row in self.rows:
            if row.parent is not None and (row.parent in self.folded or row.parent in hidden):
                hidden.add(row.id)
            else:
                out.append(row)
        return out

    def _index(self, rows: list[TreeRow]) -> int:
        return next((i for i, r in enumerate(rows) if r.id == self.selected), 0)

    def move(self, delta: int) -> None:
        rows = self.visible()
        i = min(max(self._index(rows) + delta, 0), len(rows) - 1)
        self.selected = rows[i].id

    def fold(self) -> None:
        row = next(r for r in self.rows if r.id == self.selected)
        if row.children and row.id not in self.folded:
            self.folded.add(row.id)
        elif row.parent is not None:
            self.selected = row.parent

    def unfold(self) -> None:
        self.folded.discard(self.selected)

    def text(self) -> FormattedText:
        rows = self.visible()
        index = self._index(rows)
        room = self.height - 1
        top = min(max(0, index - room // 2), max(0, len(rows) - room))
        out: list[tuple[str, str]] = []
        for i, row in enumerate(rows[top:top + room], top):
            style = "reverse" if i == index else ("bold" if row.on_path else "fg:ansibrightblack")
            out.append((style, f"{'›' if i == index else ' '} {row.prefix}"))
            out.append((style, row.text))
            if row.label:
                out.append((style + " fg:ansicyan", f"  [{row.label}]"))
            if row.id in self.folded:
                out.append((style, f"  (+{self._hidden(row)} folded)"))
            if row.leaf:
                out.append((style + " fg:ansiyellow", "  ◀ you are here"))
            out.append(("", "\n"))
        out.append(("fg:ansibrightblack", f"{self.HINT}  ({index + 1}/{len(rows)})"))
        return FormattedText(out)

    def _hidden(self, row: TreeRow) -> int:
        """How many rows the folded `row` hides (its descendants)."""
        inside = {row.id}
        for other in self.rows:
            if other.parent in inside:
                inside.add(other.id)
        return len(inside) - 1

    async def run(self) -> str | None:
        if not self.rows:
            return None
        keys = KeyBindings()
        keys.add("up")(lambda e: self.move(-1))
        keys.add("k")(lambda e: self.move(-1))
        keys.add("down")(lambda e: self.move(1))
        keys.add("j")(lambda e: self.move(1))
        keys.add("pageup")(lambda e: self.move(-_page(self.height)))
        keys.add("pagedown")(lambda e: self.move(_page(self.height)))
        keys.add("home")(lambda e: self.move(-len(self.rows)))
        keys.add("end")(lambda e: self.move(len(self.rows)))
        keys.add("left")(lambda e: self.fold())
        keys.add("right")(lambda e: self.unfold())
        keys.add("enter")(lambda e: e.app.exit(result=self.selected))

        @keys.add("l")
        def _(event: Any) -> None:
            self.action = "label"
            event.app.exit(result=self.selected)

        for key in ("escape", "q", "c-c"):
            keys.add(key)(lambda e: e.app.exit(result=None))
        control = FormattedTextControl(self.text, focusable=True, show_cursor=False)
        window = Window(control, height=Dimension(max=self.height), wrap_lines=False)
        app: Application[str | None] = Application(layout=Layout(HSplit([window])), key_bindings=keys,
                                                   full_screen=False, erase_when_done=True)
        return await app.run_async()


def session_options(infos: list[Any]) -> list[tuple[str, str]]:
    """Recent sessions as choices: when, how long, id prefix, name or first message."""
    out = []
    for n, info in enumerate(infos, 1):
        title = " ".join((info.name or info.first_message or "(empty)").split())[:60]
        out.append((str(n), f"{info.modified:%Y-%m-%d %H:%M}  {info.message_count:>4} msgs  {info.id[:13]}  {title}"))
    return out


async def choose(question: str, options: list[tuple[str, str]]) -> str | None:
    """One of `options` ((key, text)) by arrows + Enter or by its key; None when cancelled. The
    first option is selected at the start; nothing is pre-typed."""
    state = {"i": 0}

    def text() -> FormattedText:
        out: list[tuple[str, str]] = [("bold", question + "\n")]
        width = max(len(key) for key, _ in options)
        for n, (key, label) in enumerate(options):
            selected = n == state["i"]
            out.append(("reverse" if selected else "", f"{'›' if selected else ' '} [{key:>{width}}] {label}"))
            out.append(("", "\n"))
        out.append(("fg:ansibrightblack", "↑↓ move · Enter choose · Esc cancel"))
        return FormattedText(out)

    keys = KeyBindings()

    def move(delta: int) -> None:
        state["i"] = (state["i"] + delta) % len(options)

    keys.add("up")(lambda e: move(-1))
    keys.add("down")(lambda e: move(1))
    keys.add("enter")(lambda e: e.app.exit(result=options[state["i"]][0]))
    for key in ("escape", "c-c"):
        keys.add(key)(lambda e: e.app.exit(result=None))
    for option_key, _ in options:
        if len(option_key) == 1:  # a one-key shortcut (n/y/c, 1-9)
            keys.add(option_key)(lambda e, k=option_key: e.app.exit(result=k))
    control = FormattedTextControl(text, focusable=True, show_cursor=False)
    app: Application[str | None] = Application(layout=Layout(HSplit([Window(control)])), key_bindings=keys,
                                               full_screen=False, erase_when_done=True)
    return await app.run_async()


def pick_session(cwd: str, *, infos: list[Any] | None = None) -> str:
    """Ask which recent session to resume (an arrow-key list, newest first); returns its path.
    `infos`: the sessions to choose from (default: the session files of `cwd`)."""
    from picontext.session.listing import list_sessions

    infos = (list_sessions(cwd) if infos is None else infos)[:20]
    if not infos:
        raise CliError(f"No sessions to resume in {cwd} (start one with `picontext`)")
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise CliError("--resume needs a terminal to pick a session; use -r ID, --session FILE or -c")
    answer = asyncio.run(choose("Resume which session?", session_options(infos)))
    if answer is None:
        raise CliError("No session picked")
    return infos[int(answer) - 1].path
