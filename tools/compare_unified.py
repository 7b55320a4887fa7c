"""Compare the unified model with SGLang's real UnifiedRadixCache on fresh random sequences, field by field.

    python tools/compare_unified.py --n 500 --seed 1                  # both presets, both write policies
    python tools/compare_unified.py --presets unified_0_5_17 --policy write_back --n 2000 --seed 7
    python tools/compare_unified.py --n 200 --show 3                  # print the first 3 disagreements whole
    python tools/compare_unified.py --n 500 --page-size 2             # whole pages, the Mamba extra buffer on

Each preset's second line says what the cases ended in on the real code (docs/unified.md quotes it).
The releases' files come from their wheels (fetched once into simcache's cache folder, sha256-checked).
Exit status 0 when every case agrees, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from simcache.real.source import SourceError
from simcache.real.unified import load_unified
from simcache.unified.compare import Outcomes, compare
from simcache.unified.versions import PRESETS, RELEASE_OF


def _cases(text: str) -> int:
    n = int(text) if text.strip().isdigit() else 0
    if not 1 <= n <= 1_000_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of cases from 1 to 1,000,000")
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    p.add_argument("--policy", choices=("write_through", "write_back"), help="default: drawn per case")
    p.add_argument("--n", type=_cases, default=200, help="cases per preset (1 to 1,000,000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--page-size", type=int, default=1, choices=(1, 2), help="2: whole pages, Mamba extra buffer on")
    p.add_argument("--show", type=int, default=1, help="disagreements to print whole")
    a = p.parse_args(argv)
    try:
        loaded = {RELEASE_OF[x]: load_unified(RELEASE_OF[x]) for x in a.presets}
    except SourceError as e:  # no index, a bad wheel, a corrupt cache: one sentence
        print(f"compare_unified.py: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    ends = {x: Outcomes() for x in a.presets}
    agree, bad = compare(a.presets, a.seed, a.n, loaded, a.policy, page_size=a.page_size,
                         on_case=lambda x, i, diff, cfg, real: ends[x].add(cfg, real))
    dt = time.perf_counter() - t0
    for x in a.presets:
        print(f"{x} vs sglang {RELEASE_OF[x]}: {agree[x]}/{a.n} agree field for field "
              f"(seed {a.seed}, page size {a.page_size}{', ' + a.policy if a.policy else ''})")
        print(f"  on the real code: {ends[x].line()}")
    print(f"{len(a.presets) * a.n} cases in {dt:.1f} s")
    for d in bad[: a.show]:
        print(f"\n--- {d.preset} seed {d.seed} case {d.index}: {', '.join(d.fields)}")
        print("config:", json.dumps(d.cfg))
        print("ops:", json.dumps(d.ops))
        for k in d.fields:
            print(f"  model {k}: {json.dumps(d.model.get(k))}")
            print(f"  real  {k}: {json.dumps(d.real.get(k))}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
