"""Nodes and the clock of the unified cache (SGLang's ``UnifiedTreeNode``), re-expressed.

Vocabulary
- A node carries per-*component* data. The Full component: device KV ``value`` and host KV ``host_value`` (one slot
  per token); the Mamba component: one device state ``mamba_value`` and one host state ``mamba_host_value``. The
  field names are HiMamba's (``simcache.node``), so every view reads a unified node as it reads a HiMamba one.
- Locks, per component and tier: ``full_lock_ref`` (a path lock: a request locks root..its node),
  ``mamba_lock_ref`` (the node's own state), ``host_ref_counter`` and ``host_mamba_ref_counter`` (SGLang's Full and
  Mamba ``host_lock_ref``: an L3 backup, a prefetch anchor or a load-back holds the host copy).
- ``evicted``: not the root and no device KV; ``backuped``: host KV present. Only the Full component decides both.
- The *clock* is SGLang's shared access-time counter: every node takes two ticks when made (its access and creation
  times), every touch takes one. Eviction compares access times, so the model ticks exactly where SGLang does.

A detached node keeps its ``parent`` and its ``value``: SGLang's write-through delete frees the device KV but leaves
the slots on the node, and the race of issue #39 depends on that.
"""
from __future__ import annotations

from ..node import TreeNode


class Clock:
    """SGLang's ``get_and_increase_time_counter`` (one per cache here, starting where a fresh SGLang process does)."""

    __slots__ = ("now",)

    def __init__(self, start: float = 1.0) -> None:
        self.now = start

    def tick(self) -> float:
        t = self.now
        self.now += 1.0
        return t


class UNode(TreeNode):
    __slots__ = ("wt_pending", "creation_time", "is_root")

    def __init__(self, node_id: int, clock: Clock, key=()) -> None:
        super().__init__(node_id, clock.tick(), tuple(key))
        self.creation_time = clock.tick()
        self.wt_pending: int | None = None  # the write-through ack this node's backup waits for
        self.is_root = False

    @property
    def evicted(self) -> bool:
        return self.parent is not None and self.value is None

    def __repr__(self) -> str:
        return f"UNode(id={self.id}, key={list(self.key)})"
