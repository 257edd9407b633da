"""Which files a span of conversation read and modified, from its tool calls (spec 02 §7.8).

    FileOperations              read / written / edited path sets        (Pi FileOperations)
    extract_file_ops_from_message  add one message's read/write/edit calls   (Pi extractFileOpsFromMessage)
    seed_from_details           cumulative lists of a previous summary entry
    compute_file_lists          (readFiles, modifiedFiles), sorted         (Pi computeFileLists)
    format_file_operations      the <read-files>/<modified-files> block    (Pi formatFileOperations)

Only assistant `toolCall` blocks named exactly `read`, `write` or `edit` with a non-empty string
`arguments.path` count, whether or not the call succeeded; paths are not normalised.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from picontext.session.projection import field_of

_KIND = {"read": "read", "write": "written", "edit": "edited"}


@dataclass(slots=True)
class FileOperations:
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)


def create_file_ops() -> FileOperations:
    return FileOperations()


def js_sort_key(text: str) -> bytes:
    """JavaScript's default sort order: by UTF-16 code units."""
    return text.encode("utf-16-be", "surrogatepass")


def extract_file_ops_from_message(message: Any, ops: FileOperations) -> None:
    if type(message) is not dict or message.get("role") != "assistant":
        return
    content = message.get("content")
    if type(content) is not list:
        return
    for block in content:
        if type(block) is not dict or block.get("type") != "toolCall":
            continue
        name = block.get("name")
        kind = _KIND.get(name) if type(name) is str else None
        arguments = block.get("arguments")
        path = arguments.get("path") if type(arguments) is dict else None
        if kind is None or type(path) is not str or not path:
            continue
        getattr(ops, kind).add(path)


def extract_file_ops(messages: Iterable[Any], ops: FileOperations) -> FileOperations:
    """Add the file operations of every tool call in `messages` (inlined: spans can be 100k long)."""
    targets = {"read": ops.read, "written": ops.written, "edited": ops.edited}
    kinds = _KIND
    for message in messages:
        if type(message) is not dict or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if type(content) is not list:
            continue
        for block in content:
            if type(block) is not dict or block.get("type") != "toolCall":
                continue
            name = block.get("name")
            kind = kinds.get(name) if type(name) is str else None
            if kind is None:
                continue
            arguments = block.get("arguments")
            path = arguments.get("path") if type(arguments) is dict else None
            if type(path) is str and path:
                targets[kind].add(path)
    return ops


def seed_from_details(entry: Any, ops: FileOperations) -> None:
    """Inherit `details.readFiles` / `details.modifiedFiles` of a picontext/Pi-made summary entry.

    Entries made by an extension (`fromHook`) are not inherited from; modified files are seeded
    into the edited set.
    """
    if field_of(entry, "fromHook"):
        return
    details = field_of(entry, "details")
    if not isinstance(details, dict):
        return
    for key, target in (("readFiles", ops.read), ("modifiedFiles", ops.edited)):
        files = details.get(key)
        if isinstance(files, list):
            target.update(f for f in files if isinstance(f, str))


def compute_file_lists(ops: FileOperations) -> tuple[list[str], list[str]]:
    """(readFiles, modifiedFiles): modified = edited | written; read-only = read - modified."""
    modified = ops.edited | ops.written
    read_only = ops.read - modified
    return sorted(read_only, key=js_sort_key), sorted(modified, key=js_sort_key)


def format_file_operations(read_files: list[str], modified_files: list[str]) -> str:
    """`"\\n\\n<read-files>...</read-files>\\n\\n<modified-files>...</modified-files>"`, or ""."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""
