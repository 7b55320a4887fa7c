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


class LeafSet:
    """An insertion-ordered set of nodes that tells an observer when membership really changes."""

    __slots__ = ("name", "_d", "observer")

    def __init__(self, name: str) -> None:
        self.name = name
        self._d: dict = {}
        self.observer: Callable[[str, str, object], None] | None = None

    def add(self, node) -> None:
        if node not in self._d:
            self._d[node] = None
            if self.observer is not None:
                self.observer(self.name, "add", node)

    def discard(self, node) -> None:
        if node in self._d:
            del self._d[node]
            if self.observer is not None:
                self.observer(self.name, "discard", node)

    def __contains__(self, node) -> bool:
        return node in self._d

    def __iter__(self) -> Iterator:
        return iter(list(self._d))

    def __len__(self) -> int:
        return len(self._d)

    def clear(self) -> None:
        self._d.clear()
