"""``fast_copy``: a deep copy of a cache, its driver and everything they hold, several times faster than
``copy.deepcopy``, for the explorer's "keep the prefix's state and clone it per child" mode.

Atoms, functions, tensors and frozen dataclasses are shared (the pools' data tensors too: the explorer's machines
keep no KV data, see ``machine.Machine``); tuples and lists of atoms are copied flat; tree nodes, pools, LRU lists
and leaf sets have their own copiers (an LRU list's links are rebuilt in order, without recursion); every other
object is copied once per ``memo``, so shared references stay shared (a node held by a leaf set, an LRU list and
its parent is one node in the copy).
"""
from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections import OrderedDict, deque
from types import BuiltinFunctionType, FunctionType, MethodType

import torch

from ..lru import LRUList, OrderedLeafSet, _Link
from ..node import TreeNode
from ..pools import SlotPool
from ..trace_hooks import LeafSet

_SHARED = {int, float, str, bool, type(None), bytes, FunctionType, BuiltinFunctionType, type, torch.Tensor,
           torch.device, range}
_SLOTS: dict[type, tuple[str, ...]] = {}
_FROZEN: set[type] = set()


def _slots_of(t: type) -> tuple[str, ...]:
    names = _SLOTS.get(t)
    if names is None:
        names = _SLOTS[t] = tuple(s for c in t.__mro__ for s in c.__dict__.get("__slots__", ()) if s != "__dict__")
    return names


def _copy_node(x: TreeNode, memo: dict) -> TreeNode:
    y = memo[id(x)] = TreeNode.__new__(TreeNode)
    y.id, y.key, y.last_access_time = x.id, x.key, x.last_access_time
    y.full_lock_ref, y.mamba_lock_ref, y.hit_count = x.full_lock_ref, x.mamba_lock_ref, x.hit_count
    y.host_ref_counter, y.host_mamba_ref_counter = x.host_ref_counter, x.host_mamba_ref_counter
    y.value = None if x.value is None else x.value[:]
    y.host_value = None if x.host_value is None else x.host_value[:]
    y.mamba_value = None if x.mamba_value is None else x.mamba_value[:]
    y.mamba_host_value = None if x.mamba_host_value is None else x.mamba_host_value[:]
    y.hash_value = None if x.hash_value is None else x.hash_value[:]
    p = x.parent
    y.parent = None if p is None else (memo.get(id(p)) or fast_copy(p, memo))
    y.children = {k: memo.get(id(c)) or fast_copy(c, memo) for k, c in x.children.items()}
    return y


def _copy_pool(x: SlotPool, memo: dict) -> SlotPool:
    y = memo[id(x)] = SlotPool.__new__(SlotPool)
    y.__dict__.update(x.__dict__)  # name, size, device, data (shared), counters, observer, stack_fn
    y.free_slots, y._free_count, y.double_frees = deque(x.free_slots), x._free_count.copy(), x.double_frees[:]
    y.inflight, y.readers = x.inflight[:], x.readers[:]  # (empty without streams; never shared between copies)
    return y


def _copy_lru(x: LRUList, memo: dict) -> LRUList:
    y = memo[id(x)] = LRUList.__new__(LRUList)
    y.__dict__.update(x.__dict__)  # kind, name, _lock, observer; links rebuilt below
    links = {id(x.head): _Link(None), id(x.tail): _Link(None)}
    y.head, y.tail = links[id(x.head)], links[id(x.tail)]
    old, new = x.head, y.head
    while old.next is not None:
        nxt = old.next
        n = nxt.node
        made = links.get(id(nxt)) or _Link(memo.get(id(n)) or fast_copy(n, memo))
        links[id(nxt)] = made
        new.next, made.prev = made, new
        old, new = nxt, made
    y.cache = {k: links[id(link)] for k, link in x.cache.items()}
    return y


def _copy_leafset(x: LeafSet, memo: dict) -> LeafSet:
    y = memo[id(x)] = LeafSet.__new__(LeafSet)
    y.name, y.observer = x.name, x.observer
    dict.update(y, {memo.get(id(n)) or fast_copy(n, memo): None for n in dict.__iter__(x)})
    return y


def _copy_ordered_leafset(x: OrderedLeafSet, memo: dict) -> OrderedLeafSet:
    """Members copied as a plain leaf set's; the heap rebuilt from the members (between rounds that is all an
    ``EvictionRound`` needs: an entry per member at its current time)."""
    y = memo[id(x)] = OrderedLeafSet.__new__(OrderedLeafSet)
    y.name, y.observer, y.log = x.name, x.observer, None
    dict.update(y, {memo.get(id(n)) or fast_copy(n, memo): None for n in dict.__iter__(x)})
    if x.heap is None:
        y.heap = None
    else:
        y.heap = [(n.last_access_time, n) for n in y]
        heapq.heapify(y.heap)
    return y


_COPIERS = {TreeNode: _copy_node, SlotPool: _copy_pool, LRUList: _copy_lru, LeafSet: _copy_leafset,
            OrderedLeafSet: _copy_ordered_leafset}


def fast_copy(x, memo: dict):
    """``copy.deepcopy`` for the cache's object graph, several times faster: atoms, tensors, functions and frozen
    dataclasses are shared; tuples and lists of atoms are copied flat; everything else is copied once (``memo``).
    Tree nodes hold lists of slot numbers and hash strings only (``_copy_node``)."""
    t = type(x)
    if t in _SHARED:
        return x
    y = memo.get(id(x))
    if y is not None:
        return y
    special = _COPIERS.get(t)
    if special is not None:
        return special(x, memo)
    if t is tuple:
        items = [v if type(v) in _SHARED else fast_copy(v, memo) for v in x]
        y = x if all(a is b for a, b in zip(items, x, strict=False)) else tuple(items)
    elif t is list:
        y = memo[id(x)] = [v if type(v) in _SHARED else fast_copy(v, memo) for v in x]
    elif t is dict or t is OrderedDict:
        y = memo[id(x)] = t()
        for k, v in x.items():
            y[k if type(k) in _SHARED else fast_copy(k, memo)] = v if type(v) in _SHARED else fast_copy(v, memo)
    elif t is set or t is frozenset:  # (the unified cache's arena and lock skips: sets of node ids)
        y = memo[id(x)] = t(v if type(v) in _SHARED else fast_copy(v, memo) for v in x)
    elif t is deque:
        y = memo[id(x)] = deque([v if type(v) in _SHARED else fast_copy(v, memo) for v in x], maxlen=x.maxlen)
    elif t is MethodType:
        y = MethodType(x.__func__, fast_copy(x.__self__, memo))
    elif t is itertools.count:
        y = itertools.count(int(repr(x)[len("count("):-1]))
    elif t in _FROZEN or (dataclasses.is_dataclass(t) and t.__dataclass_params__.frozen):
        _FROZEN.add(t)
        y = x
    else:
        y = memo[id(x)] = t.__new__(t)
        d = getattr(x, "__dict__", None)
        if d is not None:
            y.__dict__.update({k: v if type(v) in _SHARED else fast_copy(v, memo) for k, v in d.items()})
        for name in _slots_of(t):
            try:
                object.__setattr__(y, name, fast_copy(getattr(x, name), memo))
            except AttributeError:
                pass
    memo[id(x)] = y
    return y

