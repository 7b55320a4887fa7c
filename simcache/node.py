"""Tree nodes.

Vocabulary
- *value*: device (GPU tier) KV slot ids, one per token; ``None`` means the node is **evicted** from device.
- *host_value*: host (CPU tier) KV slot ids; not ``None`` means the node is **backed up**.
- *mamba_value* / *mamba_host_value*: one Mamba state slot on device / on host. A node with no device Mamba
  state is a **tombstone**; it may only be deleted from the tree when it has no host Mamba state either.
- *full_lock_ref* locks the device KV of a path (a running request locks root..its last node);
  *mamba_lock_ref* locks the node's own device Mamba state.
- *host_ref_counter* / *host_mamba_ref_counter* protect the host copies (an L3 backup or prefetch in flight).

A detached node keeps ``parent``, ``children``, ``value`` and ``host_value`` untouched: SGLang never clears them,
and the stale-node crash depends on it. A node is **stale** when ``parent.children[child_key]`` no longer is it
while some structure still refers to it.
"""
from __future__ import annotations

from .keys import Key

NodeId = int


class TreeNode:
    __slots__ = (
        "id", "key", "parent", "children", "value", "host_value", "mamba_value", "mamba_host_value",
        "full_lock_ref", "mamba_lock_ref", "host_ref_counter", "host_mamba_ref_counter", "hit_count",
        "last_access_time", "hash_value",
    )

    def __init__(self, node_id: NodeId, access_time: float, key: Key = ()) -> None:
        self.id = node_id
        self.key: Key = key
        self.parent: TreeNode | None = None
        self.children: dict = {}
        self.value: list[int] | None = None
        self.host_value: list[int] | None = None
        self.mamba_value: list[int] | None = None
        self.mamba_host_value: list[int] | None = None
        self.full_lock_ref = 0
        self.mamba_lock_ref = 0
        self.host_ref_counter = 0
        self.host_mamba_ref_counter = 0
        self.hit_count = 0
        self.last_access_time = access_time
        self.hash_value: list[str] | None = None

    @property
    def evicted(self) -> bool:
        return self.value is None

    @property
    def backuped(self) -> bool:
        return self.host_value is not None

    @property
    def mamba_evicted(self) -> bool:
        return self.mamba_value is None

    @property
    def mamba_backuped(self) -> bool:
        return self.mamba_host_value is not None

    def protect_host(self) -> None:
        self.host_ref_counter += 1

    def release_host(self) -> None:
        if self.host_ref_counter <= 0:
            raise RuntimeError("Host reference counter is already zero.")
        self.host_ref_counter -= 1

    def protect_host_mamba(self) -> None:
        self.host_mamba_ref_counter += 1

    def release_host_mamba(self) -> None:
        if self.host_mamba_ref_counter <= 0:
            raise RuntimeError("Host mamba reference counter is already zero.")
        self.host_mamba_ref_counter -= 1

    def __lt__(self, other: TreeNode) -> bool:  # heap tie-breaks, as in SGLang
        return self.last_access_time < other.last_access_time

    def __repr__(self) -> str:
        return f"TreeNode(id={self.id}, key={list(self.key)})"
