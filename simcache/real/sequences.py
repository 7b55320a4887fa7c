"""Random operation files for comparing the model with the real code: seeded, small, and aimed at the stale-node race.

``random_doc(rng, profile, page_size)`` is one ``OPS.json`` document (``{"config", "ops"}``). ``mixed`` uses every
operation; ``storage`` leans on storage: prefetches into a small host pool (truncated, declined or revoked), L3 hit
counts that arrive on their own (``prefetch_hit``, where the vocabulary has it), Mamba states evicted to host (so
matches end in Mamba-only host hits), thresholds above one page. Same seed, same document.
"""
from __future__ import annotations

import random

from ..operations import OPS

PROFILES = ("mixed", "storage")


def random_doc(rng: random.Random, profile: str = "mixed", page_size: int | None = None,
               hit_op: bool | None = None) -> dict:
    """One random operation file (see the module's docstring); ``hit_op`` False leaves ``prefetch_hit`` out (for
    tools that do not know it), None uses it where the vocabulary has it."""
    heavy = profile == "storage"
    ps = page_size or rng.choice([1, 1, 1, 2])
    policy = rng.choice(["write_through", "write_through", "write_through_selective", "write_back"])
    storage = heavy or rng.random() < 0.5
    cfg = dict(policy=policy, storage=storage, page_size=ps, device_kv=rng.choice([12, 16, 24, 32]),
               device_mamba=rng.choice([3, 4, 6, 8]), host_kv=rng.choice([2, 4, 6, 8]),
               host_mamba=rng.choice([1, 2, 4, 8]), driver=rng.choice(["fuzz", "scheduler"]),
               load_back_threshold=rng.choice([1, 2, 10]),
               prefetch_stop_policy=rng.choice(["best_effort", "best_effort", "wait_complete", "timeout"]))
    if heavy:
        cfg["prefetch_threshold"] = rng.choice([1, 1, 2, 3, 4])
    alphabet, prefixes, seen = [1, 2, 3, 4, 5], [[1, 2], [1, 2, 3, 4], [5, 6], [1, 3]], []

    def tokens() -> list[int]:
        if heavy and seen and rng.random() < 0.6:  # extend an earlier sequence: deep matches, internal nodes
            base = list(rng.choice(seen)) + [rng.choice(alphabet) for _ in range(rng.randint(1, 4))]
        else:
            base = list(rng.choice(prefixes)) if rng.random() < 0.7 else []
            base += [rng.choice(alphabet) for _ in range(rng.randint(1, 4))]
        if ps > 1 and len(base) < ps:
            base += [7] * (ps - len(base))
        if heavy:
            seen.append(base)
        return base

    ops: list[dict] = []
    if rng.random() < 0.4:
        ops.append(_inject(rng, ps, storage))
        cfg["device_kv"], cfg["host_kv"] = 32, max(cfg["host_kv"], 10)
        cfg["device_mamba"], cfg["host_mamba"] = 8, 8
    hit_op = ("prefetch_hit" in OPS) if hit_op is None else hit_op
    cuts = (0.25, 0.33, 0.38, 0.45, 0.56, 0.62, 0.68, 0.74, 0.88) if heavy else \
        (0.35, 0.45, 0.52, 0.62, 0.67, 0.74, 0.82, 0.88, 0.94)
    for _ in range(rng.randint(4, 18) + (6 if heavy else 0)):
        if heavy and rng.random() < 0.12:  # a shared prefix, its Mamba state sent to host only, a prefetch past it
            t = tokens()
            ext = [rng.choice(alphabet) for _ in range(rng.randint(1, 3))]
            ops += [{"op": "request", "tokens": t}, {"op": "request", "tokens": t + ext}, {"op": "events"},
                    {"op": "evict_mamba", "n": rng.randint(1, 2)},
                    {"op": "prefetch", "tokens": t + [rng.choice(alphabet) for _ in range(rng.randint(1, 4))]}]
            continue
        r = rng.random()
        if r < cuts[0]:
            ops.append({"op": "request", "tokens": tokens()})
        elif r < cuts[1]:
            ops.append({"op": "start", "tokens": tokens()})
        elif r < cuts[2]:
            ops.append({"op": "finish_oldest"})
        elif r < cuts[3]:
            ops.append({"op": "evict", "n": rng.randint(1, 6)})
        elif r < cuts[4]:
            ops.append({"op": "evict_mamba", "n": rng.randint(1, 2)})
        elif r < cuts[5]:
            ops.append({"op": "evict_host", "n": rng.randint(1, 4)})
        elif r < cuts[6]:
            ops.append({"op": "events"})
        elif r < cuts[7] and storage:
            ops.append({"op": "l3_ack"})
        elif r < cuts[8] and storage:
            ops.append({"op": "prefetch", "tokens": tokens()})
        elif storage and hit_op and heavy and rng.random() < 0.4:  # the hit count first, the data later
            ops.append({"op": "prefetch_hit", "n": rng.randint(0, 6)})
        elif storage:
            ops.append({"op": "prefetch_done", "n": rng.randint(0, 6), "mamba_hit": rng.random() < 0.6})
        else:
            ops.append({"op": "events"})
    return {"config": cfg, "ops": ops}


def _inject(rng: random.Random, ps: int, storage: bool) -> dict:
    """An injected starting state, as scenarios A and D build theirs."""
    nodes, used = [], set()
    for j in range(rng.randint(1, 4)):
        parent = rng.choice([None] + list(range(j)))
        first = rng.choice([k for k in range(1, 10) if (parent, k) not in used] or [99])
        used.add((parent, first))
        host = rng.random() < 0.7
        dev = not host or rng.random() < 0.3
        nodes.append(dict(key=[first] * ps if ps > 1 else [first] + ([] if rng.random() < 0.5 else [first + 1]),
                          parent=parent, device=dev, mamba=dev and rng.random() < 0.5, host=host,
                          mamba_host=host and rng.random() < 0.5, hash=host and storage,
                          l3_backup=host and storage and rng.random() < 0.5))
    return {"op": "inject", "nodes": nodes}


def docs(n: int, seed: int, profiles: tuple[str, ...] = PROFILES, page_sizes: tuple[int, ...] = (1, 2),
         hit_op: bool | None = None) -> list[dict]:
    """``n`` documents, the profiles and page sizes taken in turn, document ``i`` seeded by ``seed`` and ``i``."""
    out = []
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        out.append(random_doc(rng, profiles[i % len(profiles)], page_sizes[(i // len(profiles)) % len(page_sizes)],
                              hit_op))
    return out
