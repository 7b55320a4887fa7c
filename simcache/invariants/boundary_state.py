"""The state the boundary check keeps up to date: the attached tree, prefix fingerprints and each attached node's
share of every invariant (``BoundaryState``; the pools' owned and loose slots: ``boundary_pools``; the check itself is
in ``boundary``)."""
from __future__ import annotations

import numpy as np

from ..fingerprints import kv_fingerprint_array
from ..node import TreeNode
from ..state import held_by
from .boundary_pools import PoolShares
from .one_pass import _H0, _M
from .tracked import _MOVED, _REKIDS, TrackedNode


class BoundaryState(PoolShares):
    """What ``BoundaryCheck`` keeps between two operation boundaries, and how the recorder's events and each node's
    share of the invariants bring it up to date."""

    def __init__(self, cache) -> None:
        self.cache = cache
        self.seen: set = set()
        self.links: list = []  # (parent, child) whose dict entry changed since the last boundary
        self.memo: dict = {}
        self._build()

    # --- what the recorder tells it ---
    def see(self, node) -> None:
        """A node named by an event: track its writes from now on (re-examined at the next boundary if it was not
        tracked yet: what was written before is unknown)."""
        if node.__class__ is TreeNode:
            node.__class__ = TrackedNode
            self.seen.add(node)

    def moved(self, node) -> None:
        """A node whose place or children changed (a split's two nodes)."""
        if node.__class__ is TreeNode:
            node.__class__ = TrackedNode
        _MOVED.add(node)
        _REKIDS.add(node)

    def relinked(self, parent, child) -> None:
        """``parent.children``'s entry for ``child`` changed (attach, detach: ``child`` entered or left it)."""
        for n in (parent, child):
            if n.__class__ is TreeNode:
                n.__class__ = TrackedNode
        self.links.append((parent, child))
        _MOVED.add(child)

    # --- the state ---
    def _build(self) -> None:
        cache = self.cache
        root = cache.root_node
        self.root = root
        self.att: dict[int, TreeNode] = {id(root): root}
        self.att_ids: set[int] = {root.id}
        self.kids: dict[int, dict] = {}  # attached node -> its attached children (id -> node)
        self.par: dict[int, TreeNode] = {}  # parent at the last boundary
        self.fp: dict[int, tuple] = {}
        self.share: dict[int, tuple] = {}
        self.own: dict[int, tuple] = {}  # node -> (its value lists and fingerprint entry, its owned slots, lengths)
        self.leaf_dev: dict[int, tuple[bool, bool]] = {}  # leaf-set member -> (not a leaf, detached)
        self.leaf_host: dict[int, tuple[bool, bool]] = {}
        # the leaf checks read every child in a member's dict, also one whose parent pointer names another node:
        # child -> the members whose dicts held it at their last check (id -> node), and member -> those children
        self.readers: dict[int, dict] = {}
        self.read: dict[int, tuple] = {}
        self.bad = dict.fromkeys(("tier", "backup", "mlen", "leaf", "held"), 0)
        self.sums = [0, 0, 0, 0]  # dev, prot, mall, mprot
        self.want_full: set[int] = set()
        self.want_m: set[int] = set()
        self.host_m: set[int] = set()
        self._build_pools(cache.pools.all())
        for n in self._subtree(root, _H0, 0):  # the attached nodes below the root, each counted once
            s = self._share_of(n)
            self.share[id(n)] = (n, s)
            self._apply(n, s, +1)
        self._flush()
        for s in (cache.evictable_full_device_leaves, cache.evictable_full_host_leaves):
            for n in s:
                self._releaf(n)
        for _, n in held_by(cache):
            if n.__class__ is TreeNode:
                n.__class__ = TrackedNode
        for n in self.att.values():
            if n.__class__ is TreeNode:
                n.__class__ = TrackedNode

    def _children(self, n) -> list:
        ck = self.cache.child_key
        return [c for k, c in n.children.items() if c.parent is n and len(c.key) > 0 and ck(c.key) == k]

    def _fp(self, c, h: int, start: int) -> tuple:
        old = self.fp.get(id(c))
        key = c.key
        if old is not None and old[0] is c and old[3] is key and old[1] == h and old[2] == start:
            return old
        if key:  # (``kv_extend``; a big pool's share takes the fingerprints as the array, a small one as a list)
            arr = kv_fingerprint_array(key, h)
            want = arr.tolist() if self.kv_lists else arr
            hc = int(arr[-1])
        else:
            arr, want, hc = None, [], h
        i = start + len(key)
        f = self.fp[id(c)] = (c, h, start, key, hc, i, want, ((hc if i else 0) * 31 + i + 7) & _M, arr)
        return f

    def _subtree(self, top, h: int, start: int) -> list:
        """Add ``top`` (fingerprinted from ``h``, ``start``) and its attached subtree; return the nodes added."""
        out, stack = [], [(top, h, start)]
        root = self.root
        while stack:
            n, h, start = stack.pop()
            if n is not root:
                f = self._fp(n, h, start)
                h, start = f[4], f[5]
                self.att[id(n)] = n
                self.att_ids.add(n.id)
                out.append(n)
            kids = self.kids[id(n)] = {id(c): c for c in self._children(n)}
            for c in kids.values():
                self.par[id(c)] = n
                stack.append((c, h, start))
        return out

    def _drop(self, top) -> list:
        """Remove ``top`` and its attached subtree as of the last boundary; return the nodes removed."""
        out, stack = [], [top]
        while stack:
            n = stack.pop()
            if self.att.pop(id(n), None) is None:
                continue
            self.att_ids.discard(n.id)
            out.append(n)
            stack.extend(self.kids.pop(id(n), {}).values())
        return out

    # --- one node's share ---
    def _share_of(self, n) -> tuple:
        f = self.fp[id(n)]
        v, hv, mv, mhv = n.value, n.host_value, n.mamba_value, n.mamba_host_value
        tier = v is None and (hv is None or any(c.parent is n and c.value is not None for c in n.children.values()))
        backup = hv is not None and self.cache.config.policy != "write_back" and n.parent is not self.root and \
            n.parent.host_value is None
        nv, nhv, nmv, nmhv = (-1 if v is None else len(v), -1 if hv is None else len(hv),
                              -1 if mv is None else len(mv), -1 if mhv is None else len(mhv))
        mlen = (nmv >= 0 and nmv != 1) or (nmhv >= 0 and nmhv != 1)
        dev = nv if nv >= 0 else 0
        prot = dev if nv >= 0 and n.full_lock_ref > 0 else 0
        mall = nmv if nmv >= 0 else 0
        mprot = mall if nmv >= 0 and n.mamba_lock_ref > 0 else 0
        hit = self.own.get(id(n))
        if hit is not None:
            src, lens = hit[0], hit[2]
            if src[0] is v and src[1] is hv and src[2] is mv and src[3] is mhv and src[4] is f and \
                    lens[0] == nv and lens[1] == nhv and lens[2] == nmv and lens[3] == nmhv:
                # the same lists and prefix as last time: the same slots and fingerprints
                return (tier, backup, mlen, dev, prot, mall, mprot, nv >= 0, nmv >= 0, nmhv >= 0, hit[1])
        want, m = f[6], f[7]
        owned = []  # (pool, slots, what they must hold or None)
        if v is not None:
            owned.append(self._kv_owned("device_kv", v, f, nv == len(want)))
        if hv is not None:
            owned.append(self._kv_owned("host_kv", hv, f, nhv == len(want)))
        if mv is not None:
            owned.append(("device_mamba", tuple(mv), (m,) * nmv))
        if mhv is not None:
            owned.append(("host_mamba", tuple(mhv), (m,) * nmhv))
        owned = tuple(owned)
        self.own[id(n)] = ((v, hv, mv, mhv, f), owned, (nv, nhv, nmv, nmhv))
        return (tier, backup, mlen, dev, prot, mall, mprot, nv >= 0, nmv >= 0, nmhv >= 0, owned)

    def _kv_owned(self, pool: str, slots: list, f: tuple, full: bool) -> tuple:
        """A node's owned entry in a KV pool: (pool, its slots, the fingerprints they must hold, or None when their
        number differs). A small pool's as tuples; a big pool's as the bytes of int64 arrays (compared by value as
        tuples are, read back as arrays without a copy, and nothing the garbage collector walks)."""
        if not self.big[pool]:
            return pool, tuple(slots), tuple(f[6]) if full else None
        arr = f[8]
        return pool, np.fromiter(slots, dtype=np.int64, count=len(slots)).tobytes(), (
            (b"" if arr is None else arr.tobytes()) if full else None)

    def _apply(self, n, s: tuple, sign: int, owned=None) -> None:
        """Add (``sign`` +1) or take out (-1) node ``n``'s share ``s``; its owned slots: ``owned`` (default: the
        share's own, ``s[10]``; a node whose share changes moves only the entries that differ)."""
        tier, backup, mlen, dev, prot, mall, mprot, full, mamba, host_m, own = s
        if tier or backup or mlen:
            bad = self.bad
            bad["tier"] += sign * tier
            bad["backup"] += sign * backup
            bad["mlen"] += sign * mlen
        sums = self.sums
        sums[0] += sign * dev
        sums[1] += sign * prot
        sums[2] += sign * mall
        sums[3] += sign * mprot
        mark, k = (set.add, 0) if sign > 0 else (set.discard, 1)
        if full:
            mark(self.want_full, n.id)
        if mamba:
            mark(self.want_m, n.id)
        if host_m:
            mark(self.host_m, n.id)
        # queued as (refs +1, refs -1, cnt +1, cnt -1, what the cnt +1 slots must hold): ``_flush`` applies them per
        # pool, every -1 before any +1
        q, big = self._q, self.big
        for pool, slots, want in own if owned is None else owned:
            queue = q[pool]
            if big[pool]:  # a big pool queues the tuples themselves (``_flush_arrays`` reads them as arrays)
                queue[k].append(slots)
                if want is not None:
                    queue[2 + k].append(slots)
                    if sign > 0:
                        queue[4].append(want)
                continue
            queue[k].extend(slots)
            if want is not None:
                queue[2 + k].extend(slots)
                if sign > 0:
                    queue[4].extend(want)

    def _releaf(self, n) -> None:
        cache, i = self.cache, id(n)
        readers = self.readers
        for j in self.read.pop(i, ()):
            r = readers[j]
            del r[i]
            if not r:
                del readers[j]
        for s, records in ((cache.evictable_full_device_leaves, self.leaf_dev),
                           (cache.evictable_full_host_leaves, self.leaf_host)):
            old = records.pop(i, None)
            if old is not None:
                self.bad["leaf"] -= old[0]
                self.bad["held"] -= old[1]
            if n in s:
                if records is self.leaf_dev:
                    b = n.value is None or n.full_lock_ref > 0 or any(c.value is not None
                                                                      for c in n.children.values())
                else:
                    b = n.value is not None or n.host_value is None or bool(n.host_ref_counter) or \
                        bool(n.host_mamba_ref_counter) or any(id(c) in self.att for c in n.children.values())
                rec = records[i] = (bool(b), i not in self.att)
                self.bad["leaf"] += rec[0]
                self.bad["held"] += rec[1]
        if (i in self.leaf_dev or i in self.leaf_host) and n.children:
            kids = self.read[i] = tuple({id(c) for c in n.children.values()})
            for j in kids:
                readers.setdefault(j, {})[i] = n
