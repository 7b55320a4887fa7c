"""The state key of a unified machine (``simcache.unified``): everything the cache, its controller, its pools and
the driver hold, read generically, so a new attribute of the model is read without anyone listing it.

The walk visits the object graph from (cache, driver) in a fixed order: objects by discovery number (shared
references stay shared), dict entries in insertion order, set members sorted, every float (the clock: access and
creation times) replaced by its rank among the state's floats (only comparisons read them, and every future time
is later). It leaves out only what steers nothing: the recorder and observers, the pools' data tensors and the
caches of their fast paths, the config and flags (the same for every machine of a plan) and trace counters.

Conservative: node ids, slot numbers and storage op ids are read as they are, so two states equal up to a renaming
count as two (the search prunes less than it could; it never prunes a state it has not seen). HiMamba's key
(``statekey``) renames them; the unified model is small enough not to need it.
"""
from __future__ import annotations

import hashlib
import itertools
from collections import deque
from types import BuiltinFunctionType, FunctionType, MethodType

import torch

_SKIP = frozenset({"recorder", "observer", "stack_fn", "on_write", "data", "_stamp", "_recent", "num_allocs",
                   "streams", "_staging", "device", "_pin", "config", "flags", "components", "cuts", "detach_count",
                   "last_lock_delta", "stream", "_np", "host_queries"})
_ATOMS = (int, str, bool, bytes, type(None))


class _Time(float):
    """A float of the state, replaced by its rank when the key is written."""


def _walk(x, out: list, seen: dict) -> None:
    t = type(x)
    if t in _ATOMS:
        out.append(x)
        return
    if t is float:
        out.append(_Time(x))
        return
    got = seen.get(id(x))
    if got is not None:
        out.append(("@", got))
        return
    seen[id(x)] = len(seen)
    if t in (list, tuple, deque):
        out.append((t.__name__, len(x)))
        for v in x:
            _walk(v, out, seen)
    elif isinstance(x, dict):  # dict, OrderedDict, LeafSet (its members are its keys)
        out.append((t.__name__, len(x), getattr(x, "name", None)))
        for k, v in dict.items(x):
            _walk(k, out, seen)
            _walk(v, out, seen)
    elif t in (set, frozenset):
        out.append(("set", tuple(sorted(map(repr, x)))))
    elif t in (FunctionType, BuiltinFunctionType):
        out.append(("fn", x.__qualname__))
    elif t is MethodType:
        out.append(("method", x.__func__.__qualname__))
        _walk(x.__self__, out, seen)
    elif t is itertools.count:
        out.append(repr(x))
    elif isinstance(x, torch.Tensor):
        out.append(("tensor", tuple(x.shape)))
    else:
        out.append(t.__qualname__)
        d = getattr(x, "__dict__", None)
        names = sorted(d) if d is not None else []
        names += [s for c in t.__mro__ for s in c.__dict__.get("__slots__", ()) if s != "__dict__"]
        for name in names:
            if name in _SKIP:
                continue
            try:
                v = getattr(x, name)
            except AttributeError:
                continue
            out.append(name)
            _walk(v, out, seen)


def unified_key(cache, driver, positions: tuple) -> bytes:
    """A 16-byte digest of the machine's state and the actors' positions."""
    out: list = [positions]
    _walk((cache, driver.live, driver.nreq), out, {})
    ranks = {v: i for i, v in enumerate(sorted({float(v) for v in out if type(v) is _Time}))}
    text = repr([("t", ranks[float(v)]) if type(v) is _Time else v for v in out])
    return hashlib.blake2b(text.encode(), digest_size=16).digest()
