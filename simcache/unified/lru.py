"""The unified cache's LRU lists: one per auxiliary component and tier (device Mamba, host Mamba).

Vocabulary: index 0 is the most recently used end (SGLang's head), the last index the least recently used (its
tail). A walk for an eviction candidate starts at the tail and moves toward the head, skipping nodes whose lock
(device or host, as the list says) is held. Membership is by node id, as SGLang tests it. The Full component keeps
no list: it evicts from the leaf sets through a heap of access times.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import CacheAssertion
from .node import UNode


class ULRU:
    def __init__(self, name: str, lock: Callable[[UNode], int]) -> None:
        self.name = name
        self.kind = "host_mamba" if "host" in name else "mamba"  # the recorder's name for the list (``observer``)
        self._lock = lock
        self.order: list[UNode] = []  # MRU first
        self.cache: dict[int, UNode] = {}
        self.observer = None

    def in_list(self, node: UNode | None) -> bool:
        return node is not None and node.id in self.cache

    def insert_mru(self, node: UNode) -> None:
        if node.id in self.cache:
            raise CacheAssertion("")
        self.cache[node.id] = node
        self.order.insert(0, node)
        if self.observer is not None:
            self.observer(self.kind, "insert", node)

    def remove_node(self, node: UNode) -> None:
        if node.id not in self.cache:
            raise CacheAssertion("")
        del self.cache[node.id]
        self.order.remove(node)
        if self.observer is not None:
            self.observer(self.kind, "remove", node)

    def reset_node_mru(self, node: UNode) -> None:
        if node.id not in self.cache:
            raise CacheAssertion("")
        self.order.remove(node)
        self.order.insert(0, node)

    def reset_node_and_parents_mru(self, node: UNode, root: UNode, include: Callable[[UNode], bool]) -> None:
        """The path from ``node`` up to the root, each member that ``include`` admits moved to the MRU end in path
        order (``node`` first)."""
        at = 0
        while node is not root:
            if include(node):
                if node.id not in self.cache:
                    raise CacheAssertion("")
                self.order.remove(node)
                self.order.insert(at, node)
                at += 1
            node = node.parent

    def _unlocked_from(self, start: int) -> UNode | None:
        for i in range(start, -1, -1):
            if self._lock(self.order[i]) == 0:
                return self.order[i]
        return None

    def get_lru_no_lock(self) -> UNode | None:
        return self._unlocked_from(len(self.order) - 1)

    def get_prev_no_lock(self, node: UNode) -> UNode | None:
        """The next candidate after ``node`` toward the MRU end."""
        if node.id not in self.cache:
            raise CacheAssertion("")
        return self._unlocked_from(self.order.index(node) - 1)

    def nodes(self) -> list[UNode]:
        return list(self.order)

    mru_to_lru = nodes  # the views' names (``simcache.lru.LRUList``)

    def ids_mru_to_lru(self) -> list[int]:
        return [n.id for n in self.order]
