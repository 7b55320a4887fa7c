"""Snapshots: frozen, plain-data pictures of a cache at one micro-step, for renderers and the player.

A snapshot holds every attached node and every *detached node that something still holds* (a stale node), so a
view can draw the stale node beside the tree with the holders pointing at it. Snapshots never refer to live
cache objects; renderers are pure functions of them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .keys import format_key
from .state import attached_ids, dfs, held_by, node_line
from .state import holder_map as structural_holders
from .unified import ledger as unified


@dataclass(frozen=True)
class NodeView:
    id: int
    key: tuple[int, ...]
    parent: int | None
    children: tuple[int, ...]
    attached: bool
    value: tuple[int, ...] | None
    host_value: tuple[int, ...] | None
    mamba_value: tuple[int, ...] | None
    mamba_host_value: tuple[int, ...] | None
    full_lock_ref: int
    mamba_lock_ref: int
    host_ref: int
    host_mamba_ref: int
    hit_count: int
    last_access_time: float
    depth: int = 0

    @property
    def evicted(self) -> bool:
        return self.value is None

    @property
    def backuped(self) -> bool:
        return self.host_value is not None

    @property
    def tombstone(self) -> bool:
        return self.mamba_value is None

    @property
    def residency(self) -> str:
        """``device``, ``host``, ``both`` or ``none`` (the last only for a node that lost both copies)."""
        return {(True, False): "device", (False, True): "host", (True, True): "both"}.get(
            (self.value is not None, self.host_value is not None), "none")

    @property
    def key_text(self) -> str:
        return format_key(self.key)


@dataclass(frozen=True)
class PoolView:
    name: str
    size: int
    free: tuple[int, ...]
    used: tuple[int, ...]
    leaked: tuple[int, ...]
    double_freed: tuple[int, ...]


@dataclass(frozen=True)
class Snapshot:
    root: int
    nodes: Mapping[int, NodeView]
    order: tuple[int, ...]  # attached nodes, canonical preorder
    sets: Mapping[str, tuple[int, ...]]
    lrus: Mapping[str, tuple[int, ...]]  # MRU -> LRU
    ongoing: Mapping[str, tuple[int, ...]]
    pools: Mapping[str, PoolView]
    counters: Mapping[str, int]
    holders: Mapping[int, tuple[str, ...]]  # every node someone refers to -> who
    stale: tuple[int, ...]  # detached nodes still held
    current: int | None = None
    stack: tuple[str, ...] = ()
    tree_text: tuple[str, ...] = field(default_factory=tuple)

    def node(self, node_id: int) -> NodeView:
        return self.nodes[node_id]


def _t(v):
    return None if v is None else tuple(v)


def node_view(n, attached: bool, depth: int = 0) -> NodeView:
    """The plain-data view of one tree node."""
    return NodeView(
        n.id, tuple(n.key), n.parent.id if n.parent is not None else None,
        tuple(c.id for c in n.children.values()), attached, _t(n.value), _t(n.host_value),
        _t(n.mamba_value), _t(n.mamba_host_value), n.full_lock_ref, n.mamba_lock_ref, n.host_ref_counter,
        n.host_mamba_ref_counter, n.hit_count, float(n.last_access_time), depth)


def holder_map(cache, frames: Mapping[int, tuple[str, ...]] = (), current=None) -> dict[int, list[str]]:
    """node id -> names of the structures (the ledger, ``state.held_by``) and simulated call frames holding it."""
    out = structural_holders(cache)
    for node_id, names in dict(frames).items():
        out.setdefault(node_id, []).extend(names)
    if current is not None:
        out.setdefault(current.id, []).append("insert loop's node")
    return out


def pool_views(cache, live_requests=(), leaked: Mapping[str, tuple[int, ...]] | None = None) -> dict:
    """Per-pool free / used / leaked / double-freed slots (``leaked`` computed unless given)."""
    from .state import accounting

    if leaked is None:
        leaked = {name: tuple(a["leaked"]) for name, a in accounting(cache, live_requests).items()}
    out = {}
    for name, p in cache.pools.all().items():
        dbl = sorted({s for d in p.double_frees for s in d.slots})
        out[name] = PoolView(name, p.size, tuple(p.free_slots), tuple(sorted(p.used_slots())),
                             tuple(leaked.get(name, ())), tuple(dbl))
    return out


def take(cache, live_requests=(), frames: Mapping[int, tuple[str, ...]] = (), current=None,
         stack: tuple[str, ...] = (), known: Mapping[int, object] | None = None,
         pools: Mapping[str, PoolView] | None = None, outer: frozenset[int] | None = None,
         detached: frozenset[int] | set[int] | None = None) -> Snapshot:
    """Snapshot ``cache``. ``frames``: node id -> call frames holding it; ``known``: id -> node objects that
    may be detached but are worth drawing (went stale earlier); ``pools``: precomputed pool views; ``outer``: ids
    held by calls that resume after the current eviction (only those frames make a detached node stale; the
    eviction's own frames merely hold the node they are deleting); ``detached``: ids detached at least once (a
    new node not yet attached is not stale)."""

    att = attached_ids(cache)
    order = dfs(cache, att)
    objs = {n.id: n for _, n in order}
    depth = {n.id: d for d, n in order}
    ledger = list(held_by(cache))
    structural: dict[int, list[str]] = {}
    for name, n in ledger:
        objs.setdefault(n.id, n)
        structural.setdefault(n.id, []).append(name)
    hold = {k: list(v) for k, v in structural.items()}
    for node_id, names in dict(frames).items():
        hold.setdefault(node_id, []).extend(names)
    if current is not None:
        hold.setdefault(current.id, []).append("insert loop's node")
    for n in (known or {}).values():
        objs.setdefault(n.id, n)
    if current is not None:
        objs.setdefault(current.id, current)
    root = cache.root_node
    objs.pop(root.id, None)
    nodes = {root.id: NodeView(root.id, (), None, tuple(c.id for c in root.children.values() if id(c) in att),
                               True, (), None, None, None, root.full_lock_ref, root.mamba_lock_ref,
                               root.host_ref_counter, root.host_mamba_ref_counter, 0, root.last_access_time, 0)}
    for nid, n in objs.items():
        if type(n) is NodeView:  # a node nothing can reach any more, frozen when it became unreachable
            nodes[nid] = n
            continue
        nodes[nid] = node_view(n, id(n) in att, depth.get(nid, 0))
    if pools is None:
        pools = pool_views(cache, live_requests)
    holders = {nid: tuple(names) for nid, names in hold.items() if nid in nodes}
    outer = frozenset(frames) if outer is None else outer
    stale = tuple(sorted(nid for nid, v in nodes.items()
                         if not v.attached and (detached is None or nid in detached)
                         and (structural.get(nid) or nid in outer)))
    if unified.is_unified(cache):  # its own leaf sets and lists, in-flight maps of tuples, counters by component
        sets, lrus = unified.leaf_sets(cache), unified.lru_lists(cache)
        ongoing, sizes = unified.ongoing_ids(cache), unified.sizes(cache)
    else:
        sets = (cache.evictable_full_device_leaves, cache.evictable_full_host_leaves)
        lrus = (cache.full_lru_list, cache.mamba_lru_list, cache.mamba_host_lru_list)
        ongoing = dict(write_through=tuple(cache.ongoing_write_through), load_back=tuple(cache.ongoing_load_back),
                       backup=tuple(v[0].id for v in cache.ongoing_backup.values()),
                       prefetch=tuple(v.last_host_node.id for v in cache.ongoing_prefetch.values()))
        sizes = cache.sizes()
    return Snapshot(
        root=root.id, nodes=nodes, order=tuple(n.id for _, n in order),
        sets={s.name: tuple(n.id for n in s) for s in sets},
        lrus={lru.name: tuple(lru.ids_mru_to_lru()) for lru in lrus},
        ongoing=ongoing, pools=pools, counters=dict(sizes), holders=holders, stale=stale,
        current=current.id if current is not None else None, stack=tuple(stack),
        tree_text=tuple(node_line(d, n) for d, n in order))
