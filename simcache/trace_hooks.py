"""Hooks that let a recorder watch the simulated cache without the cache knowing about traces.

``simulated`` marks a method as a simulated SGLang function: its name appears in call stacks, in ``raised_in`` and
in the nested micro-step trace. When no recorder is attached the wrapper costs one attribute test.
``LeafSet`` is an insertion-ordered set (deterministic iteration, unlike a set of objects) that reports changes.
"""
from __future__ import annotations

import functools
import traceback
from collections.abc import Callable, Iterator
from typing import TypeVar

F = TypeVar("F", bound=Callable)

# code objects of simulated functions -> the SGLang function name they mirror
SIMULATED_CODE: dict[object, str] = {}


def register(fn: F, name: str | None = None) -> F:
    """Mark ``fn`` as a mirror of the SGLang function ``name`` (for ``raised_in``), without wrapping it."""
    SIMULATED_CODE[fn.__code__] = name or fn.__name__
    return fn


def simulated(fn: F) -> F:
    """Mark a cache method as a simulated SGLang function and let a recorder see its calls."""
    register(fn)
    name = fn.__name__

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        rec = self.recorder
        if rec is None:
            return fn(self, *args, **kwargs)
        rec.enter(name, args)
        try:
            return fn(self, *args, **kwargs)
        finally:
            rec.exit(name)

    return call  # type: ignore[return-value]


def simulated_frames(exc: BaseException) -> list[str]:
    """Names of the simulated functions on ``exc``'s traceback, outermost first."""
    names = []
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        name = SIMULATED_CODE.get(frame.f_code)
        if name is not None:
            names.append(name)
    return names


class LeafSet(dict):
    """An insertion-ordered set of nodes that tells an observer when membership really changes.

    The members are the keys of the dict it is (values None), so ``node in s`` and ``len(s)`` run at C speed: the
    cache tests membership on every leaf-status update and every eviction step. Equality and hashing stay by
    identity, as for any other holder."""

    __slots__ = ("name", "observer")
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.observer: Callable[[str, str, object], None] | None = None

    def add(self, node) -> None:
        if node not in self:
            self[node] = None
            if self.observer is not None:
                self.observer(self.name, "add", node)

    def discard(self, node) -> None:
        if node in self:
            del self[node]
            if self.observer is not None:
                self.observer(self.name, "discard", node)

    def __iter__(self) -> Iterator:
        """The members in insertion order, as a list taken now (callers discard while they iterate)."""
        return iter(list(dict.__iter__(self)))

    @property
    def _d(self) -> dict:
        """The members as a dict: this set itself (the attribute that held them before the set became a dict, kept for
        code written against it; ``dict.__iter__(s)`` walks the members without the snapshot ``iter(s)`` takes)."""
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {list(dict.__iter__(self))!r})"
