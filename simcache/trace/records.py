"""The records a trace is made of: micro-steps, went-stale / cleaned-up events, violations, operations and
checkpoints (frozen dataclasses, except an operation's record, closed when it ends), and where a step sits among
the operations."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import SimcacheError


@dataclass(frozen=True, slots=True)
class MicroStep:
    index: int
    op: int
    actor: str | None
    kind: str
    stack: tuple[str, ...]
    node: int | None
    text: str
    detail: dict = field(default_factory=dict, compare=False, hash=False)

    def as_dict(self) -> dict:
        return dict(index=self.index, op=self.op, actor=self.actor, kind=self.kind, stack=list(self.stack),
                    node=self.node, text=self.text, detail=self.detail)


@dataclass(frozen=True)
class StaleEvent:
    step: int
    node: int
    key: str
    holders: tuple[str, ...]
    cause: str

    def as_dict(self) -> dict:
        return dict(step=self.step, node=self.node, key=self.key, holders=list(self.holders), cause=self.cause)


@dataclass(frozen=True)
class CleanupEvent:
    step: int
    node: int
    key: str
    reason: str
    removed: tuple[str, ...]

    def as_dict(self) -> dict:
        return dict(step=self.step, node=self.node, key=self.key, reason=self.reason, removed=list(self.removed))


@dataclass(frozen=True)
class Violation:
    step: int
    op: int
    invariant: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class OpRecord:
    index: int
    actor: str | None
    op: dict
    first_step: int
    last_step: int = -1
    status: str = ""


class TraceLimitError(SimcacheError):
    """A run whose trace would outgrow the memory limit."""


@dataclass(frozen=True)
class Checkpoint:
    op: int  # position in ``Recorder.ops`` of the operation that starts from this state
    step: int  # index of that operation's first micro-step
    cache: object
    driver: object
    current: object
    known: int  # how many of the recorder's known nodes (``_known_log``) there were
    live: dict  # node id -> TreeNode copy, for known nodes still reachable (the rest: ``Recorder._frozen``)
    detached: int  # how many node ids had been detached (``_detached_log``)
    leaked: dict


def op_position(trace, step: int) -> int:
    """Position in ``trace.ops`` of the operation micro-step ``step`` belongs to."""
    from bisect import bisect_right

    firsts = trace._firsts() if hasattr(trace, "_firsts") else [o.first_step for o in trace.ops]
    return max(0, bisect_right(firsts, step) - 1)


def _op_end(trace, p: int) -> int:
    o = trace.ops[p]
    return o.last_step if o.last_step >= 0 else len(trace.steps) - 1

