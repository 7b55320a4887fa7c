"""Named invariants of the cache, each a function ``cache, live requests -> problem text or None``.

- ``attachment`` (I0): every node in a leaf set, an LRU list or an in-flight map is attached to the tree.
- ``tier_monotonicity`` (I1, I3): an attached evicted node is backed up and its attached descendants are evicted.
- ``backup_continuity`` (I2, write-through policies): an attached backed-up node's parent is backed up or root.
- ``leaf_sets``: the device set holds only unlocked device nodes with no child on device; the host set only
  host-only, unreferenced nodes with no attached children.
- ``lru_membership``: the full LRU holds exactly the attached device nodes, the Mamba LRU exactly the attached
  nodes with a device Mamba state, the host-Mamba LRU only attached nodes with a host Mamba state.
- ``size_counters``: evictable + protected counters equal a recount over the attached tree.
- ``no_double_free``: no pool has freed a slot that was already free.
- ``no_leak``: every allocated slot is referenced by an attached node, a live request or an in-flight copy.
- ``kv_content``: every attached node's device and host KV hold the fingerprints of its prefix.

``check_all`` runs them; ``BOUNDARY_ONLY`` ones are meaningful only between operations (inside one, slots are in
transit), the others are checked after every micro-step.
"""
from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import itemgetter, not_

from .node import TreeNode
from .pools import kv_fingerprints, mamba_fingerprint
from .state import attached_ids, held_by, holder_map, referenced_slots


def _name(n) -> str:
    return f"node {n.id} [{','.join(map(str, n.key))}]"


def _tree(cache) -> list:
    """The attached nodes, each once, in ``state.dfs``'s order (preorder, siblings sorted by key), following only
    the links whose parent pointer and child key agree (``attached_ids``' rule). ``dfs`` follows every dict entry
    that names an attached node, so a node also listed by a node that is not its parent would be counted twice
    there (and an attached ancestor listed below itself would never end)."""
    root, ck = cache.root_node, cache.child_key
    out, stack = [], [root]
    while stack:
        n = stack.pop()
        if n is not root:
            out.append(n)
        kids = sorted((c for k, c in n.children.items() if c.parent is n and len(c.key) > 0 and ck(c.key) == k),
                      key=lambda c: c.key)
        stack.extend(reversed(kids))
    return out


def attachment(cache, live) -> str | None:
    att = attached_ids(cache)
    for _, node in held_by(cache):
        if id(node) not in att:
            return f"{_name(node)} is detached but still held by {', '.join(holder_map(cache)[node.id])}"
    return None


def tier_monotonicity(cache, live) -> str | None:
    for n in _tree(cache):
        if n.value is None:
            if n.host_value is None:
                return f"{_name(n)} is in the tree but on neither tier"
            for c in n.children.values():
                if c.parent is n and c.value is not None:
                    return f"{_name(n)} is evicted but its child {_name(c)} is on device"
    return None


def backup_continuity(cache, live) -> str | None:
    if cache.config.policy == "write_back":
        return None
    for n in _tree(cache):
        p = n.parent
        if n.host_value is not None and p is not cache.root_node and p.host_value is None:
            return f"{_name(n)} is backed up but its parent {_name(p)} is not"
    return None


def leaf_sets(cache, live) -> str | None:
    att = attached_ids(cache)
    for n in cache.evictable_full_device_leaves:
        if n.value is None or n.full_lock_ref > 0 or any(c.value is not None for c in n.children.values()):
            return f"{_name(n)} is in evictable_full_device_leaves but is not an unlocked device leaf"
    for n in cache.evictable_full_host_leaves:
        kids = [c for c in n.children.values() if id(c) in att]
        if n.value is not None or n.host_value is None or n.host_ref_counter or n.host_mamba_ref_counter or kids:
            return f"{_name(n)} is in evictable_full_host_leaves but is not an unreferenced host leaf"
    return None


def lru_membership(cache, live) -> str | None:
    nodes = _tree(cache)
    want_full = {n.id for n in nodes if n.value is not None}
    have_full = set(cache.full_lru_list.cache)
    if want_full != have_full:
        return _diff("full_lru_list", want_full, have_full)
    want_m = {n.id for n in nodes if n.mamba_value is not None}
    have_m = set(cache.mamba_lru_list.cache)
    if want_m != have_m:
        return _diff("mamba_lru_list", want_m, have_m)
    host_m = {n.id for n in nodes if n.mamba_host_value is not None}
    extra = set(cache.mamba_host_lru_list.cache) - host_m
    if extra:
        return f"mamba_host_lru_list holds node(s) {sorted(extra)} that have no attached host Mamba state"
    return None


def _diff(name, want, have) -> str:
    missing, extra = sorted(want - have), sorted(have - want)
    parts = ([f"misses node(s) {missing}"] if missing else []) + ([f"holds extra node(s) {extra}"] if extra else [])
    return f"{name} {' and '.join(parts)}"


def size_counters(cache, live) -> str | None:
    nodes = _tree(cache)
    dev = sum(len(n.value) for n in nodes if n.value is not None)
    prot = sum(len(n.value) for n in nodes if n.value is not None and n.full_lock_ref > 0)
    if (cache.full_evictable_size_, cache.full_protected_size_) != (dev - prot, prot):
        return (f"full counters evictable={cache.full_evictable_size_} protected={cache.full_protected_size_}, "
                f"recount {dev - prot} and {prot}")
    mam = [n for n in nodes if n.mamba_value is not None]
    mprot = sum(len(n.mamba_value) for n in mam if n.mamba_lock_ref > 0)
    mall = sum(len(n.mamba_value) for n in mam)
    if (cache.mamba_evictable_size_, cache.mamba_protected_size_) != (mall - mprot, mprot):
        return (f"mamba counters evictable={cache.mamba_evictable_size_} protected={cache.mamba_protected_size_}, "
                f"recount {mall - mprot} and {mprot}")
    return None


def no_double_free(cache, live) -> str | None:
    for name, p in cache.pools.all().items():
        if p.double_frees:
            d = p.double_frees[0]
            return f"{name} slot(s) {list(d.slots)} freed twice (in {' <- '.join(d.stack) or 'the driver'})"
    return None


def no_leak(cache, live) -> str | None:
    refs = referenced_slots(cache, live, _tree(cache))
    for name, p in cache.pools.all().items():
        leaked = p.accounting(refs[name]).leaked
        if leaked:
            return f"{name} slot(s) {list(leaked)} are allocated but nobody refers to them"
    return None


def kv_content(cache, live) -> str | None:
    pools = cache.pools
    for n in _tree(cache):
        prefix = cache._node_prefix_tokens(n)
        want = kv_fingerprints(prefix, start=len(prefix) - len(n.key))
        for label, slots, pool in (("device", n.value, pools.device_kv), ("host", n.host_value, pools.host_kv)):
            if slots is not None and len(slots) == len(want) and pool.read(slots) != want:
                return f"{_name(n)}: {label} KV does not hold what was written for its prefix"
        m = mamba_fingerprint(prefix)
        for label, slots, pool in (("device", n.mamba_value, pools.device_mamba),
                                   ("host", n.mamba_host_value, pools.host_mamba)):
            if slots is not None and pool.read(slots) != [m]:
                return f"{_name(n)}: {label} Mamba state does not match its prefix"
    return None


INVARIANTS: dict[str, Callable] = dict(
    attachment=attachment, tier_monotonicity=tier_monotonicity, backup_continuity=backup_continuity,
    leaf_sets=leaf_sets, lru_membership=lru_membership, size_counters=size_counters,
    no_double_free=no_double_free, no_leak=no_leak, kv_content=kv_content,
)
BOUNDARY_ONLY = frozenset({"no_leak", "kv_content"})


def check_all(cache, live=(), names=None) -> dict[str, str | None]:
    """Run the named invariants (default: all) -> name -> problem or None."""
    return {name: INVARIANTS[name](cache, live) for name in (names or INVARIANTS)}


# --- the fast path: which invariants fail, in one pass over the tree ------------------------------------------

_H0, _MUL = 0x9E3779B97F4A7C15, 0x100000001B3
_M = (1 << 62) - 1


def _attached_nodes(cache, memo: dict) -> list:
    """(node, its key's KV fingerprints, its prefix's Mamba fingerprint) for every attached node, any order.

    Fingerprints follow ``pools.kv_fingerprints`` (a rolling hash over the whole prefix), carried down the tree
    instead of recomputed from the root for every node, and kept in ``memo`` while a node's key and parent prefix
    stay the same."""
    root, child_key = cache.root_node, cache.child_key
    out, stack = [], [(root, _H0, 0)]
    while stack:
        n, h, start = stack.pop()
        for k, c in n.children.items():
            key = c.key
            if c.parent is n and len(key) > 0 and child_key(key) == k:
                m = memo.get(id(c))
                if m is None or m[0] is not c or m[1] is not key or m[2] != h or m[3] != start:
                    want, hc, i = [], h, start
                    for t in key:
                        hc = ((hc ^ (int(t) & 0xFFFFFFFF)) * _MUL + i) & _M
                        want.append(hc)
                        i += 1
                    m = memo[id(c)] = (c, key, h, start, want, hc, i, ((hc if i else 0) * 31 + i + 7) & _M)
                out.append((c, m[4], m[7]))
                stack.append((c, m[5], m[6]))
    return out


def _data_differs(pool, slots: list[int], want: list[int]) -> bool:
    if not slots:
        return False
    if pool.streams is not None or pool.inflight:  # copies in flight: read as the named check does (they land)
        return pool.read(slots) != want
    data = pool.data.tolist()
    got = itemgetter(*slots)(data)
    return (list(got) if len(slots) > 1 else [got]) != want


def failing(cache, live=(), memo: dict | None = None) -> set[str]:
    """The names of the invariants that fail now: ``{n for n, p in check_all(cache, live).items() if p}``, computed
    in one pass (the recorder's check at every operation boundary; ``check_all`` then words only the new ones).
    ``memo``: a dict kept between calls on the same cache (fingerprints of unchanged nodes)."""
    bad: set[str] = set()
    nodes = _attached_nodes(cache, {} if memo is None else memo)
    att = {id(cache.root_node)}
    att.update(id(n) for n, _, _ in nodes)
    root = cache.root_node
    att_ids = {n.id for n, _, _ in nodes}
    att_ids.add(root.id)
    # LRU lists are keyed by node id (ids are unique), so a key test is a membership test; the rest are small
    if any(not lru.cache.keys() <= att_ids for lru in (cache.full_lru_list, cache.mamba_lru_list,
                                                        cache.mamba_host_lru_list)) \
            or any(id(n) not in att for name, n in held_by(cache, lrus=False)):
        bad.add("attachment")
    write_back = cache.config.policy == "write_back"
    dev = prot = mall = mprot = 0
    want_full, want_m, host_m = set(), set(), set()
    slots = {name: [] for name in ("device_kv", "host_kv", "device_mamba", "host_mamba")}
    wants = {name: [] for name in slots}
    for n, want, m in nodes:
        v, hv, mv, mhv = n.value, n.host_value, n.mamba_value, n.mamba_host_value
        if v is None:
            if hv is None or any(c.parent is n and c.value is not None for c in n.children.values()):
                bad.add("tier_monotonicity")
        else:
            want_full.add(n.id)
            dev += len(v)
            if n.full_lock_ref > 0:
                prot += len(v)
            if len(v) == len(want):
                slots["device_kv"] += v
                wants["device_kv"] += want
        if hv is not None:
            if not write_back and n.parent is not root and n.parent.host_value is None:
                bad.add("backup_continuity")
            if len(hv) == len(want):
                slots["host_kv"] += hv
                wants["host_kv"] += want
        if mv is not None:
            want_m.add(n.id)
            mall += len(mv)
            if n.mamba_lock_ref > 0:
                mprot += len(mv)
            if len(mv) != 1:
                bad.add("kv_content")
            slots["device_mamba"] += mv
            wants["device_mamba"].append(m)
        if mhv is not None:
            host_m.add(n.id)
            if len(mhv) != 1:
                bad.add("kv_content")
            slots["host_mamba"] += mhv
            wants["host_mamba"].append(m)
    pools = cache.pools
    if "kv_content" not in bad and any(_data_differs(getattr(pools, name), slots[name], wants[name])
                                       for name in slots):
        bad.add("kv_content")
    for n in cache.evictable_full_device_leaves:
        if n.value is None or n.full_lock_ref > 0 or any(c.value is not None for c in n.children.values()):
            bad.add("leaf_sets")
    for n in cache.evictable_full_host_leaves:
        if n.value is not None or n.host_value is None or n.host_ref_counter or n.host_mamba_ref_counter or \
                any(id(c) in att for c in n.children.values()):
            bad.add("leaf_sets")
    if want_full != cache.full_lru_list.cache.keys() or want_m != cache.mamba_lru_list.cache.keys() or \
            not cache.mamba_host_lru_list.cache.keys() <= host_m:
        bad.add("lru_membership")
    if (cache.full_evictable_size_, cache.full_protected_size_) != (dev - prot, prot) or \
            (cache.mamba_evictable_size_, cache.mamba_protected_size_) != (mall - mprot, mprot):
        bad.add("size_counters")
    if any(p.double_frees for p in pools.all().values()):
        bad.add("no_double_free")
    refs = referenced_slots(cache, live, [n for n, _, _ in nodes])
    for name, p in pools.all().items():
        used = set(compress(range(p.size), map(not_, p._free_count)))
        if used and not used <= set(refs[name]):
            bad.add("no_leak")
            break
    return bad


# --- the recorder's path: the same answer kept up to date from what each operation touched -----------------------

_UNTRACKED = frozenset({"hit_count", "last_access_time", "hash_value"})  # no invariant reads them
_STRUCTURE = frozenset({"parent", "key", "children"})
_TOUCHED: set = set()  # tracked nodes whose fields were written since the last boundary check drained them
_MOVED: set = set()  # ... whose parent, key or children were replaced
_REKIDS: set = set()  # ... whose children dict was replaced
_VALUED: set = set()  # ... whose device KV changed (their parents' checks read it)
_HOSTED: set = set()  # ... whose host KV changed (their children's checks read it)


class TrackedNode(TreeNode):
    """A ``TreeNode`` that notes every field written (the recorder switches the nodes it sees to this class, so a
    boundary check re-examines only what an operation touched). Same slots, same behaviour otherwise."""

    __slots__ = ()

    def __setattr__(self, name, value, _set=object.__setattr__):
        _set(self, name, value)
        if name in _STRUCTURE:
            _MOVED.add(self)
            if name == "children":
                _REKIDS.add(self)
        elif name not in _UNTRACKED:
            _TOUCHED.add(self)
            if name == "value":
                _VALUED.add(self)
            elif name == "host_value":
                _HOSTED.add(self)


_POOL_NAMES = ("device_kv", "host_kv", "device_mamba", "host_mamba")


class BoundaryCheck:
    """``failing(cache, live)`` at every operation boundary, in time proportional to what the operation touched.

    It keeps the attached tree (children lists, prefix fingerprints) and each attached node's share of every
    invariant (flags, counter sums, the slots it owns and what they must hold), and at a boundary re-examines only
    the nodes written since the last one (``TrackedNode``), the nodes the recorder saw in events (``see``), their
    parents and children, and the subtrees whose place in the tree changed. Pool slots are compared vectorised.
    Where it cannot be exact cheaply (copies in flight, pools off the CPU) it answers with ``failing``."""

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

    def pool_event(self, pool: str, what: str, slots: tuple) -> None:
        """A pool's alloc or free: its slots' free counts changed (``loose`` is brought up to date at the
        boundary, from the pool's counts)."""
        if what == "alloc" or what == "free":
            got = self._events.get(pool)
            if got is not None:
                got += slots

    def relinked(self, parent, child) -> None:
        """``parent.children``'s entry for ``child`` changed (attach, detach: ``child`` entered or left it)."""
        for n in (parent, child):
            if n.__class__ is TreeNode:
                n.__class__ = TrackedNode
        self.links.append((parent, child))
        _MOVED.add(child)

    # --- the state ---
    def _build(self) -> None:
        import numpy as np

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
        pools = cache.pools.all()
        # per pool, in plain lists (an operation changes a few dozen slots: per-slot Python beats a numpy call):
        # how many attached nodes own each slot (all, and those whose slots must hold fingerprints), what each
        # such slot must hold, the used slots nobody of the tree refers to (``loose``), the slots owned twice
        self.refs = {p: [0] * pools[p].size for p in _POOL_NAMES}
        self.cnt = {p: [0] * pools[p].size for p in _POOL_NAMES}
        self.exp = {p: [0] * pools[p].size for p in _POOL_NAMES}
        self.loose = {p: {i for i, f in enumerate(pools[p]._free_count) if f == 0} for p in _POOL_NAMES}
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
        want, hc, i = [], h, start
        for t in key:
            hc = ((hc ^ (int(t) & 0xFFFFFFFF)) * _MUL + i) & _M
            want.append(hc)
            i += 1
        f = self.fp[id(c)] = (c, h, start, key, hc, i, want, ((hc if i else 0) * 31 + i + 7) & _M)
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
            owned.append(("device_kv", tuple(v), tuple(want) if nv == len(want) else None))
        if hv is not None:
            owned.append(("host_kv", tuple(hv), tuple(want) if nhv == len(want) else None))
        if mv is not None:
            owned.append(("device_mamba", tuple(mv), (m,) * nmv))
        if mhv is not None:
            owned.append(("host_mamba", tuple(mhv), (m,) * nmhv))
        owned = tuple(owned)
        self.own[id(n)] = ((v, hv, mv, mhv, f), owned, (nv, nhv, nmv, nmhv))
        return (tier, backup, mlen, dev, prot, mall, mprot, nv >= 0, nmv >= 0, nmhv >= 0, owned)

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
        q = self._q  # queued: ``_flush`` applies them per pool, every -1 before any +1
        if sign > 0:
            if full:
                self.want_full.add(n.id)
            if mamba:
                self.want_m.add(n.id)
            if host_m:
                self.host_m.add(n.id)
            for pool, slots, want in own if owned is None else owned:
                rp, _, cp, _, cw = q[pool]
                rp += slots
                if want is not None:
                    cp += slots
                    cw += want
        else:
            if full:
                self.want_full.discard(n.id)
            if mamba:
                self.want_m.discard(n.id)
            if host_m:
                self.host_m.discard(n.id)
            for pool, slots, want in own if owned is None else owned:
                _, rm, _, cm, _ = q[pool]
                rm += slots
                if want is not None:
                    cm += slots

    def _flush(self) -> None:
        """Apply the queued share changes (every -1 before any +1) and pool events to the per-slot state.

        The kv check's mask and wanted content follow each slot as its count moves (``_rewant``'s rule: all bits
        and ``exp`` where an attached node owns the slot, zero elsewhere), written one item at a time through a
        memoryview: an operation moves a few dozen slots, and two numpy calls per pool cost more than that."""
        pools = self.cache.pools.all()
        for pool, (rp, rm, cp, cm, cw) in self._q.items():
            events = self._events[pool]
            if not (rp or rm or cp or cm or events):
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

    def _rewant(self, pool: str, slots) -> None:
        """The kv check's mask and wanted content on ``slots``, from ``cnt`` and ``exp``."""
        cnt, exp, mask, want = self.cnt[pool], self.exp[pool], self.mask_mv[pool], self.want_mv[pool]
        for i in slots:
            if cnt[i] > 0:
                mask[i], want[i] = -1, exp[i]
            else:
                mask[i] = want[i] = 0
        self.want_bytes[pool] = None

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
        if self.bad["mlen"]:
            bad.add("kv_content")
        else:
            want_bytes = self.want_bytes
            for name in _POOL_NAMES:
                if self.owned[name]:
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
            loose = self.loose[name]
            if loose:
                if extra is None:
                    extra = _other_refs(cache, live)
                if not loose <= extra[name]:
                    bad.add("no_leak")
                    break
        return bad

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
                            for i, w in zip(slots, want, strict=True):
                                exp[i] = w
                            touched.update(slots)
                if touched:
                    self._rewant(name, touched)
                self.shared[name] = False
        return False


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
