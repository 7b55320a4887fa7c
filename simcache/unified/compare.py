"""Random operation sequences for the unified cache, and their comparison with SGLang's real code, field by field.

``sequence(rng)`` draws one case: settings (small pools, a write policy, the ``scheduler`` driver or not, manual
acks or not) and 5 to 30 operations that reach what the unified cache does: requests that share prefixes (some kept
live and finished later), device, Mamba and host evictions, acks, storage backups, prefetches with their hit counts
and completions. ``compare(presets, seeds, n)`` runs each case on the model preset and on the release it models
(``versions.RELEASE_OF``) and returns the disagreements with the fields that differ. An operation that would loop
forever (0.5.16 under write-back, on a Mamba leaf whose backup keeps failing) is stopped by both sides at the same
host-pool query (``cache.watchdog``): its outcome is ``run.HANG_FIELDS``, and no clock is involved.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from ..config import check_settings
from ..errors import SimcacheError
from ..real.run import FIELDS
from ..scenario import from_doc
from .run import run_model
from .versions import RELEASE_OF


def _tokens(rng: random.Random, seen: list[list[int]]) -> list[int]:
    if seen and rng.random() < 0.7:
        base = rng.choice(seen)
        cut = rng.randint(1, len(base))
        tail = [rng.randint(1, 6) for _ in range(rng.randint(0, 3))]
        out = base[:cut] + tail
    else:
        out = [rng.randint(1, 6) for _ in range(rng.randint(1, 5))]
    return out[:8] or [1]


def sequence(rng: random.Random, policy: str | None = None, page_size: int = 1) -> tuple[dict, list[dict]]:
    """One random case: (settings, operations). With ``page_size`` 2 every token list is whole pages (the Mamba
    extra buffer is on, as SGLang requires)."""
    cfg = dict(policy=policy or rng.choice(["write_through", "write_back"]), storage=True, page_size=page_size,
               device_kv=rng.randint(8, 24), device_mamba=rng.randint(3, 8), host_kv=rng.randint(2, 12),
               host_mamba=rng.randint(2, 8), prefetch_threshold=rng.randint(1, 2),
               driver=rng.choice(["scheduler", "fuzz"]), auto_complete=rng.random() < 0.7)
    seen: list[list[int]] = []
    ops: list[dict] = []
    live = 0
    for _ in range(rng.randint(5, 30)):
        r = rng.random()
        if r < 0.30:
            t = _tokens(rng, seen)
            seen.append(t)
            ops.append({"op": "request", "tokens": t})
        elif r < 0.36 and live < 2:
            t = _tokens(rng, seen)
            seen.append(t)
            ops.append({"op": "start", "tokens": t})
            live += 1
        elif r < 0.42 and live:
            ops.append({"op": "finish_oldest"})
            live -= 1
        elif r < 0.50:
            ops.append({"op": "evict", "n": rng.randint(1, 6)})
        elif r < 0.54:
            ops.append({"op": "evict_mamba", "n": rng.randint(1, 2)})
        elif r < 0.62:
            ops.append({"op": "evict_host", "n": rng.randint(1, 6)})
        elif r < 0.68:
            ops.append({"op": "events"})
        elif r < 0.72:
            ops.append({"op": "write_ack", "n": rng.randint(1, 2)})
        elif r < 0.75:
            ops.append({"op": "load_ack", "n": 1})
        elif r < 0.80:
            ops.append({"op": "l3_ack"})
        elif r < 0.88:
            t = _tokens(rng, seen)
            seen.append(t)
            ops.append({"op": "prefetch", "tokens": t})
        elif r < 0.93:
            ops.append({"op": "prefetch_hit", "n": rng.randint(1, 6)})
        else:
            ops.append({"op": "prefetch_done", "n": rng.randint(0, 6), "mamba_hit": rng.random() < 0.8})
    if page_size > 1:  # a prefetch asks for whole pages; a request may end inside one (its tail is not cached)
        for op in ops:
            if op["op"] == "prefetch" and len(op["tokens"]) % page_size:
                op["tokens"] = op["tokens"] + [1] * (page_size - len(op["tokens"]) % page_size)
    return cfg, ops


@dataclass
class Disagreement:
    preset: str
    seed: int
    index: int
    cfg: dict
    ops: list[dict]
    fields: list[str]
    model: dict
    real: dict


def compare(presets: list[str], seed: int, n: int, loaded: dict, policy: str | None = None,
            on_case=None, page_size: int = 1) -> tuple[dict[str, int], list[Disagreement]]:
    """Run ``n`` fresh cases from ``seed`` on each preset and its release -> (agreeing cases per preset, the
    disagreements). ``loaded``: release -> ``simcache.real`` load of its unified target. ``on_case(preset, index,
    fields that differ, settings, the real code's result)`` after each case."""
    from ..real.unified.run import run_unified

    agree = {p: 0 for p in presets}
    bad: list[Disagreement] = []
    for p in presets:
        rng = random.Random(f"{seed}/{p}" if page_size == 1 else f"{seed}/{p}/page{page_size}")
        release = loaded[RELEASE_OF[p]]
        with release.active():  # once per preset, not per case: the swap of sys.modules was a sixth of the time
            for i in range(n):
                raw, ops = sequence(rng, policy, page_size)
                cfg = check_settings(raw)
                pairs = [(None, op) for op in ops]
                try:
                    model = run_model(cfg, pairs, p)
                except SimcacheError as e:
                    model = {k: f"refused: {e}" for k in FIELDS}
                scenario = from_doc(dict(name="case", config=raw, ops=["events"]), "case")
                # no memory watch: the cases are small by construction (pools of at most 24 slots, requests of at
                # most 8 tokens, 30 operations), and reading the process's size after each operation cost about a
                # tenth of the comparison's time
                real = run_unified(scenario, release, ops=pairs, memory_limit_mb=0)
                diff = [k for k in FIELDS if model.get(k) != real.get(k)]
                if diff:
                    bad.append(Disagreement(p, seed, i, raw, ops, diff, model, real))
                else:
                    agree[p] += 1
                if on_case is not None:
                    on_case(p, i, diff, raw, real)
    return agree, bad


class Outcomes:
    """What a preset's cases ended in, per write policy: ``add(settings, result)`` each case, then ``line()``, the
    sentence docs/unified.md quotes (tests/test_unified_model.py checks it there)."""

    def __init__(self) -> None:
        self.ends: Counter = Counter()
        self.stale = self.double_free = self.n = 0

    def add(self, settings: dict, result: dict) -> None:
        if result["outcome"] == "clean":
            end = "clean"
        elif result["sig"] == "hang":
            end = "looping forever"
        else:
            end = f"`{result['outcome'].split(':')[0]}` in `{result['raised_in']}`"
        self.ends[end, settings["policy"]] += 1
        self.stale += result["first_stale"] is not None
        self.double_free += bool(result["double_frees"])
        self.n += 1

    def line(self) -> str:
        kinds = sorted({k for k, _ in self.ends}, key=lambda k: (k != "clean", k != "looping forever", k))
        parts = []
        for k in kinds:
            wt, wb = self.ends[k, "write_through"], self.ends[k, "write_back"]
            parts.append(f"{wt + wb:,} {k} ({wt:,} write-through, {wb:,} write-back)")
        return (f"{self.n:,} cases: " + "; ".join(parts) + f"; {self.stale:,} left a stale reference, "
                f"{self.double_free:,} freed a slot twice")
