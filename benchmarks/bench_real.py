#!/usr/bin/env python3
"""The model against SGLang's own code on many fresh random sequences: how many agree, field by field, and how fast.

    .venv/bin/python benchmarks/bench_real.py                       # 10,000 sequences, 0.5.17 vs release_0_5_17
    .venv/bin/python benchmarks/bench_real.py --n 2000 --sglang PATH --preset main_2026_06

The real code comes from a release's wheel (``--sglang-version``, fetched once into the cache folder) or a path
(``--sglang``); the sequences from ``simcache.real.sequences`` (storage profile twice for each mixed one, page sizes 1
and 2). It prints the agreement counts (all fields, then per field), the real outcomes, and both sides' time per
sequence, measured alternately in the same loop (so the load of the machine weighs on both alike).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from simcache.ops_run import run_ops  # noqa: E402
from simcache.real import FIELDS, diff, load_target, run_real  # noqa: E402
from simcache.real.compare import model_preset  # noqa: E402
from simcache.real.sequences import docs  # noqa: E402
from simcache.scenario import from_doc  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="sequences (default 10,000)")
    ap.add_argument("--seed", type=int, default=38)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--sglang", metavar="PATH")
    src.add_argument("--sglang-version", metavar="X.Y.Z", default=None)
    ap.add_argument("--preset", help="the model's preset (default: the one that models the source)")
    a = ap.parse_args()
    version = a.sglang_version or (None if a.sglang else "0.5.17")
    loaded = load_target(a.sglang, version)
    preset = model_preset(loaded.source, a.preset)
    seqs = docs(a.n, a.seed, profiles=("storage", "storage", "mixed"))
    agree, per_field, outcomes, bad = 0, Counter(), Counter(), []
    t_real = t_model = 0.0
    for i, doc in enumerate(seqs):
        t0 = time.perf_counter()
        real = run_real(from_doc(doc), loaded)
        t1 = time.perf_counter()
        model = run_ops(doc, preset)
        t2 = time.perf_counter()
        t_real, t_model = t_real + t1 - t0, t_model + t2 - t1
        differ = diff(model, real)
        agree += not differ
        per_field.update(k for k in FIELDS if k not in differ)
        outcomes[real["sig"] or "clean"] += 1
        if differ and len(bad) < 10:
            bad.append((i, differ))
        if (i + 1) % 1000 == 0:
            print(f"  {i + 1:,} sequences, {agree:,} agree", file=sys.stderr, flush=True)
    print(f"{loaded.source.label} vs the model's {preset}: {agree:,}/{a.n:,} sequences agree on all {len(FIELDS)} "
          f"fields (seed {a.seed})")
    print("per field: " + ", ".join(f"{k} {per_field[k]:,}" for k in FIELDS))
    print("real outcomes: " + "; ".join(f"{n:,} {s}" for s, n in outcomes.most_common()))
    print(f"time per sequence: real {1000 * t_real / a.n:.1f} ms, model {1000 * t_model / a.n:.1f} ms "
          f"(load average {os.getloadavg()[0]:.1f})")
    for i, differ in bad:
        print(f"  sequence {i} differs on {', '.join(differ)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
