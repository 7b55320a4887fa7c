#!/usr/bin/env python3
"""Compare simcache with SGLang's real cache (shared/tools/sglang_oracle) on random operation sequences.

Run it with the oracle's Python (torch + numpy), after setting up the oracle's vendor/ as its README says:

    ~/.venvs/sglang-oracle/bin/python tools/compare_with_oracle.py --n 500 --seed 1 \
        --oracle ../shared/tools/sglang_oracle --vendor ~/.cache/sglang_oracle

It prints, per preset, how many sequences agreed field by field, and writes each disagreement to
``--out`` (default build/oracle_diffs/) as an OPS.json that reproduces it. ``--profile storage`` draws sequences
that lean on storage: prefetches into a small host pool (so they get truncated or declined), Mamba states evicted
to host (so matches end in Mamba-only host hits), prefetch thresholds above one page; ``--page-size`` fixes the page
size. For ``main_2026_06`` it also counts the sequences on which simcache's ``main_2026_06`` and ``followup_fix``
differ, i.e. those that exercise the two changes of that version. Nothing here is SGLang code, and the project's
tests never need it.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from simcache.real import sequences  # noqa: E402
from simcache.versions import REAL_VERSIONS  # noqa: E402

# the presets the oracle runs: those modelling a commit of the mirror (release_0_5_17's real code is a wheel's,
# which ``simcache real`` runs)
REAL_PRESETS = tuple(v.preset for v in REAL_VERSIONS.values() if v.source == "mirror")

FIELDS = ("outcome", "raised_in", "step", "status", "tree", "tree_slots", "counters", "inflight", "accounting",
          "free", "first_stale", "stale_final", "double_frees_slots", "chain_names")


def random_doc(rng: random.Random, profile: str = "mixed", page_size: int | None = None) -> dict:
    """One random OPS.json document: ``simcache.real.sequences.random_doc`` without ``prefetch_hit`` (the oracle
    does not know it). ``profile`` "storage" leans on storage, prefetch and Mamba host hits. (Before 2026-12-06 this
    tool had its own copy, which drew one more number per operation of the mixed profile: a seed's sequences
    differ from that copy's.)"""
    return sequences.random_doc(rng, profile, page_size, hit_op=False)


def sim_view(r: dict) -> dict:
    return {k: r[k] for k in FIELDS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="how many random sequences (default 200)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the sequence generator (default 1)")
    ap.add_argument("--oracle", default=os.path.join(HERE, "..", "..", "shared", "tools", "sglang_oracle"),
                    help="the oracle's folder (default ../shared/tools/sglang_oracle)")
    ap.add_argument("--vendor", default=os.environ.get("SGLANG_ORACLE_VENDOR"),
                    help="the oracle's vendored SGLang files (default $SGLANG_ORACLE_VENDOR, else ORACLE/vendor)")
    ap.add_argument("--presets", default=",".join(REAL_PRESETS),
                    help=f"comma-separated real presets to compare (default {','.join(REAL_PRESETS)})")
    ap.add_argument("--profile", choices=("mixed", "storage"), default="mixed",
                    help="mixed (default): every op kind; storage: storage on, prefetches into a small host pool, "
                         "Mamba states evicted to host")
    ap.add_argument("--page-size", type=int, choices=(1, 2), default=None,
                    help="fix the page size (default: 1 or 2 at random, 1 three times in four)")
    ap.add_argument("--out", default="build/oracle_diffs", help="folder for the disagreements (OPS.json each)")
    a = ap.parse_args()
    bad = [p for p in a.presets.split(",") if p not in REAL_PRESETS]
    if bad:
        print(f"unknown real preset(s) {', '.join(bad)}; choose from {', '.join(REAL_PRESETS)}", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.abspath(a.oracle))
    import oracle  # noqa: E402  (the oracle's own CLI module)

    from simcache.ops_run import run_ops  # noqa: E402

    logging.disable(logging.CRITICAL)
    vendor = os.path.abspath(a.vendor or os.path.join(a.oracle, "vendor"))
    docs = [random_doc(random.Random(a.seed * 1_000_003 + i), a.profile, a.page_size) for i in range(a.n)]
    os.makedirs(a.out, exist_ok=True)
    total_bad = 0
    for preset in a.presets.split(","):
        mods, _ = oracle.load(preset, vendor)
        agree, crashes, exercised, sigs = 0, 0, 0, Counter()
        for i, doc in enumerate(docs):
            real = oracle.run(mods, doc)
            sim = run_ops(doc, preset)
            sigs[real["sig"]] += 1
            if preset == "main_2026_06":
                before = run_ops(doc, "followup_fix")
                exercised += any(before[k] != sim[k] for k in FIELDS if k not in ("double_frees_slots", "chain_names"))
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
        print(sigs.most_common(8))
        more = f"; {exercised} behave differently on followup_fix" if preset == "main_2026_06" else ""
        print(f"{preset}: {agree}/{len(docs)} sequences agree on {', '.join(FIELDS)} "
              f"({crashes} of them crash in the real code{more})", flush=True)
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
