"""`PrefixView.starts_with` answers from the lengths alone for views of one list: that answer must
equal an element-by-element identity comparison after any sequence of session operations (the
framework adapters keep the last projection and convert only what follows it)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_live_projection import OPS, _apply

from picontext._clock import FrozenClock, SequentialIds
from picontext.session.manager import SessionManager
from picontext.session.projection import PrefixView


def _same_objects(new: list[object], old: list[object]) -> bool:
    return len(old) <= len(new) and all(a is b for a, b in zip(new, old, strict=False))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10_000)), min_size=1, max_size=120))
def test_starts_with_equals_an_identity_comparison(ops: list[tuple[str, int]]) -> None:
    sm = SessionManager.in_memory("/w", clock=FrozenClock(step_ms=1), ids=SequentialIds())
    seen: list[tuple[PrefixView[object], list[object]]] = []  # each view with a copy of its items
    for i, (op, pick) in enumerate(ops):
        _apply(sm, op, pick, i)
        view = sm.build_session_projection().messages
        assert isinstance(view, PrefixView)
        items = list(view)
        for old, old_items in seen[-5:]:
            assert list(old) == old_items  # a view never changes
            assert view.starts_with(old) is _same_objects(items, old_items)
            cut = pick % (len(old_items) + 1)
            assert view.starts_with(old.head(cut)) is _same_objects(items, old_items[:cut])
        seen.append((view, items))


def test_after_an_append_the_answer_comes_from_the_lengths() -> None:
    sm = SessionManager.in_memory("/w", clock=FrozenClock(step_ms=1), ids=SequentialIds())
    sm.append_message({"role": "user", "content": "a", "timestamp": 1})
    old = sm.build_session_projection().messages
    sm.append_message({"role": "user", "content": "b", "timestamp": 2})
    new = sm.build_session_projection().messages
    assert isinstance(new, PrefixView) and isinstance(old, PrefixView)
    assert new.starts_with(old) and not old.starts_with(new)
    assert new.starts_with([]) and new.starts_with(list(old)) and not new.starts_with([dict(old[0])])
    assert new.head(1)[:] == old[:] and new.head(99)[:] == new[:] and not new.head(-1)
