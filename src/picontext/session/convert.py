"""From session messages to provider messages (the roles a model understands).

Mirrors Pi `convertToLlm` (messages.ts) in behaviour; the wording of the wrappers around
summaries and shell output is our own. Custom roles become user messages; system, user,
assistant and tool results pass through unchanged; anything else is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

COMPACTION_SUMMARY_PREFIX = (
    "Earlier parts of this conversation were condensed into the hand-off summary below; "
    "treat it as your own memory of that work.\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "We returned here from another line of work; this is a summary of that abandoned branch.\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"
IMAGE_BLOCKED_TEXT = "[image omitted: image input is turned off in the settings]"


def content_text(content: Any, separator: str = "\n") -> str:
    """The text of a message's `content`: a string as it is, the `text` blocks of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return separator.join(str(b.get("text") or "") for b in content
                              if isinstance(b, dict) and b.get("type") == "text")
    return ""


def bash_execution_to_text(message: dict[str, Any]) -> str:
    """The text a model reads for a shell command the user ran (`!cmd`)."""
    text = f"User ran the shell command `{message.get('command')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(the command printed nothing)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(the command was cancelled)"
    elif isinstance(exit_code, int | float) and not isinstance(exit_code, bool) and exit_code != 0:
        text += f"\n\nExit code: {exit_code:g}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output was truncated; the full output is in {message['fullOutputPath']}]"
    return text


def _user(content: Any, timestamp: Any) -> dict[str, Any]:
    return {"role": "user", "content": content, "timestamp": timestamp}


def convert_message(message: Any) -> dict[str, Any] | None:
    """One session message as a provider message, or None when it never reaches the model."""
    role = message.get("role") if isinstance(message, dict) else None
    if role in ("system", "user", "assistant", "toolResult"):
        return message
    ts = message.get("timestamp") if isinstance(message, dict) else None
    if role == "bashExecution":
        if message.get("excludeFromContext"):
            return None
        return _user([{"type": "text", "text": bash_execution_to_text(message)}], ts)
    if role == "custom":
        content = message.get("content")
        return _user([{"type": "text", "text": content}] if isinstance(content, str) else content, ts)
    if role == "branchSummary":
        text = BRANCH_SUMMARY_PREFIX + str(message.get("summary")) + BRANCH_SUMMARY_SUFFIX
        return _user([{"type": "text", "text": text}], ts)
    if role == "compactionSummary":
        text = COMPACTION_SUMMARY_PREFIX + str(message.get("summary")) + COMPACTION_SUMMARY_SUFFIX
        return _user([{"type": "text", "text": text}], ts)
    return None


def convert_to_llm(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Provider messages for a projection's messages, order preserved."""
    return [m for m in map(convert_message, messages) if m is not None]


def block_images(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replace images in user and tool-result content by one placeholder per run of images."""
    out = []
    for message in messages:
        content = message.get("content")
        if message.get("role") not in ("user", "toolResult") or not isinstance(content, list) or not any(
            isinstance(b, dict) and b.get("type") == "image" for b in content
        ):
            out.append(message)
            continue
        blocks: list[Any] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "image":
                block = {"type": "text", "text": IMAGE_BLOCKED_TEXT}
            is_placeholder = isinstance(block, dict) and block.get("type") == "text" and (
                block.get("text") == IMAGE_BLOCKED_TEXT
            )
            prev = blocks[-1] if blocks else None
            if is_placeholder and isinstance(prev, dict) and prev.get("type") == "text" and (
                prev.get("text") == IMAGE_BLOCKED_TEXT
            ):
                continue
            blocks.append(block)
        out.append({**message, "content": blocks})
    return out
