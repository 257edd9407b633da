"""The summarizer's own model: `compaction.model` / `--summary-model`, and its cost on record.

A summary does not need the session's (often most expensive) model. `compaction.model`
(`"provider/id"`, per-model overrides like every compaction setting) or `picontext compact
--summary-model` names the catalog model that writes summaries; unset, the session's model does
(Pi's behaviour). Every compaction entry then records which model wrote it
(`details.summaryModel`) next to the `usage` (tokens and cost) the entry already carries, so
`picontext stats` can show what compaction cost.
"""

from __future__ import annotations

from typing import Any

from picontext.ai.models import Model, default_catalog
from picontext.compaction.completion import StreamCompletion

__all__ = ["summarizer_ref", "summary_completion", "with_summary_model"]


def summarizer_ref(completion: Any) -> str | None:
    """`provider/id` of the model behind `completion` (a StreamCompletion), else None."""
    model = getattr(completion, "model", None)
    if isinstance(model, dict) and model.get("provider") and model.get("id"):
        return f"{model['provider']}/{model['id']}"
    return None


def with_summary_model(details: dict[str, Any] | None, ref: str | None) -> dict[str, Any] | None:
    """`details` with `summaryModel` added (unchanged when the model is not known)."""
    if ref is None:
        return details
    return {**(details or {}), "summaryModel": ref}


def summary_completion(ref: str, *, api_key: str | None = None, catalog: Any = None, **kwargs: Any
                       ) -> StreamCompletion:
    """A StreamCompletion for catalog model `ref`; its API key resolved now (one-line ConfigError
    naming what to set when missing). `kwargs` go to StreamCompletion (retry, stream_fn, client)."""
    from picontext.ai.auth import require_api_key

    model: Model = (catalog or default_catalog()).get(ref)
    key = api_key or require_api_key(model["provider"], model=model)
    return StreamCompletion(model, api_key=key, **kwargs)
