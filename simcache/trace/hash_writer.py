"""The trace hash's JSON text, written from the recorder's compact log: the bytes of
``json.dumps([step.as_dict() ...], sort_keys=True, default=str)`` without building any step."""
from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring_ascii as _ebs

import numpy as np

from .wording import _SHARED_DETAIL_IDS, _call_detail, _key_text, _kt, _Worded, _words

try:
    from _json import make_encoder as _c_make_encoder
except ImportError:  # pragma: no cover - CPython has it
    _c_make_encoder = None


def _encoder():
    """``json.dumps(o, sort_keys=True, default=str)`` for a dict or list, with one C encoder made once."""
    if _c_make_encoder is None:  # pragma: no cover
        return json.JSONEncoder(sort_keys=True, default=str).encode
    c = _c_make_encoder({}, str, _ebs, None, ": ", ", ", True, False, True)
    py = json.JSONEncoder(sort_keys=True, default=str).encode

    def enc(o) -> str:
        if o.__class__ is dict or o.__class__ is list:
            return "".join(c(o, 0))
        return py(o)

    return enc


class _JsonMemo:
    """Texts that repeat across steps: stacks (by identity; interned), kinds, actors, shared details, and keys as
    they sit inside a JSON string (escaped, without quotes; by identity, a bounded number)."""

    def __init__(self) -> None:
        self.enc = _encoder()
        self.stacks: dict[int, tuple[tuple, str]] = {}  # id(stack) -> (stack, its JSON)
        self.values: dict = {}
        self.details: dict[int, str] = {}  # shared details by id
        self.calls: dict[str, tuple[str, str]] = {}  # function name -> (its detail's JSON, its escaped name)
        self.names: dict[str, str] = {}  # pool, list and set names, escaped
        self.keys: dict[int, tuple] = {}  # id(key) -> (key, escaped text): the entry holds the key, so the id stays

    def value(self, v) -> str:  # an actor or a kind
        try:
            got = self.values.get(v)
        except TypeError:
            return self.enc(v)
        if got is None:
            got = self.values[v] = self.enc(v)
        return got

    def detail(self, d) -> str:
        if d.__class__ is dict and not d:
            return "{}"
        if id(d) in _SHARED_DETAIL_IDS:
            got = self.details.get(id(d))
            if got is None:
                got = self.details[id(d)] = self.enc(d)
            return got
        return self.enc(d)

    def key(self, k) -> str:
        """A key's text (``_key_text``; a text payload as it is), escaped for the inside of a JSON string."""
        hit = self.keys.get(id(k))
        if hit is not None and hit[0] is k:
            return hit[1]
        if len(self.keys) > 4096:
            self.keys.clear()
        text = _ebs(k if k.__class__ is str else _key_text(k))[1:-1]
        self.keys[id(k)] = (k, text)
        return text

    def name(self, s: str) -> str:
        got = self.names.get(s)
        if got is None:
            got = self.names[s] = _ebs(s)[1:-1]
        return got


_INT = {int}


def _plain_ints(xs) -> bool:
    """Whether every item of ``xs`` is a plain int (not a bool, not another subclass): counted by identity of their
    types, which costs less than hashing them into a set."""
    return list(map(type, xs)).count(int) == len(xs)


def _int_list(xs: tuple) -> str:
    """``", ".join(map(str, xs))`` for a tuple of plain ints, made by the tuple's own repr (one C call), or for a
    long one by ``_spelled``."""
    if len(xs) >= _LONG:
        return _spelled(xs)
    return str(xs)[1:-1] if len(xs) != 1 else str(xs[0])


_LONG = 64  # a sequence this long is spelled from the table of numbers' decimal text
# item i: the bytes of ``", " + str(i)``, NUL-padded to 8 bytes (16 past a million), one item each so that a lookup
# is a plain gather of 8 or 16 bytes; grown on demand
_DEC = np.zeros(0, dtype=np.uint64)
_DEC_MAX = 1 << 21  # numbers past this are spelled by the repr (the table stays under 32 MB)


def _spelled(xs) -> str:
    """``str(xs)[1:-1]`` for a long tuple or list of plain ints: each number's text looked up in ``_DEC`` (slot
    numbers and token ids are small and repeat), the NUL padding dropped, in a few numpy steps (a third to a half of
    the time of the repr); a negative number or one past ``_DEC_MAX``: the repr."""
    global _DEC
    try:
        idx = np.fromiter(xs, dtype=np.int64, count=len(xs))
    except OverflowError:  # past 64 bits
        return str(xs)[1:-1]
    hi = int(idx.max())
    if hi >= len(_DEC):
        if hi >= _DEC_MAX or idx.min() < 0:
            return str(xs)[1:-1]
        _DEC = _items(_decimal_table(min(max(hi + 1, 2 * len(_DEC), 1 << 12), _DEC_MAX)))
    elif idx.min() < 0:
        return str(xs)[1:-1]
    text = _DEC[idx].view(np.uint8)
    return text[text != 0][2:].tobytes().decode()


def _items(table: np.ndarray) -> np.ndarray:
    """A ``_decimal_table``'s rows as one item each: a uint64 (8-byte rows) or a 16-byte void (no copy)."""
    n, size = table.shape
    return table.view(np.uint64 if size == 8 else np.dtype((np.void, 16))).reshape(n)


_slot_list = _spelled  # (the name it had when it spelled only slot lists)


def _decimal_table(n: int) -> np.ndarray:
    """Row i: the bytes of ``", " + str(i)`` for i = 0 .. n - 1, NUL-padded to 8 bytes (16 past 6 digits). The first
    10,000 rows are filled a digit column at a time; each later run of 10,000 numbers shares its leading digits
    (``", " + str(i // 10000)``) and ends in the first rows' last four digits, zero-padded: two broadcast copies a
    run."""
    width = len(str(n - 1))
    out = np.zeros((n, 8 if 2 + width <= 8 else 16), dtype=np.uint8)
    out[:, 0], out[:, 1] = ord(","), ord(" ")
    m = min(n, _RUN)
    for d in range(1, len(str(m - 1)) + 1):
        lo, hi = (0 if d == 1 else 10 ** (d - 1)), min(10**d, m)
        k = np.arange(lo, hi, dtype=np.int64)
        for col in range(1 + d, 1, -1):  # the last digit first
            k, r = np.divmod(k, 10)
            out[lo:hi, col] = r + ord("0")
    if n > _RUN:
        k = np.arange(_RUN, dtype=np.int64)
        four = np.stack([k // 1000 % 10, k // 100 % 10, k // 10 % 10, k % 10], axis=1).astype(np.uint8) + ord("0")
        for h in range(1, (n - 1) // _RUN + 1):
            lo, hi = h * _RUN, min((h + 1) * _RUN, n)
            head = str(h).encode()
            w = 2 + len(head)
            out[lo:hi, 2:w] = np.frombuffer(head, dtype=np.uint8)
            out[lo:hi, w : w + 4] = four[: hi - lo]
    return out


_RUN = 10_000


_POOL_WORDS = {k: k.replace("_", " ") for k in ("alloc", "free", "double_free", "alloc_fail")}


def _json_lines(log: list, lo: int, hi: int, memo: _JsonMemo) -> list[str]:
    """``json.dumps(step.as_dict(), sort_keys=True, default=str)`` of steps ``lo..hi-1``. The frequent kinds write
    their text and detail straight from the entry (the bytes ``_words`` + the encoder would give); the rest go
    through ``_words``. A step's text is escaped piece by piece (JSON's ASCII escaping maps each character on its
    own, so the pieces' escapes joined are the whole text's), each piece escaped once per run: a node's key, often
    hundreds of tokens long, is escaped once, not once per step that names it."""
    out = []
    add = out.append
    enc, stacks, values, calls = memo.enc, memo.stacks, memo.values, memo.calls
    kj, nm, names, ebs, pool_words, lru_set = memo.key, memo.name, memo.names, _ebs, _POOL_WORDS, _LRU_SET_FIELD
    for i in range(lo, hi):
        e = log[i]
        op, actor, kind, stack, nid, p = e
        tj = None
        if p.__class__ is _Worded:
            pass
        elif kind == "call":
            name = stack[-1]
            got = calls.get(name)
            if got is None:
                got = calls[name] = (memo.detail(_call_detail(name)), _ebs(name)[1:-1])
            dj, nj = got
            if nid is None:
                tj = f'"{nj}()"'
            elif nid.__class__ is int:
                tj = f'"{nj}([{kj(p)}]#{nid})"'
            else:
                tj = ebs(f"{name}([{_kt(p)}]#{nid})")
        elif kind in pool_words:
            pool, slots = p
            if pool.__class__ is str and slots.__class__ is tuple and list(map(type, slots)).count(int) == len(slots):
                sl = (str(slots)[1:-1] if len(slots) != 1 else str(slots[0])) if len(slots) < _LONG else \
                    _spelled(slots)  # ``_int_list``, inline
                pj = names.get(pool) or nm(pool)
                tj = f'"{pool_words[kind]} {pj} [{sl}]"'
                dj = f'{{"pool": "{pj}", "slots": [{sl}]}}'
        elif kind == "lock":
            r, change, ref = p
            if change.__class__ is int and ref.__class__ is int and r is not None and r[0].__class__ is int:
                tj = f'"{"lock" if change > 0 else "unlock"} [{kj(r[1])}]#{r[0]} (full_lock_ref={ref})"'
                dj = f'{{"change": {change}, "full_lock_ref": {ref}}}'
        elif kind in lru_set:
            k, name = p
            if name.__class__ is str and nid.__class__ is int:
                what = kind[4:]
                sj_ = names.get(name) or nm(name)
                tj = f'"{what} [{kj(k)}]#{nid} {_LRU_SET_WORD[what]} {sj_}"'
                dj = f'{{"{lru_set[kind]}": "{sj_}"}}'
        elif kind in _NODE_KINDS:
            tj, dj = _node_json(kind, p, kj)
        elif kind == "op":
            tj, dj = _request_json(p, actor)
        if tj is None:
            text, detail = _words(e)
            tj = ebs(text) if text.__class__ is str else enc(text)
            dj = memo.detail(detail)
        sj = stacks.get(id(stack))  # by identity: a tuple's hash is computed again on every lookup
        if sj is None or sj[0] is not stack:
            sj = stacks[id(stack)] = (stack, enc(list(stack)))  # the entry holds the stack: its id stays its own
        sj = sj[1]
        try:
            aj, kj_ = values[actor], values[kind]
        except (KeyError, TypeError):
            aj, kj_ = memo.value(actor), memo.value(kind)
        add(f'{{"actor": {aj}, "detail": {dj}, "index": {i}, "kind": {kj_}, '
            f'"node": {nid if nid.__class__ is int else "null" if nid is None else enc(nid)}, '
            f'"op": {op if op.__class__ is int else enc(op)}, "stack": {sj}, "text": {tj}}}')
    return out


def _request_json(op, actor) -> tuple[str | None, str | None]:
    """The JSON text and detail of a request's ``op`` step, ``{"op": "request", "tokens": [...]}`` with plain int
    tokens (the bytes ``describe_op`` and the encoder give: the tokens' decimal text is made once, for both), or
    ``(None, None)`` for any other operation (then ``_words`` spells it)."""
    if op.__class__ is not dict or not (op.keys() == _REQUEST or op.keys() == _REQUEST_RID):
        return None, None
    name, tokens, rid = op["op"], op["tokens"], op.get("rid", "")
    if name.__class__ is not str or tokens.__class__ is not list or rid.__class__ is not str or \
            not (actor is None or actor.__class__ is str) or list(map(type, tokens)).count(int) != len(tokens):
        return None, None
    # the encoder's text of the list too: an int's JSON is its repr
    listed = str(tokens)[1:-1] if len(tokens) < _LONG else _spelled(tokens)
    head = _ebs(f"{actor}: {name} [" if actor else f"{name} [")[:-1]
    rj = f'"rid": {_ebs(rid)}, ' if len(op) == 3 else ""
    return f'{head}{listed.replace(", ", ",")}]"', f'{{"op": {{"op": {_ebs(name)}, {rj}"tokens": [{listed}]}}}}'


_REQUEST, _REQUEST_RID = dict.fromkeys(("op", "tokens")).keys(), dict.fromkeys(("op", "rid", "tokens")).keys()


def _ref_json(r, kj) -> str | None:
    """``_kw(r)`` escaped for the inside of a JSON string, or None where the fast spelling does not apply."""
    if r is None:
        return "none"
    return f"[{kj(r[1])}]#{r[0]}" if r[0].__class__ is int else None


def _node_json(kind: str, p: tuple, kj) -> tuple[str | None, str | None]:
    """The JSON text and detail of an attach, detach, backup or ack step (the bytes ``_words`` and the encoder
    give), or ``(None, None)`` where a part is not plain (then ``_words`` spells it)."""
    a = _ref_json(p[0], kj)
    if a is None:
        return None, None
    if kind == "attach":
        b, slot, rep = _ref_json(p[1], kj), p[2], p[3]
        if b is None or p[1] is None or (rep is not None and rep.__class__ is not int):
            return None, None
        sj = _ebs(str(slot))
        return (f'"attach {a} under {b} at slot {sj[1:-1]}"',
                f'{{"parent": {p[1][0]}, "replaced": {"null" if rep is None else rep}, "slot": {sj}}}')
    if kind == "detach":
        b, slot, popped = _ref_json(p[1], kj), p[2], p[4]
        c = _ref_json(popped, kj)
        if b is None or p[1] is None or c is None:
            return None, None
        sj = _ebs(str(slot))
        what = "" if p[3] else f" (the slot held {c})"
        return (f'"detach {a} from {b} slot {sj[1:-1]}{what}"',
                f'{{"parent": {p[1][0]}, "popped": {"null" if popped is None else popped[0]}, "slot": {sj}}}')
    if kind == "backup":
        host = p[1]
        if host.__class__ is not tuple or not _plain_ints(host):
            return None, None
        hl = f"[{_int_list(host)}]"
        return f'"{a} backed up to host {hl}"', f'{{"host": {hl}}}'
    return f'"{_ACK_WORDS[kind]} for {a}"', "{}"  # an ack


_ACK_WORDS = dict(write_ack="write ack", load_ack="load ack", storage_ack="storage ack")
_NODE_KINDS = frozenset({"attach", "detach", "backup", *_ACK_WORDS})
_LRU_SET_FIELD = dict(lru_insert="list", lru_remove="list", set_add="set", set_discard="set")
_LRU_SET_WORD = dict(insert="into", remove="from", add="to", discard="from")


def log_sha256(log: list) -> str:
    """The hash of ``json.dumps([step.as_dict() ...], sort_keys=True, default=str)`` over log ``log``, streamed a chunk
    of steps at a time (see ``Ledger.sha256``)."""
    h = hashlib.sha256(b"[")
    memo = _JsonMemo()
    # a few hundred steps at a time: a step that names a long prompt's slots is tens of kB of text, and a chunk's
    # lines, their join and its bytes are all alive at once (4,096 such steps were hundreds of MB)
    for lo in range(0, len(log), CHUNK):  # json.dumps of a list joins its items with ", "
        if lo:
            h.update(b", ")
        h.update(", ".join(_json_lines(log, lo, min(len(log), lo + CHUNK), memo)).encode())
    h.update(b"]")
    return h.hexdigest()


CHUNK = 256  # steps hashed per chunk
