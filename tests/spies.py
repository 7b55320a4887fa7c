"""Recording a call on its way through to the real function: what a command or entry point hands the code under
it, with the real code still doing the work (so each test checks a real outcome, not a stand-in's)."""
from __future__ import annotations

from collections.abc import Callable


def record_calls(monkeypatch, owner, name: str, entry: Callable = lambda a, kw: (a, kw)) -> list:
    """Replace ``owner.name`` (undone by ``monkeypatch``) with a wrapper that appends ``entry(args, kwargs)`` to the
    returned list, then calls the real function."""
    seen: list = []
    real = getattr(owner, name)

    def through(*a, **kw):
        seen.append(entry(a, kw))
        return real(*a, **kw)

    monkeypatch.setattr(owner, name, through)
    return seen
