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

import heapq
from collections.abc import Callable, Iterator

from .errors import CacheAssertion
from .node import TreeNode
from .trace_hooks import LeafSet


class _Link:
    __slots__ = ("node", "prev", "next")

    def __init__(self, node: TreeNode | None, prev: _Link | None = None, nxt: _Link | None = None) -> None:
        self.node = node
        self.prev: _Link | None = prev
        self.next: _Link | None = nxt


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
        """Whether ``node`` is a member, by node id.

        SGLang: ``LRUList.in_list``, mamba_radix_cache.py:311."""
        return node is not None and node.id in self.cache

    def insert_mru(self, node: TreeNode) -> None:
        """Add ``node`` at the MRU end. SGLang's asserts: a node already in the list, or (Mamba lists) one without that
        state, is refused.

        SGLang: ``LRUList.insert_mru``, mamba_radix_cache.py:241 (host list: ``HostLRUList.insert_mru``,
        hi_mamba_radix_cache.py:69)."""
        kind = self.kind  # ``_holds_state``, inline: this is a hot path
        if kind != "full" and (node.mamba_value if kind == "mamba" else node.mamba_host_value) is None:
            self._require_state(node, "Inserting")
        cache, nid = self.cache, node.id
        if nid in cache:
            where = "host mamba lru list" if kind == "host_mamba" else "lru list"
            extra = "" if kind == "host_mamba" else f", existing node: self.cache[node.id].id={nid}"
            raise CacheAssertion(f"Inserting node node.id={nid} already in {where}{extra}")
        head = self.head  # _link_after(head, link), inline
        first = head.next
        link = cache[nid] = _Link(node, head, first)
        first.prev = head.next = link
        if self.observer is not None:
            self.observer(self.kind, "insert", node)

    def remove_node(self, node: TreeNode) -> None:
        """Unlink ``node``; absent, or (Mamba lists) without that state, it trips SGLang's assert.

        SGLang: ``LRUList.remove_node``, mamba_radix_cache.py:254 (host list: ``HostLRUList.remove_node``,
        hi_mamba_radix_cache.py:79)."""
        link = self.cache.get(node.id)
        if link is None:
            raise self._absent(node, "Removing")
        kind = self.kind
        if kind != "full" and (node.mamba_value if kind == "mamba" else node.mamba_host_value) is None:
            self._require_state(node, "Removing")
        del self.cache[node.id]
        link.prev.next, link.next.prev = link.next, link.prev
        if self.observer is not None:
            self.observer(self.kind, "remove", node)

    def force_remove(self, node: TreeNode) -> bool:
        """Unlink without the tombstone check (the review's "unconditional" cleanup); False if absent.

        SGLang: none (the reviewed fix's cleanup, from the PR thread; never merged)."""
        link = self.cache.pop(node.id, None)
        if link is None:
            return False
        self._unlink(link)
        self._notify("remove", node)
        return True

    def reset_node_mru(self, node: TreeNode) -> None:
        """Move a member to the MRU end.

        SGLang: ``LRUList.reset_node_mru``, mamba_radix_cache.py:214 (host list: ``HostLRUList.reset_node_mru``,
        hi_mamba_radix_cache.py:61)."""
        link = self.cache.get(node.id)
        if link is None:
            raise self._absent(node, "Resetting")
        kind = self.kind
        if kind != "full" and (node.mamba_value if kind == "mamba" else node.mamba_host_value) is None:
            self._require_state(node, "Resetting")
        link.prev.next, link.next.prev = link.next, link.prev
        head = self.head
        first = head.next
        link.prev, link.next = head, first
        first.prev = head.next = link

    def reset_node_and_parents_mru(self, node: TreeNode, root: TreeNode) -> None:
        """Move ``node`` and its qualifying ancestors to the MRU end, each child ahead of its parent.

        SGLang: ``LRUList.reset_node_and_parents_mru``, mamba_radix_cache.py:225."""
        anchor, full, cache = self.head, self.kind == "full", self.cache
        while node is not root:
            # SGLang checks the *device* Mamba state here for every Mamba-flavoured list.
            if full or node.mamba_value is not None:
                link = cache.get(node.id)
                if link is None:
                    raise CacheAssertion(
                        f"Resetting node node.id={node.id} not in lru list when resetting node and parents mru")
                if link.prev is not anchor:  # _unlink, then _link_after(anchor); already there: nothing moves
                    link.prev.next, link.next.prev = link.next, link.prev
                    after = anchor.next
                    link.prev, link.next = anchor, after
                    after.prev = anchor.next = link
                anchor = link
            node = node.parent

    def get_lru_no_lock(self) -> TreeNode | None:
        """The least recently used member that is not locked (None if every member is).

        SGLang: ``LRUList.get_lru_no_lock``, mamba_radix_cache.py:265."""
        return self._prev_unlocked(self.tail)

    def get_prev_no_lock(self, node: TreeNode) -> TreeNode | None:
        """The next candidate toward the MRU end that is not locked (None at the head).

        SGLang: ``LRUList.get_prev_no_lock``, mamba_radix_cache.py:277."""
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
        """Members, most recently used first.

        SGLang: none (a view for tests, invariants and renderers)."""
        x = self.head.next
        while x is not self.tail:
            yield x.node
            x = x.next

    def ids_mru_to_lru(self) -> list[int]:
        """Member ids, most recently used first.

        SGLang: none (a view for snapshots)."""
        return [n.id for n in self.mru_to_lru()]


# --- eviction order over a leaf set, kept between calls ---------------------------------------------------------
#
# SGLang's ``evict`` and ``evict_host`` build a heap of ``(last_access_time, node)`` over the whole leaf set on every
# call, pop the oldest, skip a popped node no longer in the set, and push a victim's parent when it became a leaf.
# ``OrderedLeafSet`` keeps that heap between calls instead (one entry pushed per add; entries are checked when
# popped), and ``EvictionRound`` walks it so that one call visits exactly the nodes, in exactly the order, that the
# per-call heap would:
# - Ties: two distinct nodes never share an access time. Every time is a clock tick (each tick is given to one
#   node) or, on a matched path, ``tick - k * 0.00001`` for the k-th ancestor (k >= 1: not a whole number, and
#   distinct ticks differ by whole numbers). So the per-call heap's order is the sorted order, whatever heapq does
#   with ties, and only entries of the same node can compare equal (either order gives the same run).
# - Times only grow (a new tick exceeds every earlier time, and a path value stays above the previous tick while
#   the path has fewer than 50,000 nodes; ``TreeOps`` turns the kept order off for good otherwise). An entry whose
#   time is out of date is therefore early: when popped it is pushed again with the node's current time.
# - Times do not change during an eviction call (no eviction path matches, inserts or splits).
# - The per-call heap holds the set's members at the start of the call, once each, plus the parents pushed during
#   the call. A round logs each node's membership at the start (its first add or discard in the call), lets a
#   member's start-of-call entry act once (``consumed``), and sets aside entries of nodes that joined during the
#   call (for later calls): those nodes are visited in this call only through a pushed parent entry, as in SGLang.

_COMPACT_SLACK = 64


class OrderedLeafSet(LeafSet):
    """A leaf set that also keeps its members in a heap by access time (see above). ``heap is None``: not kept."""

    __slots__ = ("heap", "log")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.heap: list | None = []
        self.log: dict | None = None  # during an eviction round: node -> member at the round's start

    def add(self, node) -> None:
        """Add a member and push its heap entry.

        SGLang: ``set.add`` on ``evictable_full_device_leaves`` / ``evictable_full_host_leaves``
        (hi_mamba_radix_cache.py:472-493); the kept heap has no counterpart (SGLang builds one per ``evict`` call)."""
        heap = self.heap
        if heap is None or node in self:
            super().add(node)
            return
        super().add(node)  # a member first: a compaction rebuilds the heap from the members, this one included
        heapq.heappush(heap, (node.last_access_time, node))
        if self.log is None and len(heap) > 2 * len(self) + _COMPACT_SLACK:
            self.compact()

    def clear(self) -> None:
        """Empty the set and its heap.

        SGLang: ``set.clear`` in ``HiMambaRadixCache.reset``, hi_mamba_radix_cache.py:182."""
        super().clear()
        if self.heap is not None:
            self.heap = []

    def compact(self) -> None:
        """Drop the entries of former members and out-of-date times (between rounds only).

        SGLang: none (keeps the kept heap small)."""
        self.heap = [(n.last_access_time, n) for n in self]
        heapq.heapify(self.heap)

    def ordered(self) -> bool:
        """True when a round can run: the order is kept and no round is under way (SGLang never nests them).

        SGLang: none (a guard of the kept heap)."""
        return self.heap is not None and self.log is None


class _RoundLeafSet(OrderedLeafSet):
    """An ``OrderedLeafSet`` during an eviction round: it also logs each node's membership at the round's start
    (the class is switched for the round, so that ``discard`` costs nothing extra the rest of the time)."""

    __slots__ = ()

    def add(self, node) -> None:
        log = self.log
        if node not in log:
            log[node] = node in self
        OrderedLeafSet.add(self, node)

    def discard(self, node) -> None:
        log = self.log
        if node not in log:
            log[node] = node in self
        LeafSet.discard(self, node)


class EvictionRound:
    """One eviction call's walk over an ``OrderedLeafSet``, in the order of SGLang's per-call heap (see above)."""

    __slots__ = ("leaves", "heap", "pushed", "defer", "consumed", "log")

    def __init__(self, leaves: OrderedLeafSet) -> None:
        self.leaves, self.heap = leaves, leaves.heap
        self.pushed: list = []  # the parents pushed during this call
        self.defer: list = []  # entries kept for later calls
        self.consumed: set = set()
        self.log = leaves.log = {}
        leaves.__class__ = _RoundLeafSet

    def next(self) -> TreeNode | None:
        """The next node to evict (a member now), or None when SGLang's heap would be empty.

        SGLang: the ``heapq.heappop`` loop of ``HiMambaRadixCache.evict``, hi_mamba_radix_cache.py:672, and
        ``evict_host``, hi_mamba_radix_cache.py:706."""
        heap, pushed, leaves = self.heap, self.pushed, self.leaves
        pop, push = heapq.heappop, heapq.heappush
        while True:
            if pushed and (not heap or pushed[0][0] <= heap[0][0]):
                _, x = pop(pushed)
                if x in leaves:
                    return x
                continue
            if not heap:
                return None
            t, x = pop(heap)
            log = self.log
            at_start = log[x] if x in log else x in leaves
            if x not in leaves:
                if at_start:
                    self.consumed.add(x)
                continue
            now = x.last_access_time
            if t != now:  # out of date, hence early: back in at its current time
                push(heap, (now, x))
            elif at_start and x not in self.consumed:
                self.consumed.add(x)
                self.defer.append(x)  # if it is still a member once evicted, later calls need an entry for it
                return x
            else:
                self.defer.append(x)

    def push_parent(self, node: TreeNode) -> None:
        """Queue a victim's parent that became a leaf.

        SGLang: the ``heapq.heappush`` of the parent in ``evict`` (hi_mamba_radix_cache.py:672) and ``evict_host``
        (hi_mamba_radix_cache.py:706)."""
        heapq.heappush(self.pushed, (node.last_access_time, node))

    def close(self) -> None:
        """End the round: keep the entries later calls need, restore the set's class.

        SGLang: none (the per-call heap is dropped there)."""
        leaves, heap = self.leaves, self.heap
        leaves.__class__, leaves.log = OrderedLeafSet, None
        for x in self.defer:
            if x in leaves:
                heapq.heappush(heap, (x.last_access_time, x))
        if len(heap) > 2 * len(leaves) + _COMPACT_SLACK:
            leaves.compact()
