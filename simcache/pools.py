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

Copies with streams (``streams.py``; none on cpu, where every copy happens at once). A copy runs on the
controller's side stream and gives a ``PendingCopy``: one block of consecutive slots each way is copied straight
between the pinned host pool and the device; other slots go through the host pool's pinned staging buffer (a
gather on the device, then a scatter on the host). The orderings that make it equal to the plain copy:
- the side stream waits for the default stream before each copy (the model wrote the source there);
- index tensors are made on the side stream that reads them (their memory is reused only after that work);
- a staged backup reaches the host pool only in ``PendingCopy.complete`` (at the ack), after its event, and every
  host read or write first completes the pool's pending copies (``flush``);
- a host pool's copies complete in order, one staging user at a time (``_wait_for_staging`` before the next);
- the default stream waits for a load before its next work (the model reads what was loaded), and for a backup
  before it next writes the pool the backup reads (a freed slot is not overwritten while a copy reads it).
A slot named twice as a destination (possible only after a double free hands it out twice) keeps the value of its
last writer, on every device: numpy's assignment on the CPU does that, but CUDA's index writes (``index_put_``,
``index_copy_``) leave which of the repeated writes lands undefined, so the stream path writes each slot once
(``_last_writes``).
"""
from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, filterfalse, repeat, starmap
from operator import not_

import numpy as np
import torch

from .streams import _CPU, backend_for, resolve_device

_MASK = (1 << 62) - 1
# The KV fingerprint is a polynomial hash mod 2**62: h(i) = h(i - 1) * _B + (t(i) mod 2**32) + _C, from h(-1) = _H0.
# Unlike a hash that xors each token in, it is linear, so numpy computes a whole prompt at once: with B^-j the
# inverse powers (``_B`` is odd, so it is invertible mod 2**64), h(i) = B^(i+1) * (h0 + sum_j g(j) * B^-(j+1)), one
# cumulative sum in wrap-around unsigned 64-bit arithmetic, then mod 2**62 (a ring map: the same as working mod 2**62
# throughout, so a fingerprint is also the state its successors extend).
_B, _C, _H0 = 0x9E3779B97F4A7C15, 0x632BE59BD9B4E019, 0x2545F4914F6CDD1D
_B_INV = pow(_B, -1, 1 << 64)
KV_START = _H0  # the state ``kv_extend`` continues from before a prompt's first token
_U64 = np.uint64
_POW = np.ones(1, dtype=_U64)  # _B ** k mod 2**64, k = 0 ..; grown on demand
_INV = np.ones(1, dtype=_U64)  # _B ** -k mod 2**64


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(_B ** k, _B ** -k) mod 2**64 for k = 0 .. n at least."""
    global _POW, _INV
    if len(_POW) <= n:
        size = max(n + 1, 2 * len(_POW), 1024)
        _POW = np.concatenate((np.ones(1, dtype=_U64), np.full(size - 1, _B, dtype=_U64).cumprod()))
        _INV = np.concatenate((np.ones(1, dtype=_U64), np.full(size - 1, _B_INV, dtype=_U64).cumprod()))
    return _POW, _INV


def _token_terms(tokens: Sequence[int]) -> np.ndarray:
    """``t mod 2**32 + _C`` for each token, as uint64 (any int: a token past int64 is reduced in Python)."""
    try:
        arr = np.fromiter(tokens, dtype=np.int64, count=len(tokens))
    except OverflowError:
        arr = np.fromiter((t & 0xFFFFFFFF for t in tokens), dtype=np.int64, count=len(tokens))
    return (arr & 0xFFFFFFFF).astype(_U64) + _U64(_C)


def kv_fingerprint_array(tokens: Sequence[int], h: int = _H0) -> np.ndarray:
    """The fingerprints of ``tokens`` continuing from state ``h`` (``_H0``: from the start; a prefix's last
    fingerprint: after that prefix), as an int64 array, computed at C speed."""
    n = len(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    pw, inv = _powers(n)
    acc = np.cumsum(_token_terms(tokens) * inv[1 : n + 1])
    acc += _U64(h)
    acc *= pw[1 : n + 1]
    acc &= _U64(_MASK)
    return acc.view(np.int64)


def kv_extend(h: int, tokens: Sequence[int]) -> tuple[list[int], int]:
    """(the fingerprints of ``tokens`` after a prefix whose last fingerprint is ``h``, the last of them): the
    fingerprints of ``prefix + tokens`` from ``len(prefix)`` on, without the prefix's tokens."""
    if not tokens:
        return [], h
    out = kv_fingerprint_array(tokens, h).tolist()
    return out, out[-1]


def kv_fingerprints(tokens: Sequence[int], start: int = 0) -> list[int]:
    """Fingerprints of the KV of ``tokens[start:]``, each a function of the whole prefix up to that token."""
    return kv_fingerprint_array(tokens)[start:].tolist()


def mamba_fingerprint(tokens: Sequence[int]) -> int:
    """Fingerprint of the Mamba state after ``tokens`` (a different function than the KV's)."""
    n = len(tokens)
    return mamba_fingerprint_of(kv_fingerprint_array(tokens) if n else (), n)


def mamba_fingerprint_of(kv: Sequence[int], n: int) -> int:
    """``mamba_fingerprint(tokens[:n])`` from ``kv = kv_fingerprints(tokens)`` (no second pass over the tokens)."""
    return ((int(kv[n - 1]) if n else 0) * 31 + n + 7) & _MASK


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


_MINUS_ONE, _PLUS_ONE = (-1).__add__, (1).__add__


def _shift(counts: list[int], slots: list[int], by: Callable[[int], int]) -> None:
    """``counts[s] = by(counts[s])`` for each slot in order, at C speed (every pool operation does this): the maps
    are lazy, so a slot listed twice is read after its first write and moves twice, as in a loop."""
    deque(map(counts.__setitem__, slots, map(by, map(counts.__getitem__, slots))), 0)


# A pool of at least _BIG slots keeps its free counts in a numpy array, so that a request's thousands of slots move
# in one indexed update; a smaller pool (the explorer's, a scenario's) keeps a list, cheaper to index one slot at a
# time and to copy. An indexed update counts a slot listed twice once, so a big pool uses it only while no slot can
# repeat: ``_repeats`` turns on (and stays on) once a slot is in the free list twice (a double free, or a slot
# listed twice in one free), and from then on ``np.add.at`` counts every occurrence.
_BIG = 2048
_MANY = 32  # below this many slots, one at a time even in a big pool


def _idx(slots, pool: SlotPool | None = None) -> np.ndarray:
    """Slots as an index array (``np.fromiter`` reads a list of ints several times faster than numpy's indexing
    converts one); the list ``pool`` last allocated is already one."""
    if slots.__class__ is np.ndarray:
        return slots
    if pool is not None:
        recent = pool._recent
        if slots is recent[0] and len(slots) == len(recent[1]):
            return recent[1]
    if isinstance(slots, torch.Tensor):
        return slots.numpy()
    return np.fromiter(slots, dtype=np.int64, count=len(slots))


def _has_repeats(idx: np.ndarray, stamp: np.ndarray) -> bool:
    """Whether a slot occurs twice in ``idx``: each position writes its number into ``stamp`` (scratch, one entry per
    slot); a slot listed twice keeps only its last position's."""
    where = np.arange(len(idx))
    stamp[idx] = where
    return bool((stamp[idx] != where).any())


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
        # called as observer(pool_name, "alloc" | "free" | "double_free" | "alloc_fail", slots)
        self.observer: Callable[[str, str, tuple[int, ...]], None] | None = None
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
            self.observer(self.name, "alloc", tuple(out))
        return out

    def free(self, slots: Iterable[int]) -> int:
        slots = list(slots)
        counts = self._free_count
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
            self.observer(self.name, "free", tuple(slots))
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


def _last_writes(dst_slots, src):
    """``(dst_slots, src)`` with each destination slot kept once, with its last source: what the CPU's numpy
    assignment leaves, made explicit for CUDA's index writes, which leave the winner of repeated slots undefined.
    Slots given as a tensor are taken as they are (only a benchmark passes them, a permutation: none repeats)."""
    if isinstance(dst_slots, torch.Tensor):
        return dst_slots, src
    dst = list(dst_slots)
    if len(set(dst)) == len(dst):
        return dst, src
    src = src.tolist() if isinstance(src, torch.Tensor) else list(src)
    last = {slot: i for i, slot in enumerate(dst)}  # a later occurrence overwrites an earlier one
    keep = sorted(last.values())
    return [dst[i] for i in keep], [src[i] for i in keep]


def _put(data: torch.Tensor, idx: torch.Tensor, values: torch.Tensor) -> None:
    data[idx] = values


def _take(data: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return data[idx]


def _gather(data: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(data.index_select(0, idx), non_blocking=True)


def _scatter(data: torch.Tensor, idx: torch.Tensor, staged: torch.Tensor) -> None:
    data.index_copy_(0, idx, staged.to(data.device, non_blocking=True))


class PendingCopy:
    """A copy issued on a side stream. ``complete()`` waits for its event; for a backup it then moves the staged
    data into the host pool. Until then the host pool's staging buffer belongs to it."""
    __slots__ = ("streams", "event", "host", "host_idx", "staged", "done")

    def __init__(self, streams, event, host: SlotPool, host_idx: torch.Tensor | None,
                 staged: torch.Tensor | None) -> None:
        self.streams, self.event, self.host, self.host_idx, self.staged = streams, event, host, host_idx, staged
        self.done = False

    def complete(self) -> None:
        if self.done:
            return
        _host_waits_for(self.streams, self.event)
        if self.host_idx is not None:  # a staged backup: its data is on the host only now
            self.host.data[self.host_idx] = self.staged
        self.done = True
        self.host.inflight.remove(self)


# The synchronisations, one function each (tests/test_streams.py removes each in turn and watches a test fail).
def _host_waits_for(st, event) -> None:
    st.synchronize(event)  # a non-blocking device->host result is undefined until its event


def _side_waits_for_default(st, stream) -> None:
    st.wait(stream, st.record(st.default))  # the model wrote the source (and reused the destination) there


def _index_stream(st, stream):
    return stream  # index tensors are made on the stream that reads them


def _default_waits_for_load(st, event) -> None:
    st.wait(st.default, event)  # the model's next work reads (or overwrites) what the load writes


def _span(slots) -> tuple[int, int] | None:
    """``(start, stop)`` when ``slots`` are consecutive (``range(4, 7)``, ``[4, 5, 6]``), else None."""
    if isinstance(slots, range):
        return (slots.start, slots.stop) if slots.step == 1 else None
    if isinstance(slots, torch.Tensor) or slots[-1] - slots[0] != len(slots) - 1:
        return None
    first = slots[0]
    return (first, first + len(slots)) if all(s == first + i for i, s in enumerate(slots)) else None


def _index(slots) -> torch.Tensor | list[int]:
    return slots if isinstance(slots, torch.Tensor) else list(slots)


def _cpu_index(slots) -> torch.Tensor:
    return slots if isinstance(slots, torch.Tensor) else torch.tensor(list(slots), dtype=torch.int64)


def _on(slots, device: torch.device) -> torch.Tensor:
    if isinstance(slots, torch.Tensor):
        return slots.to(device)
    return torch.tensor(list(slots), dtype=torch.int64, device=device)


def _copy_into(out: torch.Tensor, src: torch.Tensor) -> None:
    out.copy_(src, non_blocking=True)


def copy_slots(src: SlotPool, src_slots: Sequence[int], dst: SlotPool, dst_slots: Sequence[int],
               stream=None) -> PendingCopy | None:
    """Copy slot data between pools (tiers); with streams the copy runs on ``stream`` and returns its
    ``PendingCopy``, without them it is done on return. Slots are a list, a range or a CPU int64 tensor; two
    consecutive runs copy straight between the pools, others go through the host pool's staging buffer."""
    if len(src_slots) == 0:
        return None
    st = src.streams or dst.streams
    if st is None or stream is None:
        if src._np is not None and dst._np is not None:  # plain CPU pools: numpy views, no torch call
            idx = _idx(dst_slots, dst)
            dst._np[idx] = src._np[_idx(src_slots, src)]
            if dst.on_write is not None:
                dst.on_write(dst, idx)
            return None
        dst_slots, src_slots = _last_writes(dst_slots, src_slots)
        s_idx, d_idx = _on(src_slots, src.device), _on(dst_slots, dst.device)
        dst.data[d_idx] = src.data[s_idx].to(dst.device)
        return None
    s_span, d_span = _span(src_slots), _span(dst_slots)
    if not (s_span and d_span):  # scattered: a slot repeated in dst_slots (after a double free) is written once
        dst_slots, src_slots = _last_writes(dst_slots, src_slots)
    n = len(src_slots)
    host = dst if dst.host else src
    if s_span and d_span:  # one block each way: one copy between the pinned host pool and the device
        host._wait_for_staging()  # earlier copies of this host pool complete first (their scatters, in order)
        _side_waits_for_default(st, stream)
        into = dst.data[d_span[0] : d_span[1]]
        st.launch(stream, _copy_into, into, src.data[s_span[0] : s_span[1]], host_out=into if dst.host else None)
        event = st.record(stream)
        copy = PendingCopy(st, event, host, None, None)
    elif dst.host:  # backup: device -> pinned staging -> (at completion) host pool
        staged = dst._staging_for(n)
        _side_waits_for_default(st, stream)
        st.launch(stream, _gather, src.data, st.upload(_index(src_slots), _index_stream(st, stream)), staged,
                  host_out=staged)
        event = st.record(stream)
        copy = PendingCopy(st, event, dst, _cpu_index(dst_slots), staged)
    else:  # load: host pool -> pinned staging (gathered on the CPU now) -> device
        staged = src._staging_for(n)
        torch.index_select(src.data, 0, _cpu_index(src_slots), out=staged)
        _side_waits_for_default(st, stream)
        st.launch(stream, _scatter, dst.data, st.upload(_index(dst_slots), _index_stream(st, stream)), staged)
        event = st.record(stream)
        copy = PendingCopy(st, event, src, None, staged)
    if dst.host:
        src.readers = [e for e in src.readers if not e.query()] + [event]  # finished reads need no wait
    else:
        _default_waits_for_load(st, event)
    host.inflight.append(copy)
    return copy


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
