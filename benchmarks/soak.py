"""A long seeded soak: at least a million cache operations per preset, with a summary of what went wrong.

    .venv/bin/python benchmarks/soak.py [--ops 1000000] [--seed 0] [--jobs 2] [--presets pre_fix,followup_fix]

Random programs of requests sharing prefixes, chunked starts and finishes, device / Mamba / host evictions, write
and storage acks and prefetches run under small pools until they end or the simulated cache raises. Per preset:
operations run, programs, crashes by signature, invariant violations found at the end of programs, programs that
leaked slots or freed a slot twice. Not part of CI.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from simcache.invariants import check_all  # noqa: E402
from simcache.ops_run import run_ops  # noqa: E402
from simcache.versions import PRESETS  # noqa: E402


def program(seed: int, length: int = 200) -> dict:
    rng = random.Random(seed)
    storage = rng.random() < 0.6
    cfg = dict(policy=rng.choice(["write_through", "write_through", "write_through_selective", "write_back"]),
               storage=storage, device_kv=rng.choice([16, 24, 32]), device_mamba=rng.choice([3, 4, 6]),
               host_kv=rng.choice([4, 6, 8, 12]), host_mamba=rng.choice([2, 4, 8]), load_back_threshold=1)
    prefixes = [[1, 2], [1, 2, 3], [4, 5, 6], [7]]
    ops = []
    for _ in range(length):
        toks = list(rng.choice(prefixes)) + [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
        r = rng.random()
        op = ({"op": "request", "tokens": toks} if r < 0.3 else {"op": "start", "tokens": toks} if r < 0.38 else
              {"op": "finish_oldest"} if r < 0.46 else {"op": "evict", "n": rng.randint(1, 6)} if r < 0.56 else
              {"op": "evict_mamba", "n": 1} if r < 0.6 else {"op": "evict_host", "n": rng.randint(1, 4)} if r < 0.67
              else {"op": "events"} if r < 0.8 else {"op": "l3_ack"} if r < 0.88 and storage else
              {"op": "prefetch", "tokens": toks} if r < 0.94 and storage else
              {"op": "prefetch_done", "n": rng.randint(0, 6), "mamba_hit": rng.random() < 0.6} if storage
              else {"op": "events"})
        ops.append(op)
    return {"config": cfg, "ops": ops}


def run_chunk(args) -> dict:
    preset, seeds = args
    out = dict(ops=0, programs=0, crashes=Counter(), violations=Counter(), leaks=0, double_frees=0)
    for seed in seeds:
        r = run_ops(program(seed), preset)
        out["programs"] += 1
        out["ops"] += len(r["status"])
        if r["outcome"] != "clean":
            out["crashes"][r["sig"]] += 1
        live = list(r["_driver"].live.values())
        for name, problem in check_all(r["_cache"], live).items():
            if problem:
                out["violations"][name] += 1
        out["leaks"] += any(a["leaked"] for a in r["accounting"].values())
        out["double_frees"] += bool(r["double_frees"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=1_000_000, help="operations per preset (at least)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--presets", default=",".join(PRESETS))
    a = ap.parse_args()
    n_programs = a.ops // 150 + 1  # programs stop early at a crash; topped up below until the op count is met
    print("| preset | operations | programs | crashes (by signature) | end-of-program violations | "
          "programs leaking | programs double-freeing | time |\n|---|---|---|---|---|---|---|---|")
    for preset in a.presets.split(","):
        t = time.time()
        total = dict(ops=0, programs=0, crashes=Counter(), violations=Counter(), leaks=0, double_frees=0)
        next_seed = a.seed * 10_000_000
        with ProcessPoolExecutor(a.jobs) as pool:
            while total["ops"] < a.ops:
                batch = list(range(next_seed, next_seed + n_programs))
                next_seed += n_programs
                chunks = [(preset, batch[i:: a.jobs * 4]) for i in range(a.jobs * 4)]
                for part in pool.map(run_chunk, chunks):
                    for k in ("ops", "programs", "leaks", "double_frees"):
                        total[k] += part[k]
                    total["crashes"].update(part["crashes"])
                    total["violations"].update(part["violations"])
                n_programs = max(100, (a.ops - total["ops"]) // 150 + 1)
                print(f"  {preset}: {total['ops']:,} ops so far", file=sys.stderr, flush=True)
        crashes = "; ".join(f"{k}: {v}" for k, v in total["crashes"].most_common()) or "none"
        viol = "; ".join(f"{k}: {v}" for k, v in total["violations"].most_common()) or "none"
        print(f"| {preset} | {total['ops']:,} | {total['programs']:,} | {crashes} | {viol} | {total['leaks']:,} | "
              f"{total['double_frees']:,} | {time.time() - t:.0f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
