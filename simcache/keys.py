"""Page-aligned token keys.

Vocabulary
- A *key* is a tuple of token ids (``Key``). A node stores the key segment of its edge.
- A *page* is ``page_size`` consecutive tokens; the tree only ever matches whole pages.
- The *child key* of a key is the slot it occupies in its parent's ``children`` dict: the first token when
  ``page_size == 1`` (so the assertion text prints ``1``), else the tuple of the first page (``(1, 2)``).

Invariant kept by callers: keys stored in the tree are non-empty and a multiple of ``page_size`` long.
"""
from __future__ import annotations

from collections.abc import Hashable

Token = int
Key = tuple[Token, ...]


def child_key(key: Key, page_size: int) -> Hashable:
    """The slot of ``key`` in its parent: ``child_key((1, 2, 3), 1) == 1``; ``child_key((1, 2, 3, 4), 2) == (1, 2)``."""
    return key[0] if page_size == 1 else tuple(key[:page_size])


def match_len(a: Key, b: Key, page_size: int) -> int:
    """Length of the common prefix of ``a`` and ``b``, rounded down to whole pages.

    At C speed: slices compare element by element in C (identical token objects at once), so the common prefix is
    found by comparing halves of the part still in doubt (about ``n`` element comparisons, ``log n`` slices)."""
    n = min(len(a), len(b))
    if n <= 16:  # a short key (the explorer's, a scenario's): one loop costs less than the slices
        return _match_len_short(a, b, page_size)
    if a.__class__ is not b.__class__:  # (callers pass tuples) a page of a tuple never equals one of a list
        if page_size != 1:
            return 0
        a, b = tuple(a[:n]), tuple(b[:n])
    if a[:n] == b[:n]:
        common = n
    else:  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        lo, hi = 0, n
        while hi - lo > 8:
            mid = (lo + hi) // 2
            if a[lo:mid] == b[lo:mid]:
                lo = mid
            else:
                hi = mid
        while a[lo] == b[lo]:
            lo += 1
        common = lo
    if page_size == 1:
        return common
    whole = common // page_size * page_size
    # a last partial page counts when both keys end there equal (the page-by-page compare sees equal slices)
    if common == n == len(a) == len(b) and n % page_size:
        return whole + page_size
    return whole


def _match_len_short(a: Key, b: Key, page_size: int) -> int:
    """``match_len`` token by token, or page by page (a page of a tuple never equals one of a list)."""
    if page_size == 1:
        i = 0
        for x, y in zip(a, b):  # noqa: B905 - keys differ in length by design
            if x != y:
                break
            i += 1
        return i
    n, i = min(len(a), len(b)), 0
    while i < n and a[i : i + page_size] == b[i : i + page_size]:
        i += page_size
    return i


def page_floor(n: int, page_size: int) -> int:
    """``n`` rounded down to a multiple of ``page_size``."""
    return n // page_size * page_size


_PLAIN = {int}


def format_key(key: Key) -> str:
    """The oracle's spelling of a key: ``1,2,3``. A tuple or list of plain ints is spelled by its own repr (one C
    call, then the separators), the rest token by token."""
    if (key.__class__ is tuple or key.__class__ is list) and len(key) > 1 and set(map(type, key)) <= _PLAIN:
        return str(key)[1:-1].replace(", ", ",")
    return ",".join(map(str, key))


def page_hashes(key: Key, page_size: int, prior: str | None) -> list[str]:
    """One chained hash string per page (the L3 page ids); deterministic and short, not cryptographic: FNV-1a over
    the page's tokens, starting from the previous page's hash (``prior`` for the first page)."""
    out: list[str] = []
    h = 0xCBF29CE484222325 if prior is None else int(prior, 16)
    if page_size == 1:  # one page per token: no slicing
        for t in key:
            h = ((h ^ (t & 0xFFFFFFFFFFFFFFFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
            out.append(f"{h:016x}")
        return out
    for start in range(0, len(key), page_size):
        for t in key[start : start + page_size]:  # the hash carried on is the one just spelled (16 hex digits)
            h = ((h ^ (t & 0xFFFFFFFFFFFFFFFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        out.append(f"{h:016x}")
    return out
