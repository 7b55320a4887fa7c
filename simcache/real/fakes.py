"""Fake pools and request-to-token pool that SGLang's real cache runs over (own code, nothing of SGLang's).

Vocabulary
- A *pool* is a free list of integer slots ``[0..N-1]``: ``alloc(n)`` takes the first ``n`` free slots (or gives
  None), ``free`` appends. Freeing a slot that is already free is *accepted*, as SGLang's pools accept it, and
  recorded as a double free with the SGLang functions that called it (innermost first).
- The *ledger* (``Ledger``) is one run's record of every alloc and free; ``chain`` names the frames of the loaded
  SGLang files on the stack, so a double free says which real function freed twice.
- The request-to-token pool hands out ``req_to_token`` rows and owns the device Mamba pool, with a ping-pong track
  buffer of one slot when the Mamba extra buffer is on (page size > 1).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass
class Ledger:
    real_files: frozenset[str] = frozenset()  # the loaded SGLang files: frames there form a call chain
    events: list[tuple[str, str, tuple[int, ...], tuple[str, ...]]] = field(default_factory=list)
    watch: Callable[[], None] | None = None  # the run's memory check, called by an alloc or free of many slots
    watch_from: int = 0  # how many: run_linear sets it (``trace.memory.BIG``)

    def chain(self, limit: int = 8) -> tuple[str, ...]:
        """SGLang functions on the stack, innermost first."""
        out, f = [], sys._getframe(2)
        while f is not None and len(out) < limit:
            if f.f_code.co_filename in self.real_files:
                out.append(f.f_code.co_name)
            f = f.f_back
        return tuple(out)

    def double_frees(self) -> list[dict]:
        return [dict(pool=p, slots=list(s), chain=list(c)) for k, p, s, c in self.events if k == "DOUBLE_FREE"]


def slots_of(v) -> list[int]:
    """The slot ids of a tensor, a list or None."""
    return [] if v is None else [int(x) for x in torch.as_tensor(v).flatten().tolist()]


class FreeListPool:
    """Slot free list: alloc takes the first n free slots, free appends (FIFO reuse)."""

    def __init__(self, name: str, size: int, ledger: Ledger | None = None, page_size: int = 1) -> None:
        self.name, self.size, self.page_size = name, size, page_size
        self.ledger = ledger or Ledger()
        self.device = torch.device("cpu")
        self.clear()

    def clear(self) -> None:
        self.free_slots: list[int] = list(range(self.size))

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, need_size: int) -> torch.Tensor | None:
        assert need_size % self.page_size == 0
        if need_size > len(self.free_slots):
            return None
        sel, self.free_slots = self.free_slots[:need_size], self.free_slots[need_size:]
        self.ledger.events.append(("alloc", self.name, tuple(sel), self.ledger.chain()))
        if self.ledger.watch is not None and need_size >= self.ledger.watch_from:
            self.ledger.watch()
        return torch.tensor(sel, dtype=torch.int64)

    def free(self, indices) -> int:
        idx = slots_of(indices)
        free_set = set(self.free_slots)
        dup = [i for i in idx if i in free_set]
        if dup:
            self.ledger.events.append(("DOUBLE_FREE", self.name, tuple(dup), self.ledger.chain()))
        self.ledger.events.append(("free", self.name, tuple(idx), self.ledger.chain()))
        self.free_slots.extend(idx)
        if self.ledger.watch is not None and len(idx) >= self.ledger.watch_from:
            self.ledger.watch()
        return len(idx)

    def free_segment(self, indices, start_pos: int = 0) -> int:
        """0.5.17's page-exact free of a request's KV segment: the same free list change as ``free``."""
        return self.free(indices)


class FakeDeviceKVAllocator(FreeListPool):
    """Stands in for SGLang's token-to-KV allocators (device full-attention KV slots)."""

    def __init__(self, size: int, ledger: Ledger | None = None) -> None:
        super().__init__("device_kv", size, ledger)

    def get_kvcache(self):
        return None


class FakeMambaPool(FreeListPool):
    replayssm_write_pos = None  # 0.5.17: only a ReplaySSM pool has one

    def __init__(self, size: int, ledger: Ledger | None = None) -> None:
        super().__init__("device_mamba", size, ledger)

    def copy_from(self, src, dst) -> None:
        pass


class ReqToTokenPool:
    """req_to_token rows from a free list (one per live request), and the device Mamba pool with its extra buffer."""

    def __init__(self, mamba_pool: FakeMambaPool, max_reqs: int, max_ctx: int, extra_buffer: bool) -> None:
        self.mamba_pool = mamba_pool
        self.req_to_token = torch.zeros((max_reqs, max_ctx), dtype=torch.int64)
        self.free_rows = list(range(max_reqs))
        self.extra_buffer = extra_buffer

    def alloc_req_slot(self) -> int:
        return self.free_rows.pop(0)

    def free_req_slot(self, row: int) -> None:
        self.free_rows.append(row)

    @property
    def mamba_allocator(self) -> FakeMambaPool:
        """Later versions allocate Mamba slots through the pool's slot allocator: the same free list here."""
        return self.mamba_pool

    def translate_mamba_indices(self, indices):
        return indices  # 0.5.17: the identity for a pool that is not unified

    def get_mamba_ping_pong_other_idx(self, mamba_next_track_idx: int) -> int:
        return mamba_next_track_idx

    def get_mamba_ping_pong_keep_idx(self, req) -> int:
        return self.get_mamba_ping_pong_other_idx(req.mamba_next_track_idx)

    def free_mamba_cache(self, req, mamba_ping_pong_track_buffer_to_keep=None) -> None:
        assert req.mamba_pool_idx is not None, "double free? mamba_index is None"
        self.mamba_pool.free(req.mamba_pool_idx.unsqueeze(0))
        req.mamba_pool_idx = None
        if self.extra_buffer:
            if mamba_ping_pong_track_buffer_to_keep is None:
                self.mamba_pool.free(req.mamba_ping_pong_track_buffer)
            else:
                assert mamba_ping_pong_track_buffer_to_keep == 0
            req.mamba_ping_pong_track_buffer = None
