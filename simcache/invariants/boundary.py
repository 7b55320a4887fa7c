"""The recorder's path: ``failing(cache, live)`` kept up to date from what each operation touched
(``BoundaryCheck``), falling back to the one-pass ``failing`` where it cannot be exact cheaply."""
from __future__ import annotations

import numpy as np

from ..node import TreeNode
from .boundary_state import BoundaryState
from .one_pass import _H0, failing
from .tracked import _HOSTED, _MOVED, _POOL_NAMES, _REKIDS, _TOUCHED, _VALUED, TrackedNode


class BoundaryCheck(BoundaryState):
    """``failing(cache, live)`` at every operation boundary, in time proportional to what the operation touched.

    It keeps the attached tree (children lists, prefix fingerprints) and each attached node's share of every
    invariant (flags, counter sums, the slots it owns and what they must hold), and at a boundary re-examines only
    the nodes written since the last one (``TrackedNode``), the nodes the recorder saw in events (``see``), their
    parents and children, and the subtrees whose place in the tree changed. Pool slots are compared vectorised.
    Where it cannot be exact cheaply (copies in flight, pools off the CPU) it answers with ``failing``."""

    # --- the check ---
    def failing(self, live=()) -> set[str]:
        """``failing(cache, live)``, from the state kept and what changed since the last call."""
        cache, root = self.cache, self.root
        touched = _TOUCHED | self.seen
        moved = set(_MOVED)
        near = _VALUED | self.seen  # whose parents to re-examine
        below = _HOSTED | self.seen  # whose children to re-examine
        for sink in (_TOUCHED, _MOVED, _VALUED, _HOSTED):
            sink.clear()
        self.seen = set()
        old_par = {id(n): self.par.get(id(n)) for group in (touched, moved) for n in group}
        rekids = set(_REKIDS)
        _REKIDS.clear()
        links, self.links = self.links, []
        # 1. the attached tree: walk from root along the paths to what moved (where it is now and where it was)
        marks: set[int] = set()
        down: dict[int, dict] = {}  # marked node -> its marked children (the walk's way down)

        def mark_path(x) -> None:  # x and its ancestors up to the root or an already marked node
            while x is not None and id(x) not in marks:
                marks.add(id(x))
                if x is root:
                    break
                p = x.parent
                if p is not None:
                    down.setdefault(id(p), {})[id(x)] = x
                x = p

        for n in moved:
            mark_path(n)
            mark_path(old_par.get(id(n)))
        # children whose link to a node may have changed, by node: through their parent pointer or the node's dict
        cands: dict[int, dict] = {}
        for n in moved:
            for p in (old_par.get(id(n)), n.parent):
                if p is not None:
                    cands.setdefault(id(p), {})[id(n)] = n
        for p, c in links:
            cands.setdefault(id(p), {})[id(c)] = c
            mark_path(p)
        ck = cache.child_key
        removed, added, visited = [], [], []
        if id(root) in marks:
            stack = [(root, _H0, 0)]
            while stack:
                n, h, start = stack.pop()
                visited.append(n)
                kids = self.kids.get(id(n))
                if kids is None or n in rekids:  # a new dict: all of it
                    new = {id(c): c for c in self._children(n)}
                    removed += [c for i, c in (kids or {}).items() if i not in new]
                    fresh = [c for i, c in new.items() if kids is None or i not in kids]
                    self.kids[id(n)] = kids = new
                else:  # the same dict: only the entries that may have changed
                    fresh = []
                    for i, c in cands.get(id(n), {}).items():
                        ok = c.parent is n and len(c.key) > 0 and n.children.get(ck(c.key)) is c
                        if ok and i not in kids:
                            kids[i] = c
                            fresh.append(c)
                        elif not ok and i in kids:
                            del kids[i]
                            removed.append(c)
                for c in fresh:
                    self.par[id(c)] = n
                    added.append((c, h, start))
                fresh_ids = {id(c) for c in fresh}
                for i, c in down.get(id(n), {}).items():
                    if i not in kids or i in fresh_ids:
                        continue
                    f0 = self.fp[i]
                    f = self._fp(c, h, start)
                    if f is f0 or (f[4], f[5]) == (f0[4], f0[5]):  # same prefix (a split changes a key only)
                        stack.append((c, f[4], f[5]))
                    else:  # its prefix changed: its whole subtree is fingerprinted again
                        removed.append(c)
                        added.append((c, h, start))
        changed = []
        for c in removed:
            changed += self._drop(c)
        for c, h, start in added:
            changed += self._subtree(c, h, start)
        for n in changed:
            if id(n) not in self.att:
                self.own.pop(id(n), None)
                self.par.pop(id(n), None)
                self.fp.pop(id(n), None)
                self.kids.pop(id(n), None)
            elif n.__class__ is TreeNode:
                n.__class__ = TrackedNode
        # 2. the shares of what changed, its parents (then and now) and children
        again: dict[int, object] = {id(n): n for n in visited}
        for group in (touched, moved, changed):
            for n in group:
                again[id(n)] = n
        for group in (near, moved, changed):
            for n in group:
                for p in (n.parent, old_par.get(id(n))):
                    if p is not None:
                        again[id(p)] = p
        for group in (below, moved, changed):
            for n in group:
                for c in self.kids.get(id(n), {}).values():
                    again[id(c)] = c
        for p, _ in links:  # a dict entry changed: its holder's leaf checks read it (held or attached or not)
            again[id(p)] = p
        readers = self.readers
        if readers:  # leaf-set members whose dicts list a child that changed (whatever its parent pointer says)
            for group in (touched, moved, changed):
                for n in group:
                    r = readers.get(id(n))
                    if r:
                        again.update(r)
        nodes = [n for n in again.values() if isinstance(n, TreeNode)]
        shares = [self._share_of(n) if id(n) in self.att and n is not root else None for n in nodes]
        coming: dict[int, object] = {}  # node -> the owned entries its new share adds (default: all)
        for n, new in zip(nodes, shares, strict=True):  # every old share out before any new one comes in
            old = self.share.get(id(n))
            if old is not None and not (new is not None and old[0] is n and old[1] == new):
                del self.share[id(n)]
                gone = old[1][10]
                if new is not None and old[0] is n:  # the same node: only the owned entries that changed move
                    was, now = gone, new[10]
                    if was is now or was == now:
                        gone = coming[id(n)] = ()
                    else:
                        gone = [e for e in was if e not in now]
                        coming[id(n)] = [e for e in now if e not in was]
                self._apply(old[0], old[1], -1, gone)
        for n, new in zip(nodes, shares, strict=True):
            if new is not None and id(n) not in self.share:
                self.share[id(n)] = (n, new)
                self._apply(n, new, +1, coming.get(id(n), new[10]))
            self._releaf(n)
        self._flush()
        pools = cache.pools.all()
        if any(p.streams is not None or p.inflight or p._np is None for p in pools.values()):
            return failing(cache, live, self.memo)  # copies in flight: read them as the named check does
        # 3. the answer
        bad: set[str] = set()
        att, att_ids = self.att, self.att_ids
        # the LRU lists hold what they should: then every member is attached (the wanted sets hold attached nodes
        # only) and the attachment check need not read them
        lru_ok = self.want_full == cache.full_lru_list.cache.keys() and \
            self.want_m == cache.mamba_lru_list.cache.keys() and cache.mamba_host_lru_list.cache.keys() <= self.host_m
        if self.bad["held"] or (not lru_ok and any(not lru.cache.keys() <= att_ids for lru in (
                cache.full_lru_list, cache.mamba_lru_list, cache.mamba_host_lru_list))) or \
                any(id(n) not in att for n in cache.ongoing_write_through.values()) or \
                any(id(n) not in att for n in cache.ongoing_load_back.values()) or \
                any(id(n) not in att for n, _ in cache.ongoing_backup.values()) or \
                any(id(v.last_host_node) not in att for v in cache.ongoing_prefetch.values()):
            bad.add("attachment")
        if self.bad["tier"]:
            bad.add("tier_monotonicity")
        if self.bad["backup"]:
            bad.add("backup_continuity")
        if any(self.shared.values()) and self._exp_shared():
            return failing(cache, live, self.memo)  # a slot owned twice: the named check's way
        differs = [name for name in _POOL_NAMES if self.big[name] and self.kv_differs(name)]  # (kept up to date)
        if self.bad["mlen"] or differs:
            bad.add("kv_content")
        else:
            want_bytes = self.want_bytes
            for name in _POOL_NAMES:
                if self.owned[name] and not self.big[name]:
                    want = want_bytes[name]
                    if want is None:
                        want = want_bytes[name] = self.want[name].tobytes()
                    if (pools[name]._np & self.mask[name]).tobytes() != want:
                        bad.add("kv_content")
                        break
        if self.bad["leaf"]:
            bad.add("leaf_sets")
        if not lru_ok:
            bad.add("lru_membership")
        dev, prot, mall, mprot = self.sums
        if (cache.full_evictable_size_, cache.full_protected_size_) != (dev - prot, prot) or \
                (cache.mamba_evictable_size_, cache.mamba_protected_size_) != (mall - mprot, mprot):
            bad.add("size_counters")
        if any(p.double_frees for p in pools.values()):
            bad.add("no_double_free")
        extra = None
        for name in _POOL_NAMES:
            if self.big[name]:
                loose = set(np.flatnonzero(self.loose_mask[name]).tolist()) if self.loose_n[name] else ()
            else:
                loose = self.loose[name]
            if loose:
                if extra is None:
                    extra = _other_refs(cache, live)
                if not loose <= extra[name]:
                    bad.add("no_leak")
                    break
        return bad

def _other_refs(cache, live) -> dict[str, set[int]]:
    """The slots ``state.referenced_slots`` counts besides the attached nodes' own."""
    refs: dict[str, set[int]] = {p: set() for p in _POOL_NAMES}
    for r in live:
        refs["device_kv"].update(r.kv[r.cache_protected_len : len(r.tokens)])
        refs["device_mamba"].update(s for s in (r.mamba_pool_idx, r.track_buffer) if s is not None)
    for _, _, host, op in cache.ongoing_prefetch.values():
        refs["host_kv"].update(host)
        for t in op.mamba or ():
            refs["host_mamba"].update(t.host_indices or [])
    for page in cache.controller.host_mem_release_queue:
        refs["host_kv"].update(page)
    return refs
