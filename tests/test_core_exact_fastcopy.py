"""fastcopy.py compared whole: a copy of a busy cache and driver is walked object by object beside the original.
Every value is equal; every mutable object is a new one (atoms, tensors, functions and frozen dataclasses are
shared); each object shared in the original maps to one object in the copy (a node held by its parent, a leaf set
and an LRU link is one node); an ordered leaf set's heap is rebuilt from its members and its round log dropped.
Then each kind of object the copier knows is checked alone, and a copy runs on without touching its original."""
from __future__ import annotations

import copy
import dataclasses
import heapq
import itertools
from collections import OrderedDict, deque
from types import BuiltinFunctionType, FunctionType, MethodType

import numpy as np
import pytest
import torch

from simcache.cache import HiMambaRadixCache
from simcache.driver import Driver, Skip
from simcache.explore import fastcopy
from simcache.explore.fastcopy import fast_copy
from simcache.lru import LRUList, OrderedLeafSet, _Link
from simcache.node import TreeNode
from simcache.ops_run import build_config, check_doc
from simcache.pools import SlotPool
from simcache.state import tree_slot_lines
from simcache.trace_hooks import LeafSet
from simcache.versions import preset
from simcache.workload import WorkloadSpec, generate

ATOMS = (int, float, str, bool, type(None), bytes, FunctionType, BuiltinFunctionType, type, torch.Tensor,
         torch.device, range, np.ndarray)


NODE_LISTS = ("value", "host_value", "mamba_value", "mamba_host_value", "hash_value")


def _slots(t: type) -> list[str]:
    return [s for c in t.__mro__ for s in c.__dict__.get("__slots__", ()) if s != "__dict__"]


def _frozen(t: type) -> bool:
    return dataclasses.is_dataclass(t) and t.__dataclass_params__.frozen


def check_copy(original, twin) -> int:
    """Walk ``original`` and ``twin`` side by side (no recursion: LRU chains are long); return the objects paired."""
    pairs: dict[int, object] = {}
    keep = []  # the originals stay alive while their ids are keys
    todo = [(original, twin, "root")]
    while todo:
        a, b, where = todo.pop()
        assert type(a) is type(b), where
        t = type(a)
        if t in ATOMS or _frozen(t):
            if t is float and a != a:
                assert b != b, where
            else:
                assert a is b or (t in (int, float, str, bool, bytes) and a == b), where
            continue
        if id(a) in pairs:
            assert pairs[id(a)] is b, f"{where}: one object in the original, two in the copy"
            continue
        if t is tuple and all(type(v) in ATOMS for v in a):
            assert a == b, where
            continue
        assert a is not b, f"{where}: a mutable {t.__name__} is shared with the original"
        pairs[id(a)] = b
        keep.append(a)
        if t in (list, tuple, deque):
            assert len(a) == len(b), where
            if t is deque:
                assert a.maxlen == b.maxlen, where
            todo += [(x, y, f"{where}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))]
        elif t is OrderedLeafSet:
            assert len(a) == len(b) and a.name == b.name and a.observer is b.observer, where
            todo += [(x, y, f"{where} member {i}") for i, (x, y) in enumerate(zip(dict.__iter__(a),
                                                                                   dict.__iter__(b), strict=True))]
            assert b.log is None, where
            if a.heap is None:
                assert b.heap is None, where
            else:  # rebuilt from the members: one entry each, at its time, a valid heap
                assert sorted((n.last_access_time, n.id) for _, n in b.heap) == sorted(
                    (n.last_access_time, n.id) for n in b), where
                assert all(time == n.last_access_time and n in b for time, n in b.heap), where
                assert all(b.heap[(i - 1) // 2] <= b.heap[i] for i in range(1, len(b.heap))), where
        elif issubclass(t, dict):
            assert len(a) == len(b), where
            todo += [(ka, kb, f"{where} key {i}") for i, (ka, kb) in enumerate(zip(a, b, strict=True))]
            todo += [(a[ka], b[kb], f"{where}[{ka!r}]") for ka, kb in zip(a, b, strict=True)]
        elif t is MethodType:
            assert a.__func__ is b.__func__, where
            todo.append((a.__self__, b.__self__, f"{where}.__self__"))
        elif t is itertools.count:
            assert repr(a) == repr(b), where
        if t is TreeNode:  # slot numbers and hashes: copied flat, each list the node's own (none is changed in place)
            for name in NODE_LISTS:
                x, y = getattr(a, name), getattr(b, name)
                assert x == y and type(x) is type(y) and (x is None or x is not y), f"{where}.{name}"
        if t is not MethodType and t not in (list, tuple, deque, dict, OrderedDict, itertools.count):
            if hasattr(a, "__dict__"):
                assert a.__dict__.keys() == b.__dict__.keys(), where
                todo += [(v, b.__dict__[k], f"{where}.{k}") for k, v in a.__dict__.items()]
            if t is not OrderedLeafSet:
                for name in _slots(t):
                    if t is TreeNode and name in NODE_LISTS:
                        continue
                    assert hasattr(a, name) == hasattr(b, name), f"{where}.{name}"
                    if hasattr(a, name):
                        todo.append((getattr(a, name), getattr(b, name), f"{where}.{name}"))
    return len(pairs)


def busy(version: str, policy: str, page_size: int):
    """A cache and driver half-way through a seeded multi-turn workload under host pressure (with device and host
    evictions), and the operations still to run."""
    spec = WorkloadSpec(requests=60, chats=4, overlap=0.5, evict=0.3, evict_max=6, policy=policy)
    doc = generate(7, 4.0, spec)
    doc["config"] = {**doc["config"], "page_size": page_size, "device_kv": doc["config"]["device_kv"] * page_size}
    doc["ops"] = [{**op, "n": op["n"] * page_size} if op["op"] == "evict" else op for op in doc["ops"]]
    cfg, ops = check_doc(doc)
    cache = HiMambaRadixCache(build_config(cfg, preset(version)))
    drv = Driver(cache)
    half = len(ops) // 2
    for i, op in enumerate(ops[:half]):
        try:
            drv.apply(op, i)
        except Skip:
            pass
    return cache, drv, list(enumerate(ops))[half:]


def run_rest(cache, drv, rest) -> list[str]:
    status = []
    for i, op in rest:
        try:
            drv.apply(op, i)
            status.append(".")
        except Skip:
            status.append("-")
        except AssertionError as e:
            status.append(f"x {e}")
            break
    return status


@pytest.mark.parametrize("version, policy, page_size", [("pre_fix", "write_through", 1),
                                                        ("followup_fix", "write_through", 2),
                                                        ("merged_fix", "write_through_selective", 1)])
def test_a_busy_cache_and_driver_copied_whole(version, policy, page_size):
    cache, drv, rest = busy(version, policy, page_size)
    memo: dict = {}
    twin, twin_drv = fast_copy(cache, memo), fast_copy(drv, memo)
    assert twin_drv.cache is twin  # one memo: the driver's cache is the cache copied first
    paired = check_copy((cache, drv), (twin, twin_drv))
    assert paired > 100
    assert fast_copy(cache, memo) is twin and fast_copy(drv, memo) is twin_drv
    # the copy runs on alone, as the original does, and the original stays where it was
    before = tree_slot_lines(cache)
    twin_status = run_rest(twin, twin_drv, rest)
    assert tree_slot_lines(cache) == before
    deep, deep_drv = copy.deepcopy((cache, drv))
    assert run_rest(deep, deep_drv, rest) == twin_status
    assert tree_slot_lines(twin) == tree_slot_lines(deep)
    assert run_rest(cache, drv, rest) == twin_status
    assert tree_slot_lines(cache) == tree_slot_lines(twin)


def node(i, key=(1,), parent=None) -> TreeNode:
    n = TreeNode.__new__(TreeNode)
    n.id, n.key, n.last_access_time, n.full_lock_ref, n.mamba_lock_ref, n.hit_count = i, tuple(key), 10.0 + i, i, 2, 3
    n.host_ref_counter, n.host_mamba_ref_counter = 4, 5
    n.value, n.host_value, n.mamba_value, n.mamba_host_value, n.hash_value = [i], None, [7], None, ["h"]
    n.parent, n.children = parent, {}
    if parent is not None:
        parent.children[(i,)] = n
    return n


def test_a_node_is_copied_field_by_field_with_its_family():
    root = node(0)
    kid = node(1, (1, 2), root)
    kid.host_value, kid.mamba_host_value, kid.value, kid.mamba_value, kid.hash_value = [8, 9], [4], None, None, None
    leaf = node(2, (3,), kid)
    memo: dict = {}
    copied = fast_copy(leaf, memo)
    assert check_copy(leaf, copied) == 6  # three nodes and their children dicts (their lists are checked flat)
    assert copied.parent.parent.children[(1,)] is copied.parent
    assert (copied.id, copied.key, copied.last_access_time, copied.full_lock_ref, copied.mamba_lock_ref,
            copied.hit_count, copied.host_ref_counter, copied.host_mamba_ref_counter) == (2, (3,), 12.0, 2, 2, 3, 4, 5)
    assert (copied.parent.value, copied.parent.host_value, copied.parent.mamba_value,
            copied.parent.mamba_host_value, copied.parent.hash_value) == (None, [8, 9], None, [4], None)
    assert fast_copy(root, memo) is copied.parent.parent


def test_a_pool_keeps_its_settings_and_copies_its_lists():
    pool = SlotPool("device_kv", 6, torch.device("cpu"))
    a = pool.alloc(3)
    pool.free(a[:1])
    copied = fast_copy(pool, {})
    assert check_copy(pool, copied) >= 5
    assert list(copied.free_slots) == list(pool.free_slots) and copied.free_slots is not pool.free_slots
    copied.alloc(2)
    assert len(pool.free_slots) == 4 and len(copied.free_slots) == 2


def test_an_lru_list_is_rebuilt_link_by_link_in_order():
    nodes = [node(i) for i in range(5)]
    lru = LRUList.__new__(LRUList)
    lru.head, lru.tail = _Link(None), _Link(None)
    lru.head.next, lru.tail.prev = lru.tail, lru.head
    lru.cache, lru.kind, lru.name, lru.observer, lru._lock = {}, "full", "lru", None, None
    for n in nodes:  # link each after the head, as the newest
        link = _Link(n, lru.head, lru.head.next)
        lru.head.next.prev = link
        lru.head.next = link
        lru.cache[n.id] = link
    memo: dict = {}
    copied = fast_copy(lru, memo)
    check_copy(lru, copied)
    order, link = [], copied.head.next
    while link is not copied.tail:
        assert link.next.prev is link and copied.cache[link.node.id] is link
        order.append(link.node.id)
        link = link.next
    assert order == [4, 3, 2, 1, 0] and copied.tail.next is None and copied.head.prev is None
    assert [memo[id(n)] for n in nodes] == [copied.cache[i].node for i in range(5)]


def test_leaf_sets_keep_their_members_in_order():
    nodes = [node(i) for i in range(4)]
    plain = LeafSet("plain")
    for n in (nodes[2], nodes[0], nodes[3]):
        dict.__setitem__(plain, n, None)
    ordered = OrderedLeafSet("ordered")
    for n in (nodes[3], nodes[1]):
        ordered.add(n)
    ordered.log = {nodes[3]: True}
    nodes[3].last_access_time = 1.0  # the heap's entry is now out of date: the copy's is rebuilt at 1.0
    off = OrderedLeafSet("off")
    off.heap = None
    dict.__setitem__(off, nodes[0], None)
    memo: dict = {}
    copies = fast_copy([plain, ordered, off], memo)
    check_copy([plain, ordered, off], copies)
    p, o, f = copies
    assert [n.id for n in p] == [2, 0, 3] and p.name == "plain" and type(p) is LeafSet
    assert [n.id for n in o] == [3, 1] and o.log is None and sorted((t, n.id) for t, n in o.heap) == [(1.0, 3),
                                                                                                     (11.0, 1)]
    assert o.heap[0][1].id == 3 and ordered.log == {nodes[3]: True}
    assert f.heap is None and [n.id for n in f] == [0]
    assert p[memo[id(nodes[0])]] is None and memo[id(nodes[0])] in f


def fresh_types():
    """New classes on every call: fastcopy caches per type (a slots list, "frozen"), and a cache filled by an earlier
    run of the tests (mutmut runs them once before it forks each mutant's run) would hide what it computes."""

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        x: list

    @dataclasses.dataclass
    class Thawed:
        x: list

    class Slotted:
        __slots__ = ("a", "b")

    class Both(Slotted):
        __slots__ = ("c", "__dict__")

        def hello(self):
            return self.c

    return Frozen, Thawed, Both


class WithDict:
    def __init__(self):
        self.items = [1]


def test_every_other_kind_of_object():
    Frozen, Thawed, Both = fresh_types()
    shared = [1, "s", 2.5, None, True, b"b", len, node, int, torch.zeros(1), torch.device("cpu"), range(3)]
    assert all(fast_copy(v, {}) is v for v in shared)
    flat = (1, "a", None)
    assert fast_copy(flat, {}) is flat
    inner = [1]
    nested = (1, inner)
    copied = fast_copy(nested, {})
    assert copied == nested and copied[1] is not inner and type(copied) is tuple
    d = OrderedDict([("b", [1]), ("a", [2])])
    cd = fast_copy(d, {})
    assert type(cd) is OrderedDict and list(cd.items()) == [("b", [1]), ("a", [2])] and cd["b"] is not d["b"]
    key = WithDict()
    plain = {key: [1], 2: key}
    cp = fast_copy(plain, {})
    k1, k2 = cp
    assert type(k1) is WithDict and k1 is not key and k2 == 2 and cp[2] is k1 and cp[k1] == [1]
    q = deque([[1], [2]], maxlen=5)
    cq = fast_copy(q, {})
    assert list(cq) == [[1], [2]] and cq.maxlen == 5 and cq[0] is not q[0]
    counter = itertools.count(17)
    next(counter)
    cc = fast_copy(counter, {})
    assert next(cc) == 18 and next(counter) == 18
    frozen = Frozen([1])
    assert Frozen not in fastcopy._FROZEN
    # the class is remembered as frozen (not None in its place)
    assert fast_copy(frozen, {}) is frozen and Frozen in fastcopy._FROZEN and None not in fastcopy._FROZEN
    assert fast_copy(frozen, {}) is frozen  # now read from the set
    thawed = Thawed([1])
    ct = fast_copy(thawed, {})
    assert ct == thawed and ct is not thawed and ct.x is not thawed.x
    both = Both()
    both.a, both.c, both.d = [1], "c", [2]  # b left unset; d in the instance's dict
    cb = fast_copy(both, {})
    assert (cb.a, cb.c, hasattr(cb, "b"), cb.d) == ([1], "c", False, [2]) and cb.a is not both.a
    assert cb.d is not both.d and vars(cb) == {"d": [2]}
    bound = both.hello
    memo: dict = {}
    cm = fast_copy(bound, memo)
    assert type(cm) is MethodType and cm.__self__ is memo[id(both)] and cm() == "c"
    w = WithDict()
    cw = fast_copy(w, {})
    assert cw.items == [1] and cw.items is not w.items
    check_copy([nested, d, plain, q, thawed, both, bound, w], fast_copy([nested, d, plain, q, thawed, both, bound, w],
                                                                         {}))


def test_one_object_twice_is_one_copy():
    inner = [1]
    outer = [inner, (inner, 2), {"k": inner}, deque([inner])]
    copied = fast_copy(outer, {})
    assert copied[0] is copied[1][0] is copied[2]["k"] is copied[3][0] and copied[0] is not inner
    loop = WithDict()
    loop.items = [loop]  # a cycle through an object (a node and its parent): the object is remembered first
    cl = fast_copy(loop, {})
    assert cl.items[0] is cl and cl is not loop and cl.items is not loop.items
    heap = [(1.0, 3), (2.0, 4)]
    heapq.heapify(heap)
    copied_heap = fast_copy(heap, {})
    assert copied_heap == heap and copied_heap is not heap


def test_each_kind_the_copier_knows_is_copied_once_however_often_it_is_held():
    pool = SlotPool("host_kv", 4, torch.device("cpu"))
    lru = LRUList.__new__(LRUList)
    lru.head, lru.tail = _Link(None), _Link(None)
    lru.head.next, lru.tail.prev = lru.tail, lru.head
    lru.cache, lru.kind, lru.name, lru.observer, lru._lock = {}, "full", "lru", None, None
    plain, ordered, n = LeafSet("plain"), OrderedLeafSet("ordered"), node(1)
    shared = ([1], 2)  # a tuple that holds a mutable list
    for x in (pool, lru, plain, ordered, n, shared):
        a, b = fast_copy([x, x], {})
        assert a is b and a is not x, type(x)
    d: dict = {}
    holder = WithDict()
    holder.items, d["holder"] = d, holder  # a dict and an object holding each other
    cd = fast_copy(d, {})
    assert cd["holder"].items is cd and cd is not d
