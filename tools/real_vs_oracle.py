#!/usr/bin/env python3
"""simcache.real against the team's oracle (shared/tools/sglang_oracle) and against the model, at the mirror's commits.

    .venv/bin/python tools/real_vs_oracle.py --n 1000 --seed 7 --oracle ../shared/tools/sglang_oracle \\
        --vendor ~/.cache/sglang_oracle --mirror /work/.mirror/ziruiliu+sglang_exp/repo

For each of the four commits (pre_fix, merged_fix, followup_fix, main_2026_06) it loads SGLang's files from the git
mirror into simcache.real (``from_git``), and the oracle's vendored copy of the same files; runs the same random
operation files (``simcache.real.sequences``: mixed and storage profiles, page sizes 1 and 2) on simcache.real, on
the oracle and on the model's preset of that name; and prints, per commit, how many sequences agree field for field
(and per field), real vs oracle and real vs model. Disagreements go to ``--out`` as OPS.json files. The oracle is the
team's tool, not part of simcache: the project's tests never use it.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from simcache.ops_run import run_ops  # noqa: E402
from simcache.real import HI_MAMBA, from_git, load, run_real  # noqa: E402
from simcache.real.run import FIELDS  # noqa: E402
from simcache.real.sequences import docs  # noqa: E402
from simcache.scenario import from_doc  # noqa: E402
from simcache.versions import REAL_VERSIONS  # noqa: E402

CLEAN = "clean"
COMMITS = {v.preset: v.ref for v in REAL_VERSIONS.values() if v.source == "mirror"}


def oracle_view(r: dict) -> dict:
    """The oracle's result in simcache.real's formats: call chain as names, with ``fn:line`` kept apart."""
    out = {k: r[k] for k in FIELDS}
    out["chain"] = [c.split(":")[0] for c in r["chain"]]
    out["chain_lines"] = list(r["chain"])
    return out


def count(pairs, fields) -> tuple[int, Counter]:
    agree, per_field = 0, Counter()
    for a, b in pairs:
        bad = [k for k in fields if a[k] != b[k]]
        agree += not bad
        for k in fields:
            per_field[k] += a[k] == b[k]
    return agree, per_field


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="sequences per commit (default 200)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--oracle", default=os.path.join(HERE, "..", "..", "shared", "tools", "sglang_oracle"))
    ap.add_argument("--vendor", default=os.environ.get("SGLANG_ORACLE_VENDOR"), help="the oracle's vendor folder")
    ap.add_argument("--mirror", default="/work/.mirror/ziruiliu+sglang_exp/repo", help="bare git mirror of SGLang")
    ap.add_argument("--presets", default=",".join(COMMITS))
    ap.add_argument("--out", default="build/real_vs_oracle")
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.oracle))
    import oracle  # noqa: E402  (the oracle's own module)

    logging.disable(logging.CRITICAL)
    vendor = os.path.abspath(a.vendor or os.path.join(a.oracle, "vendor"))
    seqs = docs(a.n, a.seed, hit_op=False)  # the oracle predates 0.5.17's prefetch_hit (a no-op on these commits)
    os.makedirs(a.out, exist_ok=True)
    lines_agree = 0
    for preset in a.presets.split(","):
        real_load = load(from_git(a.mirror, COMMITS[preset], HI_MAMBA.files), HI_MAMBA)
        mods, verified = oracle.load(preset, vendor)
        with_oracle, with_model, crashes = [], [], Counter()
        for i, doc in enumerate(seqs):
            real = run_real(from_doc(doc), real_load)
            orc = oracle_view(oracle.run(mods, doc))
            model = run_ops(doc, preset)
            with_oracle.append((real, orc))
            with_model.append((real, model))
            lines_agree += [c.split(":", 1)[1] for c in real["chain_lines"]] == orc["chain_lines"]
            crashes[real["sig"]] += 1
            bad = [k for k in FIELDS if real[k] != orc[k] or real[k] != model[k]]
            if bad:
                with open(os.path.join(a.out, f"{preset}_{a.seed}_{i}.json"), "w") as f:
                    json.dump({**doc, "diff": {k: {"real": real[k], "oracle": orc[k], "model": model[k]}
                                               for k in bad}}, f, indent=1)
        for what, pairs in (("oracle", with_oracle), ("model", with_model)):
            agree, per_field = count(pairs, FIELDS)
            worst = sorted(per_field.items(), key=lambda kv: kv[1])[:3]
            print(f"{preset}: simcache.real vs {what}: {agree}/{len(seqs)} sequences agree on all {len(FIELDS)} "
                  f"fields (fewest per field: {', '.join(f'{k} {v}' for k, v in worst)})", flush=True)
        print(f"{preset}: oracle files verified: {verified}; outcomes: "
              f"{', '.join(f'{n} {s or CLEAN}' for s, n in crashes.most_common(4))}", flush=True)
    runs = len(seqs) * len(a.presets.split(","))
    print(f"call chains with the same file lines as the oracle's: {lines_agree}/{runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
