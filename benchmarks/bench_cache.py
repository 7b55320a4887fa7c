"""Cache operations per second on a seeded realistic workload; tracing overhead; against SGLang's real code.

    .venv/bin/python benchmarks/bench_cache.py [--requests 3000] [--oracle ../shared/tools/sglang_oracle]

Every figure is a ratio measured in this one run (the baseline is simcache with tracing off). The comparison
with the real code runs the same OPS.json through the oracle (SGLang's own cache on CPU) when its vendor/ files
are set up (``--vendor`` or ``$SGLANG_ORACLE_VENDOR``), and is skipped with a message otherwise.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from simcache.ops_run import run_ops  # noqa: E402
from simcache.trace import Recorder  # noqa: E402


def workload(n_requests: int, seed: int = 0, device_kv: int = 1024, host_kv: int = 2048) -> dict:
    """Shared system prompts, multi-turn chats extending earlier prompts, random lengths; regular acks and
    evictions; write-through with L3 storage off."""
    rng = random.Random(seed)
    systems = [[1000 + 37 * s + i for i in range(rng.randint(8, 24))] for s in range(6)]
    chats: list[list[int]] = []
    ops = []
    for r in range(n_requests):
        if chats and rng.random() < 0.45:  # a follow-up turn extends an earlier conversation
            i = rng.randrange(len(chats))
            toks = chats[i] + [rng.randrange(50, 950) for _ in range(rng.randint(2, 16))]
            chats[i] = toks
        else:
            toks = list(rng.choice(systems)) + [rng.randrange(50, 950) for _ in range(rng.randint(2, 32))]
            chats.append(toks)
            if len(chats) > 64:
                chats.pop(0)
        ops.append({"op": "request", "tokens": toks[-240:]})
        if r % 8 == 7:
            ops.append({"op": "events"})
        if r % 50 == 49:
            ops.append({"op": "evict", "n": device_kv // 8})
    cfg = dict(policy="write_through", storage=False, device_kv=device_kv, device_mamba=256, host_kv=host_kv,
               host_mamba=512, load_back_threshold=10)
    return {"config": cfg, "ops": ops}


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def oracle_runner(oracle_dir: str, vendor: str | None):
    """A function that runs a doc through SGLang's real code, or None and the reason."""
    vendor = vendor or os.environ.get("SGLANG_ORACLE_VENDOR") or os.path.join(oracle_dir, "vendor")
    if not os.path.isfile(os.path.join(vendor, "pre_fix", "hi_mamba_radix_cache.py")):
        return None, f"the oracle's SGLang files are not set up in {vendor} (see its README)"
    sys.path.insert(0, os.path.abspath(oracle_dir))
    try:
        import logging

        import oracle  # type: ignore

        logging.disable(logging.CRITICAL)
        mods, _ = oracle.load("pre_fix", vendor)
    except Exception as e:  # noqa: BLE001
        return None, f"the oracle could not load ({e})"
    return (lambda doc: oracle.run(mods, doc)), None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--oracle", default=os.path.join(HERE, "..", "..", "shared", "tools", "sglang_oracle"))
    ap.add_argument("--vendor")
    a = ap.parse_args()
    doc = workload(a.requests, a.seed)
    n_ops = len(doc["ops"])
    res = run_ops(doc, "pre_fix")
    print(f"workload: {a.requests} requests, {n_ops} operations, outcome {res['outcome']}, "
          f"final tree {len(res['tree'])} nodes")
    base = timed(lambda: run_ops(doc, "pre_fix"))
    small = workload(max(200, a.requests // 10), a.seed)
    small_base = timed(lambda: run_ops(small, "pre_fix"))
    t_trace = timed(lambda: run_ops(small, "pre_fix", recorder=Recorder(snapshots=False, invariants=False)), 1)
    tiny = workload(30, a.seed, device_kv=128, host_kv=256)  # teaching size: the player's and notebooks' scale
    tiny_base = timed(lambda: run_ops(tiny, "pre_fix"))
    t_full = timed(lambda: run_ops(tiny, "pre_fix", recorder=Recorder(snapshots=True, invariants=True)), 1)
    print("\n| what | time | ops/s | ratio to baseline |\n|---|---|---|---|")
    print(f"| simcache, tracing off (baseline) | {base:.3f} s | {n_ops / base:,.0f} | 1.00 |")
    run, why = oracle_runner(a.oracle, a.vendor)
    if run is None:
        print(f"| SGLang's real code (oracle) | skipped: {why} | | |")
    else:
        real = run(doc)
        same = real["outcome"] == res["outcome"] and real["tree"] == res["tree"]
        t_real = timed(lambda: run(doc))
        print(f"| SGLang's real code (oracle, same ops; results {'identical' if same else 'DIFFER'}) | "
              f"{t_real:.3f} s | {n_ops / t_real:,.0f} | {t_real / base:.2f} |")
    ns = len(small["ops"])
    print(f"| small workload ({ns} ops), tracing off | {small_base:.3f} s | {ns / small_base:,.0f} | 1.00 |")
    print(f"| small workload, micro-step trace | {t_trace:.3f} s | {ns / t_trace:,.0f} | {t_trace / small_base:.1f} |")
    nt = len(tiny["ops"])
    print(f"| teaching-size workload ({nt} ops), tracing off | {tiny_base:.4f} s | {nt / tiny_base:,.0f} | 1.00 |")
    print(f"| teaching-size, trace + snapshot every micro-step + invariants | {t_full:.3f} s | {nt / t_full:,.0f} | "
          f"{t_full / tiny_base:.1f} |")
    print("\nscale (tracing off): work x10, x100 -> time and peak memory")
    print("| requests | ops | time | ratio | peak MiB |\n|---|---|---|---|---|")
    first = None
    for n in (a.requests // 100 or 10, a.requests // 10, a.requests):
        d = workload(n, a.seed, device_kv=max(64, n // 3), host_kv=max(128, 2 * n // 3))
        t = timed(lambda d=d: run_ops(d, "pre_fix"), 1)
        tracemalloc.start()  # memory in a second run: tracemalloc slows Python down several times
        run_ops(d, "pre_fix")
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        first = first or t
        print(f"| {n} | {len(d['ops'])} | {t:.3f} s | {t / first:.1f} | {peak:.1f} |")
    print("\ntrace length (micro-steps) vs time, snapshots on")
    print("| requests | micro-steps | time | ratio |\n|---|---|---|---|")
    first = None
    for n in (20, 200):
        d = workload(n, a.seed, device_kv=128, host_kv=256)
        rec = Recorder(snapshots=True, invariants=False)
        t = timed(lambda d=d, rec=rec: run_ops(d, "pre_fix", recorder=rec), 1)
        first = first or t
        print(f"| {n} | {len(rec.steps)} | {t:.3f} s | {t / first:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
