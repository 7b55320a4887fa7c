"""Operations: the scheduler-level steps that scenarios, the oracle's ``OPS.json`` and a ``Lab`` speak, in one table.

Vocabulary
- An *operation* is a dict ``{"op": NAME, FIELD: value, ...}``; ``OPS`` lists every name with its required and
  optional fields and how it is spelled as a *short string* (``request 1 2 3``, ``evict 2``, ``prefetch_done 4
  hit``). The oracle's operations come first; ``finish``, ``write_ack`` and ``load_ack`` are the simulator's own
  (``oracle=False``). Any operation may also carry a ``note`` (a short remark, ignored).
- ``parse_op`` reads a short string (a dict passes through as a copy), ``format_op`` writes one back (or the dict,
  when an operation has no short spelling: ``inject``, a named ``rid``), ``describe_op`` is the text traces and
  views show, and ``check_op`` checks the fields with one sentence that says how to fix them.
- A *status* is the letter an operation leaves in a run's status string (``STATUS_KEY``); ``driver.Driver.step``
  applies one operation and returns it. ``Skip(code)`` is how the driver says an operation did nothing.

Each operation's meaning is the oracle's (``shared/tools/sglang_oracle/README.md``); ``driver.Driver`` runs them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .config import MAX_SLOTS
from .errors import ScenarioError, shown
from .keys import format_key

# --- status letters -------------------------------------------------------------------------------------------
APPLIED = "."
NOTHING_TO_DO = "-"  # nothing to finish, acknowledge or prefetch
NO_ROOM = "e"  # the device pools are still short after eviction
NO_SLOTS = "u"  # the request could not get its slots
NOTHING_TO_FETCH = "r"  # prefetch: the whole request is already cached
PREFETCH_DECLINED = "f"  # prefetch: the cache declined it
RAISED = "x"  # the simulated cache raised; the run ends there
STATUS_KEY = (f"{APPLIED} applied", f"{RAISED} raised (the simulated cache's assertion)",
              f"{NOTHING_TO_DO} nothing to do", f"{NO_ROOM} no room even after eviction",
              f"{NO_SLOTS} allocation failed", f"{NOTHING_TO_FETCH} prefetch: nothing left to fetch",
              f"{PREFETCH_DECLINED} prefetch refused")


class Skip(Exception):
    """Raised by the driver when an operation does nothing; ``code`` is its status letter."""

    def __init__(self, code: str) -> None:
        self.code = code


# --- the table ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpKind:
    name: str
    fields: frozenset[str] = frozenset()  # required, besides "op"
    optional: frozenset[str] = frozenset()
    short: str | None = ""  # the short string's arguments: "tokens", "n", "[n]", "n hit", "" (none), None (no form)
    oracle: bool = True  # one of the oracle's operations (False: the simulator adds it)


def _kind(name: str, fields: str = "", optional: str = "", short: str | None = "", oracle: bool = True) -> OpKind:
    return OpKind(name, frozenset(fields.split()), frozenset(optional.split()), short, oracle)


# the order is the order of every list the user sees: the oracle's operations, then the simulator's own
OPS: dict[str, OpKind] = {k.name: k for k in (
    _kind("request", "tokens", "rid", short="tokens"),  # start, then finish at once
    _kind("start", "tokens", "rid", short="tokens"),  # keep it live; an actor's start names it after the actor
    _kind("finish", "", "rid", oracle=False),  # no rid: the oldest live request (an actor's: its oldest)
    _kind("finish_oldest"),
    _kind("evict", "n", short="n"),
    _kind("evict_mamba", "n", short="n"),
    _kind("evict_host", "n", short="n"),
    _kind("events"),
    _kind("l3_ack"),
    _kind("write_ack", "", "n", short="[n]", oracle=False),  # deliver n write acks (manual acks)
    _kind("load_ack", "", "n", short="[n]", oracle=False),
    _kind("prefetch", "tokens", short="tokens"),
    _kind("prefetch_done", "n mamba_hit", short="n hit"),
    _kind("prefetch_hit", "n", short="n"),  # the storage hit query answers (release 0.5.17 reserves host KV then)
    _kind("inject", "nodes", short=None),  # a scenario's initial nodes
)}
_ORACLE = {k.name: k for k in OPS.values() if k.oracle}
_WITH_EXTRA = {**_ORACLE, **{k.name: k for k in OPS.values() if not k.oracle}}  # (the order of "known ops: ...")
SHORT_WORDS = tuple(k.name for k in OPS.values() if k.short is not None)
NODE_FIELDS = {"key", "parent", "device", "mamba", "host", "mamba_host", "hash", "l3_backup"}
MAX_TOKENS = 1 << 20
MAX_NOTE = 1000  # an operation's ``note``: a short remark, ignored
_RID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_HIT = {"hit": True, "true": True, "miss": False, "false": False}


# --- short strings --------------------------------------------------------------------------------------------
def _whole(text: str) -> int:
    """Plain ASCII digits only: int() would also take '+5', '1_000' and full-width digits."""
    if not (text.isascii() and text.lstrip("-").isdigit() and len(text) <= 30):
        raise ValueError(text)
    return int(text)


def parse_op(raw: Any, where: str) -> dict:
    """A short string as an operation (``"evict 2"`` -> ``{"op": "evict", "n": 2}``); a dict is copied as is."""
    if isinstance(raw, dict):
        return dict(raw)
    if not isinstance(raw, str) or not raw.strip():
        raise ScenarioError(f"{where}: {shown(raw)} is not an operation; write an object like "
                            f"{{op: request, tokens: [1, 2]}} or a string like 'request 1 2'")
    parts = raw.replace(",", " ").replace("[", " ").replace("]", " ").split()
    name, args = parts[0], parts[1:]
    kind = OPS.get(name)
    if kind is None or kind.short is None:
        raise ScenarioError(f"{where}: unknown operation {shown(name, 40)}; use one of {', '.join(SHORT_WORDS)}")
    try:
        if kind.short == "tokens":
            return {"op": name, "tokens": [_whole(a) for a in args]}
        if kind.short in ("n", "[n]") and (args or kind.short == "n"):
            (n,) = args
            return {"op": name, "n": _whole(n)}
        if kind.short == "n hit":
            n, hit = args
            return {"op": name, "n": _whole(n), "mamba_hit": _HIT[hit]}
        if not args:
            return {"op": name}
    except (ValueError, KeyError):
        pass
    raise ScenarioError(f"{where}: cannot read operation {shown(raw)}; write e.g. 'request 1 2 3', 'evict 2', "
                        f"'prefetch_done 4 hit', 'events'")


def format_op(op: dict) -> str | dict:
    """An operation as the short string ``parse_op`` reads back (``request 1 2``), or a copy of the dict when it has
    no short spelling (``inject``, a named ``rid``, a ``note``)."""
    kind, rest = OPS.get(op.get("op")), set(op) - {"op"}
    if kind is None or kind.short is None:
        return dict(op)
    if kind.short == "tokens" and rest == {"tokens"}:
        return f"{kind.name} {' '.join(map(str, op['tokens']))}"
    if kind.short == "n" and rest == {"n"} or kind.short == "[n]" and rest <= {"n"}:
        return kind.name if not rest else f"{kind.name} {op['n']}"
    if kind.short == "n hit" and rest == {"n", "mamba_hit"}:
        return f"{kind.name} {op['n']} {'hit' if op['mamba_hit'] else 'miss'}"
    if kind.short == "" and not rest:
        return kind.name
    return dict(op)


def describe_op(op: dict, actor: str | None = None) -> str:
    """The text traces and views show for an operation (``R1: request [1,2,3]``, ``evict n=2``)."""
    kind = op.get("op")
    if "tokens" in op:
        text = f"{kind} [{format_key(op['tokens'])}]"
    elif kind == "inject":
        text = f"inject {len(op['nodes'])} node(s)"
    else:
        rest = {k: v for k, v in op.items() if k not in ("op", "note")}
        text = kind + ("" if not rest else " " + " ".join(f"{k}={v}" for k, v in rest.items()))
    return f"{actor}: {text}" if actor else text


# --- checking the fields --------------------------------------------------------------------------------------
def _is_int(v) -> bool:
    return type(v) is int


def check_op(op: Any, i: int, page_size: int, allow_extra: bool = True) -> None:
    """Raise a ``ScenarioError`` naming what is wrong with operation ``i`` (``allow_extra``: the simulator's own
    operations are allowed, not only the oracle's)."""
    known = _WITH_EXTRA if allow_extra else _ORACLE
    name = op.get("op") if isinstance(op, dict) else None
    if isinstance(op, dict) and "op" not in op:  # YAML's "- evict: 2" gives {"evict": 2}
        raise ScenarioError(f"op {i}: an operation object needs an 'op' field, like {{op: evict, n: 2}} or the "
                            f"string 'evict 2'; it has {', '.join(sorted(map(str, op))) or 'no fields'}")
    if not isinstance(name, str) or name not in known:
        raise ScenarioError(f"op {i}: unknown op {name!r}; known ops: {', '.join(known)}")
    fields = set(op) - {"op", "note"}
    need, opt = known[name].fields, known[name].optional
    if not (need <= fields <= need | opt):
        want = ", ".join(sorted(need)) or "no fields"
        raise ScenarioError(f"op {i} ({name}) needs exactly {want}"
                            + (f" (optionally {', '.join(sorted(opt))})" if opt else "")
                            + f"; it has {sorted(map(str, fields))}")
    if "tokens" in op:
        t = op["tokens"]
        if not (isinstance(t, list) and t and set(map(type, t)) == {int} and min(t) >= 0 and max(t) < 1 << 62):
            raise ScenarioError(f"op {i} ({name}): tokens must be a non-empty list of whole numbers from 0 to "
                                f"2**62 - 1, like [1, 2, 3]")
        if len(t) > MAX_TOKENS:
            raise ScenarioError(f"op {i} ({name}): {len(t)} tokens is too many; keep requests under {MAX_TOKENS}")
    if "n" in op and not (_is_int(op["n"]) and 0 <= op["n"] <= MAX_SLOTS):
        raise ScenarioError(f"op {i} ({name}): n must be a whole number between 0 and {MAX_SLOTS}, not "
                            f"{shown(op['n'])}")
    if "mamba_hit" in op and type(op["mamba_hit"]) is not bool:
        raise ScenarioError(f"op {i} ({name}): mamba_hit must be true or false")
    if "rid" in op and not (isinstance(op["rid"], str) and op["rid"]):
        raise ScenarioError(f"op {i} ({name}): rid must be a non-empty string")
    if "rid" in op and not _RID.fullmatch(op["rid"]):  # '?' is kept for the placeholder of a finish with none open
        raise ScenarioError(f"op {i} ({name}): rid {shown(op['rid'], 40)} must be 1 to 64 ASCII letters, digits, "
                            f"'_', '.', '-', like 'chat'")
    if "note" in op and not (isinstance(op["note"], str) and len(op["note"]) <= MAX_NOTE):
        raise ScenarioError(f"op {i} ({name}): note must be a short text (at most {MAX_NOTE} characters), not "
                            f"{shown(op['note'], 40)}")
    if name == "inject":
        nodes = op["nodes"]
        if not isinstance(nodes, list):
            raise ScenarioError(f"op {i} (inject): nodes must be a list of node objects like "
                                f"[{{key: [1, 2], host: true}}]")
        for j, s in enumerate(nodes):
            problem = _node_problem(s, j, page_size)
            if problem:
                raise ScenarioError(f"op {i} node {j}: {problem}")


def request_problem(op: dict) -> str | None:
    """What is wrong with a request's ``tokens`` (and ``rid``, when given), or None (``Driver.start``'s check)."""
    t = op.get("tokens")
    if not (isinstance(t, list) and t and set(map(type, t)) == {int} and min(t) >= 0 and max(t) < 1 << 62):
        return (f"tokens must be a non-empty list of whole numbers from 0 to 2**62 - 1, like [1, 2, 3], not "
                f"{shown(t, 40)}")
    if len(t) > MAX_TOKENS:
        return f"{len(t)} tokens is too many; keep requests under {MAX_TOKENS}"
    if "rid" in op and not (isinstance(op["rid"], str) and _RID.fullmatch(op["rid"])):
        return f"rid {shown(op['rid'], 40)} must be 1 to 64 ASCII letters, digits, '_', '.', '-', like 'chat'"
    return None


def _node_problem(s: Any, j: int, page_size: int) -> str | None:
    """What is wrong with one inject node spec (None if nothing)."""
    if not isinstance(s, dict):
        return "a node must be an object like {key: [1, 2], host: true}"
    extra = sorted(map(str, set(s) - NODE_FIELDS))
    if extra:
        return f"unknown field(s) {', '.join(extra)}; node fields are {', '.join(sorted(NODE_FIELDS))}"
    key = s.get("key")
    if not (isinstance(key, list) and key and all(_is_int(x) and 0 <= x < 1 << 62 for x in key)):
        return "key must be a non-empty list of whole numbers from 0 to 2**62 - 1, like [1, 2]"
    if len(key) > MAX_TOKENS:
        return f"key has {len(key)} tokens; keep keys under {MAX_TOKENS}"
    if len(key) % page_size:
        return f"key has {len(key)} tokens; make it a multiple of page_size {page_size}"
    parent = s.get("parent")
    if parent is not None and not (_is_int(parent) and 0 <= parent < j):
        return (f"parent must be null (the root) or the index of an earlier node"
                f"{f' (0 to {j - 1})' if j else ''}, not {shown(parent)}")
    for f in sorted(NODE_FIELDS - {"key", "parent"}):
        if type(s.get(f, False)) is not bool:
            return f"{f} must be true or false, not {shown(s[f])}"
    return None


node_problem = _node_problem  # (public: ``Driver.inject`` checks its nodes with it)
