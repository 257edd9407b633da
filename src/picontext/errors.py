"""Every exception picontext raises on purpose.

    PicontextError
    ├── ConfigError                 unknown model/provider, missing key, bad settings value
    ├── SessionError
    │   ├── SessionFormatError      a file that is not a session (path, line)
    │   ├── EntryNotFound           "Entry <id> not found"
    │   ├── NotOnActiveBranch       "Entry <id> is not on the active branch"
    │   ├── NotEditable             "Entry <id> does not contribute editable model content"
    │   ├── InvalidReplacement      bad context_edit replacement
    │   ├── InvalidSessionId        caller-supplied id of the wrong shape
    │   ├── ForkError               fork source empty or invalid
    │   ├── SessionLockedError      another process holds the file lock too long
    │   ├── StaleSessionError       another writer appended (or replaced the log) since our tail
    │   └── SessionWriteError       the disk refused a write (full, vanished file)
    │       └── WriteOutcomeUnknown the answer to a write was lost: stored or not, storage tells
    ├── ProviderError               (ai layer) transport and HTTP failures outside a stream
    │   └── ContextOverflowError
    └── CompactionError
        ├── NothingToCompact
        ├── SummarizationFailed     the model's reply cannot become a summary
        │   ├── SummaryError        stopReason "error"
        │   ├── SummaryTruncated    stopReason "length": cut by the token cap
        │   ├── SummaryToolCall     the reply called a tool
        │   ├── SummaryAborted      stopReason "aborted"
        │   └── SummaryEmpty        no text at all
        └── SessionChanged          the file changed while the summary was being written

Messages of the session errors are the reference's own strings, so scripts that match on
them keep working.
"""

from __future__ import annotations


class PicontextError(Exception):
    """Base of all picontext errors."""


class ConfigError(PicontextError):
    pass


class SessionError(PicontextError):
    pass


class SessionFormatError(SessionError):
    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class EntryNotFound(SessionError):
    def __init__(self, entry_id: object) -> None:
        super().__init__(f"Entry {entry_id} not found")
        self.entry_id = entry_id


class NotOnActiveBranch(SessionError):
    def __init__(self, entry_id: str) -> None:
        super().__init__(f"Entry {entry_id} is not on the active branch")


class NotEditable(SessionError):
    def __init__(self, entry_id: str) -> None:
        super().__init__(f"Entry {entry_id} does not contribute editable model content")


class InvalidReplacement(SessionError):
    def __init__(self) -> None:
        super().__init__("Context edit replacement must be null or contain string/array content")


class InvalidSessionId(SessionError, ValueError):
    def __init__(self) -> None:
        super().__init__(
            "Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', "
            "and start and end with an alphanumeric character"
        )


class ForkError(SessionError):
    pass


class SessionLockedError(SessionError):
    pass


class StaleSessionError(SessionError):
    """The session log no longer ends where the writer expected: nothing was appended."""


class SessionWriteError(SessionError, OSError):
    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing

    def __str__(self) -> str:
        return str(self.args[0])


class WriteOutcomeUnknown(SessionWriteError):
    """A write was sent but its answer never came (the connection died at COMMIT): it may or may
    not be stored. Only reading the store tells; the session manager does that before its next
    write (docs/storage.md, "A lost COMMIT")."""


class ProviderError(PicontextError):
    pass


class ContextOverflowError(ProviderError):
    pass


class CompactionError(PicontextError):
    pass


class NothingToCompact(CompactionError):
    pass


class SummarizationFailed(CompactionError):
    """A summary request produced nothing usable; nothing was written to the session."""


class SummaryError(SummarizationFailed):
    pass


class SummaryOverflow(SummaryError):
    """The summarizer's server said a summary request did not fit its window (the chunking's
    chars/4 estimate was short: numeric text tokenizes up to ~1.5x it on small local models)."""


class SummaryTruncated(SummarizationFailed):
    pass


class SummaryToolCall(SummarizationFailed):
    pass


class SummaryAborted(SummarizationFailed):
    pass


class SummaryEmpty(SummarizationFailed):
    pass


class SummaryTimeout(SummaryError):
    """A summary request took longer than `compaction.summaryTimeoutMs`."""


class SummaryUnusable(SummarizationFailed):
    """The model returned a summary that cannot serve: larger than what it replaces or far over
    its budget (`kind` "oversize"), a refusal ("refusal"), or repetition without content
    ("garbage")."""

    def __init__(self, message: str, kind: str = "garbage") -> None:
        super().__init__(message)
        self.kind = kind


class SessionChanged(CompactionError):
    """Another writer appended to the session file while the summary was being written."""
