"""Memory pools: real free lists over torch tensors that hold data.

Vocabulary: a *slot* holds the KV of one token (KV pools) or one Mamba state (Mamba pools). Four pools exist:
``device_kv`` and ``device_mamba`` (on the configured device: ``cpu`` by default, or a GPU), ``host_kv`` and
``host_mamba`` (CPU, pinned when the device pools are on a GPU).

Semantics follow SGLang's pools as the oracle runs them: the free list starts as ``[0..N-1]``; ``alloc(n)`` takes
the first ``n`` free slots or fails with ``None``; ``free`` appends. Freeing a slot that is already free is
*accepted* (the real pools do not notice, and later hand the slot out twice) and *recorded* in
``double_frees``. A leak is an allocated slot nobody refers to: ``accounting(referenced)`` reports it.

Data: each slot stores an int64 fingerprint. Request KV for the token at position ``i`` of a prefix is
``kv_fingerprint(prefix[: i + 1])``; a Mamba state after a prefix is ``mamba_fingerprint(prefix)``. Copies between
tiers move the fingerprints, so the content of every cached prefix can be checked against what was written.

Copies between tiers, with and without streams: ``pool_copy``; the fingerprints: ``fingerprints``; slot index arrays
and the free counts' bookkeeping: ``slot_arrays``. Every name this module held imports from here as before.
"""
# ruff: noqa: F401 -- the names moved to fingerprints, slot_arrays and pool_copy, importable from here as before
from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, filterfalse, repeat, starmap
from operator import not_

import numpy as np
import torch

from .fingerprints import (
    _B,
    _B_INV,
    _C,
    _H0,
    _MASK,
    KV_START,
    _powers,
    _token_terms,
    kv_extend,
    kv_fingerprint_array,
    kv_fingerprints,
    mamba_fingerprint,
    mamba_fingerprint_of,
)
from .pool_copy import (
    PendingCopy,
    _copy_into,
    _cpu_index,
    _default_waits_for_load,
    _gather,
    _host_waits_for,
    _index,
    _index_stream,
    _on,
    _put,
    _scatter,
    _side_waits_for_default,
    _span,
    _take,
    copy_slots,
)
from .slot_arrays import _BIG, _MANY, _MINUS_ONE, _PLUS_ONE, _has_repeats, _idx, _last_writes, _shift
from .streams import _CPU, backend_for, resolve_device


@dataclass(frozen=True)
class DoubleFree:
    pool: str
    slots: tuple[int, ...]
    stack: tuple[str, ...]


@dataclass(frozen=True)
class PoolAccounting:
    leaked: tuple[int, ...]
    free_but_referenced: tuple[int, ...]
    duplicated_in_free_list: tuple[int, ...]
    shared: tuple[int, ...]


# ``_CPU`` (streams.py): devices are immutable, one object serves every CPU pool, and ``is _CPU`` answers without
# asking torch (reading ``device.type`` builds a string in C++: a few per pool were 1% of an explorer schedule)


class SlotPool:
    """A free list of ``size`` slots over a data tensor on ``device``; ``host`` pools are the CPU tier."""

    keeps_data = True  # False where write/read are no-ops (the explorer's machines): callers skip the fingerprints

    def __init__(self, name: str, size: int, device: torch.device | str = "cpu", pin: bool = False,
                 host: bool = False, streams=None) -> None:
        self.name, self.size, self.host = name, size, host
        self.device = device if type(device) is torch.device else (
            _CPU if device == "cpu" else torch.device(device))
        self._pin = pin
        if self.device is not _CPU and self.device.type != "cpu":  # a CPU pool's tensor: on first use (__getattr__)
            self._make_data()
        self.free_slots: deque[int] = deque(range(size))
        # a slot's occurrences in the free list (0: allocated); a numpy array in a big pool (see _BIG)
        self._free_count: list[int] | np.ndarray = np.ones(size, dtype=np.int64) if size >= _BIG else [1] * size
        self._repeats = False
        self._stamp: np.ndarray | None = None  # a big pool's scratch for _has_repeats
        self._recent: tuple = (None, None)  # a big pool's last allocation: (the list handed out, its index array)
        # called as on_write(pool, index array) after a write into the numpy view (write, copy_slots): the boundary
        # check re-reads only those slots of a big pool (other paths write on a GPU or with streams, where it reads
        # every slot)
        self.on_write: Callable[[SlotPool, np.ndarray], None] | None = None
        self.double_frees: list[DoubleFree] = []
        self.num_allocs = 0
        # called as observer(pool_name, "alloc" | "free" | "double_free" | "alloc_fail", slots); during the call of
        # an alloc or free that a big pool made an index array of, ``event_idx`` is that array (else None)
        self.observer: Callable[[str, str, tuple[int, ...]], None] | None = None
        self.event_idx: np.ndarray | None = None
        self.stack_fn: Callable[[], tuple[str, ...]] = tuple
        self.streams = streams  # None: no streams, every copy happens at once
        self.inflight: list[PendingCopy] = []  # host pool: copies using its staging buffer, oldest first
        self.readers: list = []  # device pool: events of backups that may still read its slots
        self._staging: torch.Tensor | None = None

    def _make_data(self) -> None:
        if self.device is _CPU and not self._pin:  # numpy's zeros are pages zeroed when first touched: a big pool
            self.data = torch.from_numpy(np.zeros(self.size, dtype=np.int64))  # costs what it uses
        else:
            self.data = torch.zeros(self.size, dtype=torch.int64, device=self.device)
        if self._pin:
            self.data = self.data.pin_memory()
        self.rebind_view()

    def __getattr__(self, name: str):
        """``data`` and ``_np`` of a CPU pool, made on first use: the explorer's machines never touch them (their
        pools keep no data), and four tensors per machine were a fifth of the cost of building one."""
        if name in ("data", "_np") and "size" in self.__dict__:
            self._make_data()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, n: int) -> list[int] | None:
        if n > len(self.free_slots):
            if self.observer is not None:
                self.observer(self.name, "alloc_fail", (n,))
            return None
        pop = self.free_slots.popleft
        counts = self._free_count
        idx = None
        if n == 1:  # a Mamba state, most allocations
            s = pop()
            counts[s] -= 1
            out = [s]
        elif counts.__class__ is list:
            out = list(starmap(pop, repeat((), n)))  # n pops at C speed
            _shift(counts, out, _MINUS_ONE)
        else:
            out = list(starmap(pop, repeat((), n)))
            idx = np.fromiter(out, dtype=np.int64, count=n)
            if self._repeats:
                np.subtract.at(counts, idx, 1)
            else:  # no slot is in the free list twice, so none is popped twice
                counts[idx] -= 1
            self._recent = (out, idx)  # the write of the new slots that usually follows indexes with it
        self.num_allocs += 1
        if self.observer is not None:
            self.event_idx = idx
            try:
                self.observer(self.name, "alloc", tuple(out))
            finally:
                self.event_idx = None
        return out

    def free(self, slots: Iterable[int]) -> int:
        slots = list(slots)
        counts = self._free_count
        idx = None
        if counts.__class__ is list or len(slots) < _MANY:
            dup = tuple(compress(slots, map(counts.__getitem__, slots)))  # already free (counts are never negative)
            if len(slots) == 1:
                counts[slots[0]] += 1
            elif counts.__class__ is list:
                _shift(counts, slots, _PLUS_ONE)
            else:
                for s in slots:
                    counts[s] += 1
            if counts.__class__ is not list and (dup or len(set(slots)) < len(slots)):
                self._repeats = True
        else:  # a big pool, many slots: in C
            idx = _idx(slots)
            before = counts[idx]
            nz = np.flatnonzero(before)
            dup = tuple(idx[nz].tolist()) if nz.size else ()
            if self._stamp is None:
                self._stamp = np.zeros(self.size, dtype=np.int64)
            if dup or self._repeats or _has_repeats(idx, self._stamp):
                self._repeats = True
                np.add.at(counts, idx, 1)
            else:
                counts[idx] = before + 1
        if dup:
            self.double_frees.append(DoubleFree(self.name, dup, self.stack_fn()))
            if self.observer is not None:
                self.observer(self.name, "double_free", dup)
        self.free_slots.extend(slots)
        if self.observer is not None:
            self.event_idx = idx
            try:
                self.observer(self.name, "free", tuple(slots))
            finally:
                self.event_idx = None
        return len(slots)

    def is_free(self, slot: int) -> bool:
        return bool(self._free_count[slot] > 0)

    def used_slots(self) -> set[int]:
        return set(self._in_use())

    def _in_use(self) -> list[int]:
        """The allocated slots (free count 0), in increasing order."""
        counts = self._free_count
        if counts.__class__ is list:
            return list(compress(range(self.size), map(not_, counts)))
        return np.flatnonzero(counts == 0).tolist()

    def own_data(self) -> None:
        """Give this pool a copy of ``data`` of its own (a copy of the pool shares the tensor, as a checkpoint's
        does) and point the numpy view at it. A CPU tensor is copied by numpy, in one thread: torch's clone of a big
        pool splits the copy over threads that spin while they wait (a millisecond of CPU for 72,000 slots)."""
        data = self.data
        if data.device.type == "cpu" and not data.is_pinned():
            self.data = torch.from_numpy(data.numpy().copy())
        else:
            self.data = data.clone()
        self.rebind_view()

    def rebind_view(self) -> None:
        """Point the numpy view at ``self.data`` (call after replacing ``data``, e.g. a checkpoint's clone)."""
        # a CPU tensor's numpy view shares its memory: small writes and reads through it skip torch's per-call cost
        self._np = self.data.numpy() if self.device.type == "cpu" else None

    # --- data ---
    def write(self, slots: Sequence[int], values: Sequence[int]) -> None:
        if not slots:
            return
        st = self.streams
        if st is None or self.host:
            self.flush()  # a pending backup into this pool lands first, as it would have without streams
            if self._np is not None:  # a numpy view: small writes skip torch's per-call cost
                idx = _idx(slots, self)
                self._np[idx] = values if values.__class__ is np.ndarray else list(values)
                if self.on_write is not None:
                    self.on_write(self, idx)
                return
            if values.__class__ is np.ndarray:
                values = values.tolist()
            slots, values = _last_writes(slots, values)  # a device pool without streams: an index write too
            idx = torch.tensor(list(slots), dtype=torch.int64, device=self.device)
            self.data[idx] = torch.tensor(list(values), dtype=torch.int64, device=self.device)
            return
        self._wait_for_readers()
        if values.__class__ is np.ndarray:
            values = values.tolist()
        slots, values = _last_writes(slots, values)
        st.launch(st.default, _put, self.data, st.upload(list(slots), st.default),
                  st.upload(list(values), st.default))

    def read(self, slots: Sequence[int]) -> list[int]:
        if not slots:
            return []
        st = self.streams
        if st is None or self.host:
            self.flush()
            if self._np is not None:
                return self._np[_idx(slots)].tolist()
            return self.data[torch.tensor(list(slots), dtype=torch.int64, device=self.device)].tolist()
        return st.to_host(st.default, _take, self.data, st.upload(list(slots), st.default)).tolist()

    def flush(self) -> None:
        """Complete every copy still using this host pool, so its data is what the plain copies would have left."""
        for copy in list(self.inflight):
            copy.complete()

    def _staging_for(self, n: int) -> torch.Tensor:
        """The pool's pinned staging buffer (``n`` slots), once no earlier copy still uses it."""
        self._wait_for_staging()
        if self._staging is None or self._staging.numel() < n:
            size = max(n, 2 * (0 if self._staging is None else self._staging.numel()))
            self._staging = torch.empty(size, dtype=torch.int64, pin_memory=self.data.is_pinned())
        return self._staging[:n]

    def _wait_for_staging(self) -> None:
        """Earlier copies of this host pool complete (in issue order) before the next one uses its staging buffer
        or its slots: a staged backup's host scatter must not land after a later copy."""
        for copy in list(self.inflight):
            copy.complete()

    def _wait_for_readers(self) -> None:
        """The default stream waits for the backups reading this pool before it writes (a freed slot may be
        handed out again while a backup still reads it)."""
        st = self.streams
        for event in self.readers:
            st.wait(st.default, event)
        self.readers.clear()

    def _accounting_in_c(self, referenced) -> PoolAccounting | None:
        """``accounting`` of a big pool with numpy: how often each slot is referenced (``bincount``) against its free
        count; None when a reference is not a slot of the pool (the general path then says what it says)."""
        refs = np.fromiter(referenced, dtype=np.int64)
        if len(refs) and (refs.min() < 0 or refs.max() >= self.size):
            return None
        held = np.bincount(refs, minlength=self.size)
        counts = self._free_count
        return PoolAccounting(
            leaked=tuple(np.flatnonzero((counts == 0) & (held == 0)).tolist()),
            free_but_referenced=tuple(np.flatnonzero((counts > 0) & (held > 0)).tolist()),
            duplicated_in_free_list=tuple(np.flatnonzero(counts > 1).tolist()),
            shared=tuple(np.flatnonzero(held > 1).tolist()),
        )

    def accounting(self, referenced: Iterable[int]) -> PoolAccounting:
        counts = self._free_count
        if counts.__class__ is not list:
            referenced = referenced if referenced.__class__ is list else list(referenced)
            got = self._accounting_in_c(referenced)
            if got is not None:
                return got
        refs = Counter(referenced)
        # a slot's free count is its number of occurrences in the free list: above 1, it is listed twice
        if counts.__class__ is list:
            free_refs = compress(refs, map(counts.__getitem__, refs))
            repeated = compress(range(self.size), map((1).__lt__, counts))
        else:
            keys = np.fromiter(refs, dtype=np.int64, count=len(refs))
            free_refs = keys[counts[keys] > 0].tolist() if len(keys) else ()
            repeated = np.flatnonzero(counts > 1).tolist()
        return PoolAccounting(
            leaked=tuple(filterfalse(refs.__contains__, self._in_use())),
            free_but_referenced=tuple(sorted(free_refs)),
            duplicated_in_free_list=tuple(repeated),
            shared=tuple(sorted(compress(refs, map((1).__lt__, refs.values())))),
        )


@dataclass
class Pools:
    device_kv: SlotPool
    device_mamba: SlotPool
    host_kv: SlotPool
    host_mamba: SlotPool

    NAMES = ("device_kv", "device_mamba", "host_kv", "host_mamba")

    @classmethod
    def create(cls, device_kv: int, device_mamba: int, host_kv: int, host_mamba: int,
               device: torch.device | str = "cpu", streams=None) -> Pools:
        """Pools whose device tier is on ``device``; ``streams`` overrides its stream backend (the emulation)."""
        dev = resolve_device(device) if isinstance(device, str) else torch.device(device)
        st = backend_for(dev) if streams is None else streams
        pin = dev is not _CPU and dev.type == "cuda"
        return cls(SlotPool("device_kv", device_kv, dev, streams=st),
                   SlotPool("device_mamba", device_mamba, dev, streams=st),
                   SlotPool("host_kv", host_kv, "cpu", pin=pin, host=True, streams=st),
                   SlotPool("host_mamba", host_mamba, "cpu", pin=pin, host=True, streams=st))

    @property
    def streams(self):
        return self.device_kv.streams

    def all(self) -> dict[str, SlotPool]:
        return {n: getattr(self, n) for n in self.NAMES}
