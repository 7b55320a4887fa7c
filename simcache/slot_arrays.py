"""Slot lists as index arrays, and a small pool's free counts moved at C speed (``pools.SlotPool``'s bookkeeping; the
copies' ``_last_writes`` too)."""
from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
import torch

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


def _idx(slots, pool=None) -> np.ndarray:
    """Slots as an index array (``np.fromiter`` reads a list of ints several times faster than numpy's indexing
    converts one); the list ``pool`` (a ``pools.SlotPool``) last allocated is already one."""
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
