#!/usr/bin/env python3
"""Compare simcache with SGLang's real cache (shared/tools/sglang_oracle) on random operation sequences.

Run it with the oracle's Python (torch + numpy), after setting up the oracle's vendor/ as its README says:

    ~/.venvs/sglang-oracle/bin/python tools/compare_with_oracle.py --n 500 --seed 1 \
        --oracle ../shared/tools/sglang_oracle --vendor ~/.cache/sglang_oracle

It prints, per preset, how many sequences agreed field by field, and writes each disagreement to
``--out`` (default build/oracle_diffs/) as an OPS.json that reproduces it. Nothing here is SGLang code, and the
project's tests never need it.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

FIELDS = ("outcome", "raised_in", "step", "status", "tree", "tree_slots", "counters", "inflight", "accounting",
          "free", "first_stale", "stale_final", "double_frees_slots", "chain_names")


def random_doc(rng: random.Random) -> dict:
    ps = rng.choice([1, 1, 1, 2])
    policy = rng.choice(["write_through", "write_through", "write_through_selective", "write_back"])
    storage = rng.random() < 0.5
    cfg = dict(policy=policy, storage=storage, page_size=ps, device_kv=rng.choice([12, 16, 24, 32]),
               device_mamba=rng.choice([3, 4, 6, 8]), host_kv=rng.choice([2, 4, 6, 8]),
               host_mamba=rng.choice([1, 2, 4, 8]), driver=rng.choice(["fuzz", "scheduler"]),
               load_back_threshold=rng.choice([1, 2, 10]),
               prefetch_stop_policy=rng.choice(["best_effort", "best_effort", "wait_complete", "timeout"]))
    alphabet = [1, 2, 3, 4, 5]
    prefixes = [[1, 2], [1, 2, 3, 4], [5, 6], [1, 3]]

    def tokens():
        base = list(rng.choice(prefixes)) if rng.random() < 0.7 else []
        base += [rng.choice(alphabet) for _ in range(rng.randint(1, 4))]
        if ps > 1 and len(base) < ps:
            base += [7] * (ps - len(base))
        return base

    ops = []
    if rng.random() < 0.4:  # an injected starting state, as scenarios A and D build theirs
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
        cfg["device_kv"], cfg["host_kv"] = 32, max(cfg["host_kv"], 10)
        cfg["device_mamba"], cfg["host_mamba"] = 8, 8
        ops.append({"op": "inject", "nodes": nodes})
    for _ in range(rng.randint(4, 18)):
        r = rng.random()
        if r < 0.35:
            ops.append({"op": "request", "tokens": tokens()})
        elif r < 0.45:
            ops.append({"op": "start", "tokens": tokens()})
        elif r < 0.52:
            ops.append({"op": "finish_oldest"})
        elif r < 0.62:
            ops.append({"op": "evict", "n": rng.randint(1, 6)})
        elif r < 0.67:
            ops.append({"op": "evict_mamba", "n": rng.randint(1, 2)})
        elif r < 0.74:
            ops.append({"op": "evict_host", "n": rng.randint(1, 4)})
        elif r < 0.82:
            ops.append({"op": "events"})
        elif r < 0.88 and storage:
            ops.append({"op": "l3_ack"})
        elif r < 0.94 and storage:
            ops.append({"op": "prefetch", "tokens": tokens()})
        elif storage:
            ops.append({"op": "prefetch_done", "n": rng.randint(0, 6), "mamba_hit": rng.random() < 0.6})
        else:
            ops.append({"op": "events"})
    return {"config": cfg, "ops": ops}


def sim_view(r: dict) -> dict:
    return {k: r[k] for k in FIELDS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--oracle", default=os.path.join(HERE, "..", "..", "shared", "tools", "sglang_oracle"))
    ap.add_argument("--vendor", default=os.environ.get("SGLANG_ORACLE_VENDOR"))
    ap.add_argument("--presets", default="pre_fix,merged_fix,followup_fix")
    ap.add_argument("--out", default="build/oracle_diffs")
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.oracle))
    import oracle  # noqa: E402  (the oracle's own CLI module)

    from simcache.ops_run import run_ops  # noqa: E402

    logging.disable(logging.CRITICAL)
    vendor = os.path.abspath(a.vendor or os.path.join(a.oracle, "vendor"))
    docs = [random_doc(random.Random(a.seed * 1_000_003 + i)) for i in range(a.n)]
    os.makedirs(a.out, exist_ok=True)
    total_bad = 0
    for preset in a.presets.split(","):
        mods, _ = oracle.load(preset, vendor)
        agree, crashes = 0, 0
        for i, doc in enumerate(docs):
            real = oracle.run(mods, doc)
            sim = run_ops(doc, preset)
            for r in (real, sim):
                r["double_frees_slots"] = [[d["pool"], d["slots"]] for d in r["double_frees"]]
                r["chain_names"] = [c.split(":")[0] for c in r["chain"]]
            crashes += real["outcome"] != "clean"
            diffs = [k for k in FIELDS if real[k] != sim[k]]
            if not diffs:
                agree += 1
                continue
            total_bad += 1
            path = os.path.join(a.out, f"{preset}_{a.seed}_{i}.json")
            with open(path, "w") as f:
                json.dump({**doc, "diff": {k: {"real": real[k], "simcache": sim[k]} for k in diffs}}, f, indent=1)
        from collections import Counter
        print(Counter(oracle.run(mods, d)["sig"] for d in docs).most_common(8))
        print(f"{preset}: {agree}/{len(docs)} sequences agree on {', '.join(FIELDS)} "
              f"({crashes} of them crash in the real code)")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
