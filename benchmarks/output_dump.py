"""Dump what `simcache run` prints, to check that a speed-up changed no byte of it (#12).

    .venv/bin/python benchmarks/output_dump.py OUT_DIR [--quick]

Writes one file per case into OUT_DIR: `simcache run` text and `--json` (trace hash, went-stale, cleaned-up,
first violation and its micro-step, violation counts) on the 2,000-request workload of ``bench_trace`` under
every preset (``--quick``: followup_fix only) and through an ``--ops`` window, on every gallery scenario under
every preset, on 60 seeded random operation files, and on the benchmark matrix's long-prompt cells (prompts of
about 2,000 tokens: big pools, long slot lists; page sizes 1 and 16, the three write policies); plus every
violation, went-stale, cleaned-up and re-admitted event of workloads whose KV, slot ownership and size counters are
corrupted between operations (the 300-request workload and a long-prompt cell).
Run it on two trees and ``diff -r`` the folders.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from bench_trace import doc_for  # noqa: E402
from matrix import PAGE_SIZES, POLICIES, QUICK_REQUESTS  # noqa: E402
from matrix import workload as cell_workload  # noqa: E402

from simcache import trace  # noqa: E402
from simcache.cli import main as cli_main  # noqa: E402
from simcache.ops_run import check_doc, execute  # noqa: E402
from simcache.scenario import gallery  # noqa: E402
from simcache.versions import PRESETS  # noqa: E402
from simcache.versions import preset as flags_of  # noqa: E402


def _corrupt(i, cache, drv) -> None:
    node = next((n for n in cache.root_node.children.values() if n.value), None)
    if node is None:
        return
    if i % 40 == 20:
        cache.pools.device_kv.write(node.value[:1], [12345])
    if i % 40 == 30 and len(node.value) > 1:
        node.value = node.value[:1] * 2 + node.value[2:]
    if i % 53 == 40:
        cache.full_evictable_size_ += 1


def main() -> int:
    from trace_cases import random_doc

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the folder to write (created if missing)")
    ap.add_argument("--quick", action="store_true", help="the workload under followup_fix only, 20 random files")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    inputs = os.path.join(a.out, "inputs")
    os.makedirs(inputs, exist_ok=True)
    presets = list(PRESETS)

    def cli(name: str, args: list[str]) -> None:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = cli_main(args)
        with open(os.path.join(a.out, name), "w") as f:
            f.write(f"rc={rc}\n" + buf.getvalue())

    workload = os.path.join(inputs, "workload2000.json")
    with open(workload, "w") as f:
        json.dump(doc_for(2000), f)
    for p in ["followup_fix"] if a.quick else presets:
        cli(f"wl_{p}.txt", ["run", workload, "--preset", p])
        cli(f"wl_{p}.json", ["run", workload, "--preset", p, "--json"])
    cli("wl_window.json", ["run", workload, "--preset", "followup_fix", "--json", "--ops", "700:1300"])
    for g in gallery():
        for p in presets:
            cli(f"g_{g}_{p}.txt", ["run", g, "--preset", p])
            cli(f"g_{g}_{p}.json", ["run", g, "--preset", p, "--json"])
    rng = random.Random(123)
    for k in range(20 if a.quick else 60):
        path = os.path.join(inputs, f"random_{k}.json")
        with open(path, "w") as f:
            json.dump(random_doc(rng), f)
        cli(f"r_{k}.json", ["run", path, "--preset", presets[k % len(presets)], "--json"])
    for ps in PAGE_SIZES:
        for policy in POLICIES:
            path = os.path.join(inputs, f"long_{ps}_{policy}.json")
            with open(path, "w") as f:
                json.dump(cell_workload(2000, QUICK_REQUESTS[2000], ps, policy), f)
            cli(f"long_{ps}_{policy}.txt", ["run", path, "--preset", "followup_fix"])
            cli(f"long_{ps}_{policy}.json", ["run", path, "--preset", "followup_fix", "--json"])
    for name, doc in (("corrupted.json", doc_for(300)),
                      ("corrupted_long.json", cell_workload(2000, QUICK_REQUESTS[2000], 1, "write_through"))):
        cfg, ops = check_doc(doc)
        rec = trace.Recorder(snapshots=False)
        execute(cfg, [(None, op) for op in ops], flags_of("followup_fix"), recorder=rec, on_step=_corrupt)
        with open(os.path.join(a.out, name), "w") as f:
            json.dump(dict(violations=[v.as_dict() for v in rec.violations],
                           went_stale=[e.as_dict() for e in rec.went_stale],
                           cleaned_up=[e.as_dict() for e in rec.cleaned_up],
                           readmitted=[e.as_dict() for e in rec.readmitted], trace_sha256=rec.sha256()), f, indent=1)
    print(f"wrote {len(os.listdir(a.out)) - 1} files to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
