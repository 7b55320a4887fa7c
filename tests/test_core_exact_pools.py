"""Exact outcomes of ``simcache/pools.py``: fingerprints, free lists and free counts, observer events, double
frees, accounting, slot data and copies (plain and under the stream emulation) (mutation testing, issue 19)."""
from __future__ import annotations

from simcache.pools import kv_fingerprints, mamba_fingerprint, mamba_fingerprint_of

M62 = (1 << 62) - 1


def reference_kv(tokens):
    """The KV fingerprint written out: token i folds ``t mod 2**32`` into the running hash, then adds ``i``."""
    out, h = [], 0x9E3779B97F4A7C15
    for i, t in enumerate(tokens):
        h = ((h ^ (t % 2**32)) * 0x100000001B3 + i) % 2**62
        out.append(h)
    return out


def test_kv_fingerprints_fold_each_token_and_its_position_into_a_62_bit_hash():
    tokens = [5, 2**32 + 5, -1, 0, 2**40 + 7, 12345]
    assert kv_fingerprints(tokens) == reference_kv(tokens)
    first = (0x9E3779B97F4A7C15 ^ 5) * 0x100000001B3 % 2**62
    assert kv_fingerprints([5]) == [first]
    # the token is taken mod 2**32 (5 and 2**32 + 5 fold in the same) but the position makes the two differ
    assert kv_fingerprints([5, 5])[1] == ((first ^ 5) * 0x100000001B3 + 1) % 2**62
    assert kv_fingerprints([5, 2**32 + 5]) == kv_fingerprints([5, 5])
    assert all(0 <= h <= M62 for h in kv_fingerprints(tokens))
    # ``start`` drops the first fingerprints, each still a function of the whole prefix
    assert kv_fingerprints(tokens, 2) == reference_kv(tokens)[2:]
    assert kv_fingerprints(tokens, 1) == reference_kv(tokens)[1:]
    assert kv_fingerprints(tokens, 0) == reference_kv(tokens)
    assert kv_fingerprints([]) == [] and kv_fingerprints([1, 2], 2) == []


def test_the_mamba_fingerprint_follows_the_last_kv_fingerprint_and_the_length():
    tokens = [9, 8, 7, 6]
    kv = reference_kv(tokens)
    for n in range(1, 5):
        assert mamba_fingerprint(tokens[:n]) == (kv[n - 1] * 31 + n + 7) % 2**62
        assert mamba_fingerprint_of(kv, n) == (kv[n - 1] * 31 + n + 7) % 2**62
    assert mamba_fingerprint([]) == 7 and mamba_fingerprint_of([], 0) == 7 and mamba_fingerprint_of(kv, 0) == 7
    big = [2**61 + 1]  # the product wraps at 62 bits
    assert mamba_fingerprint_of(big, 1) == ((2**61 + 1) * 31 + 8) % 2**62
