"""LRU lists: the order in which device KV, device Mamba and host Mamba states are evicted.

Vocabulary: the *head* end is most recently used (MRU), the *tail* end least recently used (LRU). A walk for an
eviction candidate goes from the tail toward the head and skips *locked* nodes.

SGLang keeps the links inside the nodes and picks them by attribute name. Here the links live in the list
(one ``_Link`` per member), so one ``LRUList`` class serves all three lists with the same semantics:
- ``full``: every non-evicted non-root node; lock = ``full_lock_ref``.
- ``mamba``: nodes holding a device Mamba state; refuses tombstones; lock = ``mamba_lock_ref``.
- ``host_mamba``: nodes holding a host Mamba state; refuses host tombstones; lock = ``mamba_lock_ref`` (as in
  SGLang, whose host list inherits the device Mamba list's lock attribute).
Membership is by node id (``in_list``), exactly as SGLang tests it. Assertion texts are SGLang's.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from .errors import CacheAssertion
from .node import TreeNode


class _Link:
    __slots__ = ("node", "prev", "next")

    def __init__(self, node: TreeNode | None) -> None:
        self.node = node
        self.prev: _Link | None = None
        self.next: _Link | None = None


def _full_lock(n: TreeNode) -> int:
    return n.full_lock_ref


def _mamba_lock(n: TreeNode) -> int:
    return n.mamba_lock_ref


class LRUList:
    KINDS = ("full", "mamba", "host_mamba")

    def __init__(self, kind: str) -> None:
        assert kind in self.KINDS, kind
        self.kind = kind
        self.name = {"full": "full_lru_list", "mamba": "mamba_lru_list", "host_mamba": "mamba_host_lru_list"}[kind]
        self._lock: Callable[[TreeNode], int] = _full_lock if kind == "full" else _mamba_lock
        self.head, self.tail = _Link(None), _Link(None)
        self.head.next, self.tail.prev = self.tail, self.head
        self.cache: dict[int, _Link] = {}
        self.observer: Callable[[str, str, TreeNode], None] | None = None

    # --- SGLang's tombstone refusal, spelled per kind ---
    def _holds_state(self, node: TreeNode) -> bool:
        if self.kind == "mamba":
            return node.mamba_value is not None
        if self.kind == "host_mamba":
            return node.mamba_host_value is not None
        return True

    def _require_state(self, node: TreeNode, verb: str) -> None:
        if self._holds_state(node):
            return
        if self.kind == "host_mamba":
            where = "in lru list" if verb in ("Resetting", "Inserting") else "from lru list"
            raise CacheAssertion(f"{verb} host mamba tombstone node {where}: node.id={node.id}")
        where = "in mamba lru list" if verb in ("Resetting", "Inserting") else "from mamba lru list"
        raise CacheAssertion(f"{verb} mamba tombstone node {where}: node.id={node.id}")

    def _absent(self, node: TreeNode, verb: str) -> CacheAssertion:
        where = "host mamba lru" if self.kind == "host_mamba" else "lru list"
        return CacheAssertion(f"{verb} node node.id={node.id} not in {where}")

    # --- link surgery ---
    def _unlink(self, link: _Link) -> None:
        link.prev.next, link.next.prev = link.next, link.prev

    def _link_after(self, anchor: _Link, link: _Link) -> None:
        link.prev, link.next = anchor, anchor.next
        anchor.next.prev = link
        anchor.next = link

    def _notify(self, what: str, node: TreeNode) -> None:
        if self.observer is not None:
            self.observer(self.kind, what, node)

    # --- the operations SGLang calls ---
    def in_list(self, node: TreeNode | None) -> bool:
        return node is not None and node.id in self.cache

    def insert_mru(self, node: TreeNode) -> None:
        self._require_state(node, "Inserting")
        if node.id in self.cache:
            where = "host mamba lru list" if self.kind == "host_mamba" else "lru list"
            extra = "" if self.kind == "host_mamba" else f", existing node: self.cache[node.id].id={node.id}"
            raise CacheAssertion(f"Inserting node node.id={node.id} already in {where}{extra}")
        link = _Link(node)
        self.cache[node.id] = link
        self._link_after(self.head, link)
        self._notify("insert", node)

    def remove_node(self, node: TreeNode) -> None:
        if node.id not in self.cache:
            raise self._absent(node, "Removing")
        self._require_state(node, "Removing")
        self._unlink(self.cache.pop(node.id))
        self._notify("remove", node)

    def force_remove(self, node: TreeNode) -> bool:
        """Unlink without the tombstone check (the review's "unconditional" cleanup); False if absent."""
        link = self.cache.pop(node.id, None)
        if link is None:
            return False
        self._unlink(link)
        self._notify("remove", node)
        return True

    def reset_node_mru(self, node: TreeNode) -> None:
        if node.id not in self.cache:
            raise self._absent(node, "Resetting")
        self._require_state(node, "Resetting")
        link = self.cache[node.id]
        self._unlink(link)
        self._link_after(self.head, link)

    def reset_node_and_parents_mru(self, node: TreeNode, root: TreeNode) -> None:
        """Move ``node`` and its qualifying ancestors to the MRU end, each child ahead of its parent."""
        anchor = self.head
        while node is not root:
            # SGLang checks the *device* Mamba state here for every Mamba-flavoured list.
            if self.kind == "full" or node.mamba_value is not None:
                link = self.cache.get(node.id)
                if link is None:
                    raise CacheAssertion(
                        f"Resetting node node.id={node.id} not in lru list when resetting node and parents mru")
                self._unlink(link)
                self._link_after(anchor, link)
                anchor = link
            node = node.parent

    def get_lru_no_lock(self) -> TreeNode | None:
        return self._prev_unlocked(self.tail)

    def get_prev_no_lock(self, node: TreeNode) -> TreeNode | None:
        """The next candidate toward the MRU end that is not locked (None at the head)."""
        link = self.cache.get(node.id)
        if link is None:
            raise CacheAssertion(f"Getting prev of node node.id={node.id} not in lru list")
        return self._prev_unlocked(link)

    def _prev_unlocked(self, link: _Link) -> TreeNode | None:
        x = link.prev
        while x is not self.head and self._lock(x.node) > 0:
            x = x.prev
        return None if x is self.head else x.node

    # --- views ---
    def __len__(self) -> int:
        return len(self.cache)

    def mru_to_lru(self) -> Iterator[TreeNode]:
        x = self.head.next
        while x is not self.tail:
            yield x.node
            x = x.next

    def ids_mru_to_lru(self) -> list[int]:
        return [n.id for n in self.mru_to_lru()]
