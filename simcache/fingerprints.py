"""Content fingerprints: what a KV slot or a Mamba slot must hold (``pools`` stores them in its slots).

Request KV for the token at position ``i`` of a prefix is ``kv_fingerprint(prefix[: i + 1])``; a Mamba state after a
prefix is ``mamba_fingerprint(prefix)``. A whole prompt's KV fingerprints are one numpy pass (below).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
