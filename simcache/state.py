"""Read-only views of a cache's state: the canonical tree text, slot accounting and stale references.

The canonical tree text is the golden format of the tests and is byte for byte the oracle's format, one line per
*attached* node (reachable from root through children whose parent pointer and child key agree), preorder,
siblings sorted by key::

    <depth> <k1,k2,..> v=<0|1> h=<0|1> m=<0|1> mh=<0|1> fl=<full lock> ml=<mamba lock> hr=<host ref> hmr=<h.m. ref>

``v``/``h``/``m``/``mh``: device KV, host KV, device Mamba, host Mamba present; `` !len`` is appended when a value's
length differs from its key's. ``tree_slots`` spells the slots instead: ``<depth> <keys> v=0,1 h=- m=3 mh=-``.
"""
from __future__ import annotations

from collections.abc import Iterator

from .keys import format_key
from .node import TreeNode
from .unified import ledger as unified


def attached_ids(cache) -> set[int]:
    """ids of nodes reachable from root through consistent parent/child links."""
    root = cache.root_node
    seen, stack = {id(root)}, [root]
    while stack:
        n = stack.pop()
        for k, c in n.children.items():
            if c.parent is n and len(c.key) > 0 and cache.child_key(c.key) == k:
                seen.add(id(c))
                stack.append(c)
    return seen


def dfs(cache, attached: set[int] | None = None) -> list[tuple[int, TreeNode]]:
    """(depth, node) of attached nodes, preorder, siblings sorted by key."""
    att = attached_ids(cache) if attached is None else attached
    out: list[tuple[int, TreeNode]] = []
    stack = [(cache.root_node, 0)]
    while stack:
        n, d = stack.pop()
        if n is not cache.root_node:
            out.append((d, n))
        kids = sorted((c for c in n.children.values() if id(c) in att), key=lambda c: c.key)
        stack.extend((c, d + 1) for c in reversed(kids))
    return out


def _bit(v) -> int:
    return int(v is not None)


def node_line(depth: int, n: TreeNode) -> str:
    return _node_line(depth, n, format_key(n.key))


def _node_line(depth: int, n: TreeNode, key: str) -> str:
    bad = any(v is not None and len(v) != len(n.key) for v in (n.value, n.host_value))
    return (f"{depth} {key} v={_bit(n.value)} h={_bit(n.host_value)} m={_bit(n.mamba_value)} "
            f"mh={_bit(n.mamba_host_value)} fl={n.full_lock_ref} ml={n.mamba_lock_ref} hr={n.host_ref_counter} "
            f"hmr={n.host_mamba_ref_counter}" + (" !len" if bad else ""))


def _slots(v) -> str:
    if v is None:
        return "-"
    if v.__class__ is list and len(v) > 1 and set(map(type, v)) <= _INT:  # plain ints: their repr, in C
        return str(v)[1:-1].replace(", ", ",")
    return ",".join(map(str, v))


_INT = {int}


def tree_lines(cache) -> list[str]:
    return [node_line(d, n) for d, n in dfs(cache)]


def tree_slot_lines(cache) -> list[str]:
    return [_slot_line(d, n, format_key(n.key)) for d, n in dfs(cache)]


def _slot_line(d: int, n: TreeNode, key: str) -> str:
    return (f"{d} {key} v={_slots(n.value)} h={_slots(n.host_value)} m={_slots(n.mamba_value)} "
            f"mh={_slots(n.mamba_host_value)}")


def tree_and_slot_lines(cache) -> tuple[list[str], list[str]]:
    """``(tree_lines(cache), tree_slot_lines(cache))`` in one walk, each key spelled once (long prompts make long
    keys)."""
    lines, slot_lines = [], []
    for d, n in dfs(cache):
        key = format_key(n.key)
        lines.append(_node_line(d, n, key))
        slot_lines.append(_slot_line(d, n, key))
    return lines, slot_lines


def tree_text(cache) -> str:
    """The canonical tree as one string (empty tree: ``(empty)``)."""
    from .args import cache as a_cache

    lines = tree_lines(a_cache(cache, "tree_text"))
    return "\n".join(lines) if lines else "(empty)"


# --- the holder ledger: the one place that says which structures hold which node --------------------------------

def held_by(cache, lrus: bool = True) -> Iterator[tuple[str, TreeNode]]:
    """Every (holder, node) pair: leaf sets, LRU lists (MRU first), in-flight maps, prefetch anchors, in this
    canonical order. Snapshots, invariants, went-stale detection and ``stale_refs`` all read this one ledger.
    ``lrus=False`` leaves out the LRU lists (a caller that tests them by node id). A unified cache's holders are
    its own structures (``unified.ledger``)."""
    if unified.is_unified(cache):
        yield from unified.held_by(cache, lrus)
        return
    for s in (cache.evictable_full_device_leaves, cache.evictable_full_host_leaves):
        for n in s:
            yield s.name, n
    for lru in (cache.full_lru_list, cache.mamba_lru_list, cache.mamba_host_lru_list) if lrus else ():
        for n in lru.mru_to_lru():
            yield lru.name, n
    for n in cache.ongoing_write_through.values():
        yield "ongoing_write_through", n
    for n in cache.ongoing_load_back.values():
        yield "ongoing_load_back", n
    for n, _ in cache.ongoing_backup.values():
        yield "ongoing_backup", n
    for v in cache.ongoing_prefetch.values():
        yield "prefetch anchor", v.last_host_node


def holders_of(cache, node: TreeNode) -> list[str]:
    """The holders of one node, in ``held_by``'s order, without walking the sets and lists (membership tests)."""
    if unified.is_unified(cache):
        return unified.holders_of(cache, node)
    names = [s.name for s in (cache.evictable_full_device_leaves, cache.evictable_full_host_leaves) if node in s]
    names += [lru.name for lru in (cache.full_lru_list, cache.mamba_lru_list, cache.mamba_host_lru_list)
              if lru.in_list(node) and lru.cache[node.id].node is node]
    names += ["ongoing_write_through" for n in cache.ongoing_write_through.values() if n is node]
    names += ["ongoing_load_back" for n in cache.ongoing_load_back.values() if n is node]
    names += ["ongoing_backup" for n, _ in cache.ongoing_backup.values() if n is node]
    return names + ["prefetch anchor" for v in cache.ongoing_prefetch.values() if v.last_host_node is node]


def holder_map(cache) -> dict[int, list[str]]:
    """node id -> names of the structures holding it (``held_by`` grouped by node, first holder first)."""
    out: dict[int, list[str]] = {}
    for name, n in held_by(cache):
        out.setdefault(n.id, []).append(name)
    return out


# the ledger's names as ``holders`` spells them (the oracle's field names)
_LEDGER_FIELDS = {"prefetch anchor": "ongoing_prefetch"}


def holders(cache) -> dict[str, list[TreeNode]]:
    """Every structure that refers to nodes, by SGLang's name."""
    if unified.is_unified(cache):
        return unified.holders(cache)
    out: dict[str, list[TreeNode]] = {name: [] for name in (
        "evictable_full_device_leaves", "evictable_full_host_leaves", "full_lru_list", "mamba_lru_list",
        "mamba_host_lru_list", "ongoing_write_through", "ongoing_load_back", "ongoing_backup", "ongoing_prefetch")}
    for name, n in held_by(cache):
        out[_LEDGER_FIELDS.get(name, name)].append(n)
    return out


def is_attached(cache, node: TreeNode) -> bool:
    """``node`` is reachable from root through consistent links (``attached_ids`` for one node: O(depth))."""
    root, seen = cache.root_node, set()
    while node is not root:
        p = node.parent
        if p is None or id(node) in seen or len(node.key) == 0 or p.children.get(cache.child_key(node.key)) is not node:
            return False
        seen.add(id(node))
        node = p
    return True


def stale_refs(cache) -> list[str]:
    """``keys@holder`` for every detached node still held by a leaf set, an LRU list or an in-flight map."""
    att = attached_ids(cache)
    return sorted({f"{format_key(n.key)}@{h}" for h, nodes in holders(cache).items() for n in nodes
                   if id(n) not in att and n is not cache.root_node})


def referenced_slots(cache, live_requests=(), attached_nodes=None) -> dict[str, list[int]]:
    """Slots each pool's owners refer to: attached nodes, live requests, prefetches, the host release queue
    (``attached_nodes``: those nodes in any order, when the caller has them already)."""
    if unified.is_unified(cache):
        return unified.referenced_slots(cache, live_requests, attached_nodes)
    refs: dict[str, list[int]] = {p: [] for p in ("device_kv", "device_mamba", "host_kv", "host_mamba")}
    for n in (attached_nodes if attached_nodes is not None else (n for _, n in dfs(cache))):
        for pool, v in (("device_kv", n.value), ("device_mamba", n.mamba_value), ("host_kv", n.host_value),
                        ("host_mamba", n.mamba_host_value)):
            if v is not None:
                refs[pool] += v
    for r in live_requests:
        refs["device_kv"] += r.kv[r.cache_protected_len : len(r.tokens)]
        refs["device_mamba"] += [s for s in (r.mamba_pool_idx, r.track_buffer) if s is not None]
    for v in cache.ongoing_prefetch.values():
        refs["host_kv"] += v.host_indices
        for t in v.operation.mamba or ():
            refs["host_mamba"] += t.host_indices or []
    for page in cache.controller.host_mem_release_queue:
        refs["host_kv"] += page
    return refs


def accounting(cache, live_requests=()) -> dict[str, dict[str, list[int]]]:
    refs = referenced_slots(cache, live_requests)
    out = {}
    for name, pool in cache.pools.all().items():
        a = pool.accounting(refs[name])
        out[name] = dict(leaked=list(a.leaked), free_but_referenced=list(a.free_but_referenced),
                         duplicated_in_free_list=list(a.duplicated_in_free_list), shared=list(a.shared))
    return out


def counters(cache, live_requests=()) -> dict[str, int]:
    if unified.is_unified(cache):
        return dict(unified.sizes(cache), tree_device_tokens=sum(len(n.value) for _, n in dfs(cache)
                                                                 if n.value is not None),
                    live_requests=len(live_requests))
    return dict(full_evictable=cache.full_evictable_size_, full_protected=cache.full_protected_size_,
                mamba_evictable=cache.mamba_evictable_size_, mamba_protected=cache.mamba_protected_size_,
                tree_device_tokens=sum(len(n.value) for _, n in dfs(cache) if n.value is not None),
                live_requests=len(live_requests))


def inflight(cache) -> dict[str, int]:
    cc = cache.controller
    return dict(write_through=len(cache.ongoing_write_through), load_back=len(cache.ongoing_load_back),
                backup=len(cache.ongoing_backup), prefetch=len(cache.ongoing_prefetch),
                pending_l3=len(cc.pending_backups), write_acks=len(cc.ack_write_queue))
