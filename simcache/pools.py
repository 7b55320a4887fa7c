"""Memory pools: real free lists over torch tensors that hold data.

Vocabulary: a *slot* holds the KV of one token (KV pools) or one Mamba state (Mamba pools). Four pools exist:
``device_kv`` and ``device_mamba`` (on ``cuda`` when available), ``host_kv`` and ``host_mamba`` (CPU, pinned when
CUDA is present).

Semantics follow SGLang's pools as the oracle runs them: the free list starts as ``[0..N-1]``; ``alloc(n)`` takes
the first ``n`` free slots or fails with ``None``; ``free`` appends. Freeing a slot that is already free is
*accepted* (the real pools do not notice, and later hand the slot out twice) and *recorded* in
``double_frees``. A leak is an allocated slot nobody refers to: ``accounting(referenced)`` reports it.

Data: each slot stores an int64 fingerprint. Request KV for the token at position ``i`` of a prefix is
``kv_fingerprint(prefix[: i + 1])``; a Mamba state after a prefix is ``mamba_fingerprint(prefix)``. Copies between
tiers move the fingerprints, so the content of every cached prefix can be checked against what was written.
"""
from __future__ import annotations

import functools
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

_MASK = (1 << 62) - 1


def kv_fingerprints(tokens: Sequence[int], start: int = 0) -> list[int]:
    """Fingerprints of the KV of ``tokens[start:]``, each a function of the whole prefix up to that token."""
    out, h = [], 0x9E3779B97F4A7C15
    for i, t in enumerate(tokens):  # one pass; tokens are ints (operation files are validated)
        h = ((h ^ (t & 0xFFFFFFFF)) * 0x100000001B3 + i) & _MASK
        out.append(h)
    return out[start:] if start else out


def mamba_fingerprint(tokens: Sequence[int]) -> int:
    """Fingerprint of the Mamba state after ``tokens`` (a different function than the KV's)."""
    return mamba_fingerprint_of(kv_fingerprints(tokens), len(tokens))


def mamba_fingerprint_of(kv: Sequence[int], n: int) -> int:
    """``mamba_fingerprint(tokens[:n])`` from ``kv = kv_fingerprints(tokens)`` (no second pass over the tokens)."""
    return ((kv[n - 1] if n else 0) * 31 + n + 7) & _MASK


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


@functools.lru_cache(maxsize=1)
def _cuda() -> bool:
    """``torch.cuda.is_available()``, asked once: a call costs tens of microseconds, and pools ask it often."""
    return torch.cuda.is_available()


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


class SlotPool:
    """A free list of ``size`` slots over a data tensor on ``device``."""

    keeps_data = True  # False where write/read are no-ops (the explorer's machines): callers skip the fingerprints

    def __init__(self, name: str, size: int, device: torch.device | str = "cpu", pin: bool = False) -> None:
        self.name, self.size = name, size
        self.device = torch.device(device)
        self.data = torch.zeros(size, dtype=torch.int64, device=self.device)
        if pin and self.device.type == "cpu" and _cuda():
            self.data = self.data.pin_memory()
        # a CPU tensor's numpy view shares its memory: small writes and reads through it skip torch's per-call cost
        self._np = self.data.numpy() if self.device.type == "cpu" else None
        self.free_slots: deque[int] = deque(range(size))
        self._free_count = [1] * size
        self.double_frees: list[DoubleFree] = []
        self.num_allocs = 0
        # called as observer(pool_name, "alloc" | "free" | "double_free" | "alloc_fail", slots)
        self.observer: Callable[[str, str, tuple[int, ...]], None] | None = None
        self.stack_fn: Callable[[], tuple[str, ...]] = tuple

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, n: int) -> list[int] | None:
        if n > len(self.free_slots):
            if self.observer is not None:
                self.observer(self.name, "alloc_fail", (n,))
            return None
        pop, counts = self.free_slots.popleft, self._free_count
        out = [pop() for _ in range(n)]
        for s in out:
            counts[s] -= 1
        self.num_allocs += 1
        if self.observer is not None:
            self.observer(self.name, "alloc", tuple(out))
        return out

    def free(self, slots: Iterable[int]) -> int:
        slots = list(slots)
        counts = self._free_count
        dup = tuple(s for s in slots if counts[s] > 0)
        if dup:
            self.double_frees.append(DoubleFree(self.name, dup, self.stack_fn()))
            if self.observer is not None:
                self.observer(self.name, "double_free", dup)
        for s in slots:
            counts[s] += 1
        self.free_slots.extend(slots)
        if self.observer is not None:
            self.observer(self.name, "free", tuple(slots))
        return len(slots)

    def is_free(self, slot: int) -> bool:
        return self._free_count[slot] > 0

    def used_slots(self) -> set[int]:
        return {s for s in range(self.size) if self._free_count[s] == 0}

    # --- data ---
    def write(self, slots: Sequence[int], values: Sequence[int]) -> None:
        if slots:
            if self._np is not None:
                self._np[list(slots)] = list(values)
                return
            idx = torch.tensor(list(slots), dtype=torch.int64, device=self.device)
            self.data[idx] = torch.tensor(list(values), dtype=torch.int64, device=self.device)

    def read(self, slots: Sequence[int]) -> list[int]:
        if not slots:
            return []
        if self.device.type == "cpu" and _cuda():
            torch.cuda.synchronize()  # a side-stream copy into this pinned pool may still be in flight
        if self._np is not None:
            return self._np[list(slots)].tolist()
        idx = torch.tensor(list(slots), dtype=torch.int64, device=self.device)
        return self.data[idx].cpu().tolist()

    def accounting(self, referenced: Iterable[int]) -> PoolAccounting:
        refs = Counter(referenced)
        in_use = self.used_slots()
        free_cnt = Counter(self.free_slots)
        return PoolAccounting(
            leaked=tuple(sorted(in_use - set(refs))),
            free_but_referenced=tuple(sorted(s for s in refs if self._free_count[s] > 0)),
            duplicated_in_free_list=tuple(sorted(s for s, k in free_cnt.items() if k > 1)),
            shared=tuple(sorted(s for s, k in refs.items() if k > 1)),
        )


def copy_slots(src: SlotPool, src_slots: Sequence[int], dst: SlotPool, dst_slots: Sequence[int],
               stream: torch.cuda.Stream | None = None) -> torch.cuda.Event | None:
    """Copy slot data between pools (tiers); on CUDA the copy runs on ``stream`` and returns its event."""
    if not src_slots:
        return None
    if stream is None and src._np is not None and dst._np is not None:
        dst._np[list(dst_slots)] = src._np[list(src_slots)]
        return None
    s_idx = torch.tensor(list(src_slots), dtype=torch.int64, device=src.device)
    d_idx = torch.tensor(list(dst_slots), dtype=torch.int64, device=dst.device)
    if stream is None:
        dst.data[d_idx] = src.data[s_idx].to(dst.device)
        return None
    stream.wait_stream(torch.cuda.current_stream())  # the request's KV was written on the default stream
    with torch.cuda.stream(stream):
        dst.data[d_idx] = src.data[s_idx].to(dst.device, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(stream)
    return ev


@dataclass
class Pools:
    device_kv: SlotPool
    device_mamba: SlotPool
    host_kv: SlotPool
    host_mamba: SlotPool

    NAMES = ("device_kv", "device_mamba", "host_kv", "host_mamba")

    @classmethod
    def create(cls, device_kv: int, device_mamba: int, host_kv: int, host_mamba: int,
               device: torch.device | str | None = None) -> Pools:
        dev = default_device() if device is None else torch.device(device)
        return cls(SlotPool("device_kv", device_kv, dev), SlotPool("device_mamba", device_mamba, dev),
                   SlotPool("host_kv", host_kv, "cpu", pin=True), SlotPool("host_mamba", host_mamba, "cpu", pin=True))

    def all(self) -> dict[str, SlotPool]:
        return {n: getattr(self, n) for n in self.NAMES}
