"""The pools' side of the boundary check's state: per slot, how many attached nodes own it and what it must hold, the
used slots nobody of the tree refers to, and the kv check's mask and wanted content (``PoolShares``, a base of
``boundary_state.BoundaryState``, which queues each node's owned slots here)."""
from __future__ import annotations

import numpy as np

from ..slot_arrays import _has_repeats
from .tracked import _POOL_NAMES


class PoolShares:
    """Per-pool accounting of the attached nodes' owned slots, brought up to date at each boundary (``_flush``) from
    the share changes queued by ``BoundaryState._apply`` and the pools' alloc and free events."""

    def pool_event(self, pool: str, what: str, slots: tuple) -> None:
        """A pool's alloc or free: its slots' free counts changed (``loose`` is brought up to date at the
        boundary, from the pool's counts). A big pool's events are kept as arrays: the pool's own index array of
        the slots where it made one (``SlotPool.event_idx``), else the slots."""
        if what == "alloc" or what == "free":
            got = self._events.get(pool)
            if got is not None:
                if self.big[pool]:
                    idx = self.pools[pool].event_idx
                    got.append(idx if idx is not None and len(idx) == len(slots) else slots)
                else:
                    got += slots

    def _build_pools(self, pools: dict) -> None:
        """The per-slot state of ``pools`` (by name), empty: the attached nodes' shares are added after."""
        self.pools = pools
        # per pool: how many attached nodes own each slot (all, and those whose slots must hold fingerprints), what
        # each such slot must hold, the used slots nobody of the tree refers to (``loose``), the slots owned twice.
        # A small pool keeps them in plain lists (an operation changes a few dozen slots: per-slot Python beats a
        # numpy call); a big one (``pools._BIG``, free counts in numpy too) in arrays, moved per operation in a few
        # numpy calls, since a long prompt's request moves thousands of slots (``_flush_arrays``)
        self.big = {p: pools[p]._free_count.__class__ is not list for p in _POOL_NAMES}
        self.kv_lists = not (self.big["device_kv"] and self.big["host_kv"])  # a KV pool's shares need int lists
        self.refs, self.cnt, self.exp, self.loose = {}, {}, {}, {}
        self.loose_mask: dict[str, np.ndarray] = {}  # a big pool's loose slots, and how many there are
        self.loose_n: dict[str, int] = {}
        for p in _POOL_NAMES:
            size, free = pools[p].size, pools[p]._free_count
            if self.big[p]:
                self.refs[p], self.cnt[p], self.exp[p] = (np.zeros(size, dtype=np.int64) for _ in range(3))
                self.loose[p] = set()  # (kept in ``loose_mask`` instead)
                self.loose_mask[p] = free == 0
                self.loose_n[p] = int(np.count_nonzero(self.loose_mask[p]))
            else:
                self.refs[p], self.cnt[p], self.exp[p] = [0] * size, [0] * size, [0] * size
                self.loose[p] = {i for i, f in enumerate(free) if f == 0}
        self.multi = dict.fromkeys(_POOL_NAMES, 0)
        self.shared = dict.fromkeys(_POOL_NAMES, False)
        # what the kv check compares a pool's data with, in one vectorised step: ``data & mask == want`` where
        # mask is all ones on the owned slots and zero elsewhere, want the fingerprints there (its bytes kept)
        self.mask = {p: np.zeros(pools[p].size, dtype=np.int64) for p in _POOL_NAMES}
        self.want = {p: np.zeros(pools[p].size, dtype=np.int64) for p in _POOL_NAMES}
        self.want_bytes = {p: self.want[p].tobytes() for p in _POOL_NAMES}  # None: changed, made when read
        # the same memory, written one slot at a time (an item write through a memoryview is one C call)
        self.mask_mv = {p: memoryview(self.mask[p]).cast("B").cast("q") for p in _POOL_NAMES}
        self.want_mv = {p: memoryview(self.want[p]).cast("B").cast("q") for p in _POOL_NAMES}
        self.owned = dict.fromkeys(_POOL_NAMES, 0)  # slots with an owner that says what they hold
        self._events: dict[str, list] = {p: [] for p in _POOL_NAMES}  # slots allocated / freed since the last flush
        # share changes since the last flush, per pool: refs +1, refs -1, cnt +1 (with what the slots must hold), -1
        self._q: dict[str, tuple] = {p: ([], [], [], [], []) for p in _POOL_NAMES}
        # a big pool's kv check reads only the slots whose data (``SlotPool.on_write``) or wanted content changed
        # since the last boundary (``dirty``; ``None``: all of them) and keeps which owned slots differ (``kv_bad``,
        # one flag per slot of a big pool)
        self.kv_bad: dict[str, np.ndarray] = {p: np.zeros(pools[p].size if self.big[p] else 0, dtype=bool)
                                              for p in _POOL_NAMES}
        self.kv_any = dict.fromkeys(_POOL_NAMES, False)  # whether one of them is set
        self._stamp: dict[str, np.ndarray] = {}  # a big pool's scratch for ``_repeats``
        # a big pool's queued slot and content tuples as arrays (``_arr``): id -> (the tuple, its array), each made
        # once (a share's slots are queued when it comes and again when it goes; its fingerprints come as arrays)
        self._arrs: dict[int, tuple] = {}
        self._arrs_n = 0  # how many numbers they hold, bounded by ``_arrs_max``
        self._arrs_max = _ARRS_PER_SLOT * sum(pools[p].size for p in _POOL_NAMES if self.big[p]) + _ARRS_EXTRA
        self.dirty: dict[str, list | None] = {p: [] for p in _POOL_NAMES}
        for p in _POOL_NAMES:
            if self.big[p]:
                pools[p].on_write = self._written
                self.dirty[p] = None

    def _written(self, pool, idx) -> None:
        """``SlotPool.on_write``: the data of these slots changed (a copy of this cache's pool, in a checkpoint or
        a replay, shares the hook and is ignored)."""
        name = pool.name
        if self.pools.get(name) is not pool:
            return
        dirty = self.dirty[name]
        if dirty is not None:
            dirty.append(idx)
            if len(dirty) > 4096:  # a boundary nobody checks (the check fell back, or stopped): read all, later
                self.dirty[name] = None

    def kv_differs(self, name: str) -> bool:
        """A big pool: whether an owned slot holds other than what it must, from the slots that changed."""
        pool, dirty = self.pools[name], self.dirty[name]
        mask, want, bad = self.mask[name], self.want[name], self.kv_bad[name]
        if dirty is None:
            idx = np.flatnonzero(mask)
            bad[:] = False
        elif dirty:  # (a slot listed twice is judged twice, alike)
            idx = np.concatenate(dirty) if len(dirty) > 1 else dirty[0]
        else:
            return self.kv_any[name]
        self.dirty[name] = []
        bad[idx] = (pool._np[idx] & mask[idx]) != want[idx]
        got = self.kv_any[name] = bool(bad.any())
        return got

    def _flush(self) -> None:
        """Apply the queued share changes (every -1 before any +1) and pool events to the per-slot state.

        The kv check's mask and wanted content follow each slot as its count moves (``_rewant``'s rule: all bits
        and ``exp`` where an attached node owns the slot, zero elsewhere), written one item at a time through a
        memoryview: an operation moves a few dozen slots, and two numpy calls per pool cost more than that. A big
        pool's are moved with numpy instead (``_flush_arrays``)."""
        pools = self.cache.pools.all()
        for pool, (rp, rm, cp, cm, cw) in self._q.items():
            events = self._events[pool]
            if not (rp or rm or cp or cm or events):
                continue
            if self.big[pool]:
                self._flush_arrays(pool, pools[pool])
                continue
            refs, cnt, exp = self.refs[pool], self.cnt[pool], self.exp[pool]
            mask, want = self.mask_mv[pool], self.want_mv[pool]
            multi = self.multi[pool]
            for i in rm:
                refs[i] -= 1
            owned = self.owned[pool]
            for i in cm:
                c = cnt[i] = cnt[i] - 1
                if c == 1:
                    multi -= 1
                elif c == 0:
                    owned -= 1
                if c > 0:
                    mask[i], want[i] = -1, exp[i]
                else:
                    mask[i] = want[i] = 0
            for i in rp:
                refs[i] += 1
            for i, w in zip(cp, cw, strict=True):
                c = cnt[i] = cnt[i] + 1
                if c == 1:
                    owned += 1
                elif c == 2:
                    multi += 1
                    self.shared[pool] = True  # two owners: ``exp`` holds one of theirs; rebuilt once they part
                exp[i] = w
                if c > 0:
                    mask[i], want[i] = -1, w
                else:
                    mask[i] = want[i] = 0
            if cm or cp:
                self.want_bytes[pool] = None  # made again when the check reads it
            self.multi[pool], self.owned[pool] = multi, owned
            free, loose = pools[pool]._free_count, self.loose[pool]
            for group in (rm, rp, events):
                for i in group:
                    if free[i] == 0 and refs[i] == 0:
                        loose.add(i)
                    else:
                        loose.discard(i)
            for q in (rp, rm, cp, cm, cw, events):
                q.clear()

    def _flush_arrays(self, pool: str, slot_pool) -> None:
        """``_flush`` of one big pool in numpy, with the loops' exact effect: a slot listed several times moves as
        many times (its count crosses 1 and 2 at most once each way, which is what ``owned`` and ``multi`` count),
        the last wanted value listed for a slot is the one it keeps, and a listed slot is loose or not by its final
        free count and references (``loose_mask``, with ``loose_n`` its number of loose slots)."""
        rp, rm, cp, cm, cw = self._q[pool]  # (lists of tuples: each a share's slots or contents)
        events = self._events[pool]
        refs, cnt, exp, mask, want = self.refs[pool], self.cnt[pool], self.exp[pool], self.mask[pool], self.want[pool]
        changed = []
        listed = []
        rep, cat = self._repeats, self._cat
        if rm:
            i = cat(rm)
            listed.append(i)
            twice = rep(pool, i)
            if twice:
                np.subtract.at(refs, i, 1)
            else:
                refs[i] -= 1
        if cm:
            if cm == rm:  # (usually the same slots: those whose content a share knows)
                u = i
            else:
                u = cat(cm)
                twice = rep(pool, u)
            c0 = cnt[u]
            if twice:
                u, k = np.unique(u, return_counts=True)
                c0 = cnt[u]
                c1 = c0 - k
                self.multi[pool] -= int(np.count_nonzero((c0 >= 2) & (c1 <= 1)))
                self.owned[pool] -= int(np.count_nonzero((c0 >= 1) & (c1 <= 0)))
            else:  # each slot once: it moves by one
                c1 = c0 - 1
                self.multi[pool] -= int(np.count_nonzero(c0 == 2))
                self.owned[pool] -= int(np.count_nonzero(c0 == 1))
            cnt[u] = c1
            on = c1 > 0
            mask[u] = np.where(on, -1, 0)
            want[u] = np.where(on, exp[u], 0)
            changed.append(u)
        if rp:
            i = cat(rp)
            listed.append(i)
            twice = rep(pool, i)
            if twice:
                np.add.at(refs, i, 1)
            else:
                refs[i] += 1
        if cp:
            w = cat(cw)
            if cp == rp:
                u = i
            else:
                u = cat(cp)
                twice = rep(pool, u)
            if twice:
                u, first, k = np.unique(u[::-1], return_index=True, return_counts=True)
                w = w[len(w) - 1 - first]  # each slot's last wanted value
                c0 = cnt[u]
                c1 = c0 + k
                self.owned[pool] += int(np.count_nonzero((c0 <= 0) & (c1 >= 1)))
                twice = int(np.count_nonzero((c0 <= 1) & (c1 >= 2)))
            else:
                c0 = cnt[u]
                c1 = c0 + 1
                self.owned[pool] += int(np.count_nonzero(c0 == 0))
                twice = int(np.count_nonzero(c0 == 1))
            if twice:
                self.multi[pool] += twice
                self.shared[pool] = True  # two owners: ``exp`` holds one of theirs; rebuilt once they part
            cnt[u] = c1
            exp[u] = w
            on = c1 > 0
            mask[u] = np.where(on, -1, 0)
            want[u] = np.where(on, w, 0)
            changed.append(u)
        if changed:
            self.want_bytes[pool] = None
            if self.dirty[pool] is not None:
                self.dirty[pool] += changed
        if events:
            listed += [e if e.__class__ is np.ndarray else _ix(e) for e in events]
        if listed:
            s = np.concatenate(listed) if len(listed) > 1 else listed[0]
            lm = self.loose_mask[pool]
            now = (slot_pool._free_count[s] == 0) & (refs[s] == 0)  # (alike wherever a slot is listed)
            flip = lm[s] != now
            if flip.any():  # (rarely: a request's slots are owned by the boundary that follows its allocation)
                f = np.unique(s[flip])  # each slot whose state changes, once
                now = (slot_pool._free_count[f] == 0) & (refs[f] == 0)
                self.loose_n[pool] += int(np.count_nonzero(now)) - int(np.count_nonzero(lm[f]))
                lm[f] = now
        for q in (rp, rm, cp, cm, cw, events):
            q.clear()

    def _repeats(self, pool: str, idx: np.ndarray) -> bool:
        """Whether a slot occurs twice in ``idx``: by hashing a short one, by this pool's scratch array for a long
        one (a request's thousands: one numpy step costs less than hashing them)."""
        if len(idx) < 256:
            return len(set(idx.tolist())) < len(idx)
        return _has_repeats(idx, self._scratch(pool))

    def _arr(self, t) -> np.ndarray:
        """A queued entry's numbers as an int64 array: a big KV pool's bytes read in place; a tuple of ints made into
        an array once while it is kept (by identity: the entry holds the tuple, so its id stays its own), all of them
        dropped when they hold more than ``_arrs_max`` numbers."""
        if t.__class__ is bytes:
            return np.frombuffer(t, dtype=np.int64)
        hit = self._arrs.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        a = np.fromiter(t, dtype=np.int64, count=len(t))
        self._known(t, a)
        return a

    def _known(self, t: tuple, a: np.ndarray) -> None:
        """Keep ``a`` as tuple ``t``'s array (the same numbers)."""
        if self._arrs_n + len(t) > self._arrs_max:
            self._arrs.clear()
            self._arrs_n = 0
        self._arrs[id(t)] = (t, a)
        self._arrs_n += len(t)

    def _cat(self, tuples: list) -> np.ndarray:
        """The queued tuples' numbers, in order, as one int64 array."""
        if len(tuples) == 1:
            return self._arr(tuples[0])
        return np.concatenate([self._arr(t) for t in tuples])

    def _scratch(self, pool: str) -> np.ndarray:
        """A big pool's scratch array, one entry per slot (``_has_repeats``)."""
        stamp = self._stamp.get(pool)
        if stamp is None:
            stamp = self._stamp[pool] = np.zeros(self.pools[pool].size, dtype=np.int64)
        return stamp

    def _rewant(self, pool: str, slots) -> None:
        """The kv check's mask and wanted content on ``slots``, from ``cnt`` and ``exp``."""
        cnt, exp, mask, want = self.cnt[pool], self.exp[pool], self.mask_mv[pool], self.want_mv[pool]
        for i in slots:
            if cnt[i] > 0:
                mask[i], want[i] = -1, exp[i]
            else:
                mask[i] = want[i] = 0
        self.want_bytes[pool] = None
        if self.big[pool] and self.dirty[pool] is not None:
            self.dirty[pool].append(_ix(list(slots)))

    def _exp_shared(self) -> bool:
        """Whether a slot is owned by two attached nodes now; once none is, ``exp`` is rebuilt from the shares."""
        if any(self.multi[name] for name in _POOL_NAMES if self.shared[name]):
            return True
        for name in _POOL_NAMES:
            if self.shared[name]:
                exp, touched = self.exp[name], set()
                for _, s in self.share.values():
                    for pool, slots, want in s[10]:
                        if pool == name and want is not None:
                            slots = _ints(slots)
                            for i, w in zip(slots, _ints(want), strict=True):
                                exp[i] = w
                            touched.update(slots)
                if touched:
                    self._rewant(name, touched)
                self.shared[name] = False
        return False


_ARRS_PER_SLOT, _ARRS_EXTRA = 4, 65536  # the kept arrays' bound: this many numbers per slot of the big pools, + this


def _ints(x):
    """An owned entry's slots or contents as ints: a tuple as it is, a big KV pool's bytes read back."""
    return np.frombuffer(x, dtype=np.int64).tolist() if x.__class__ is bytes else x


def _ix(slots) -> np.ndarray:
    return np.fromiter(slots, dtype=np.int64, count=len(slots))
