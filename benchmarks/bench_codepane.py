"""The code pane's cost (#17), on the realistic workload of ``bench_trace.py``; every figure measured in this run.

    .venv/bin/python benchmarks/bench_codepane.py [--requests 500] [--seeks 100]

The code pane records nothing while a run is traced (its frames are rebuilt by replay), so ``simcache run`` is
unchanged; what it costs is paid when a frame is shown:
- ``seek``: the code frames of a random micro-step, nothing cached (one replay of its operation from the nearest
  checkpoint, reading the Python stack), beside the snapshot rebuild of the same step (the same replay's cost);
- ``export``: building the page data of the run (operation frames + moments) with and without the code pane,
  alternating, medians of ``--repeat``: the ratio is the export's slowdown.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_trace import PRESET, doc_for, write_doc  # noqa: E402


def seek(run, n: int, seed: int = 3) -> dict:
    from simcache import codepane

    t = run.trace
    rng = random.Random(seed)
    steps = [rng.randrange(len(t.steps)) for _ in range(n)]
    code, snap = [], []
    for s in steps:
        codepane._CAPTURED.pop(t, None)
        a = time.perf_counter()
        codepane.code_at(t, s)
        code.append(time.perf_counter() - a)
        t.snapshots._lru.clear()
        t.snapshots._last_miss = None
        a = time.perf_counter()
        t.snapshots[s]
        snap.append(time.perf_counter() - a)
    q, r = statistics.quantiles(code, n=20), statistics.quantiles(snap, n=20)
    return dict(code_p50=statistics.median(code), code_p95=q[18], snap_p50=statistics.median(snap), snap_p95=r[18])


def export_pair(run, repeat: int) -> tuple[float, float]:
    from simcache import codepane, export

    real = export.codepane_html
    on, off = [], []
    for i in range(repeat):
        for with_code in ((True, False) if i % 2 == 0 else (False, True)):  # alternate which goes first
            codepane._CAPTURED.pop(run.trace, None)
            run.trace.snapshots._lru.clear()
            export.codepane_html = real if with_code else (lambda *a, **k: "")
            export.code_frames = codepane.code_frames if with_code else (lambda *a, **k: {})
            a = time.perf_counter()
            export.page_data(run, progress=False)
            (on if with_code else off).append(time.perf_counter() - a)
    export.codepane_html, export.code_frames = real, codepane.code_frames
    return statistics.median(on), statistics.median(off)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--seeks", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from simcache.scenario import load
    from simcache.simulate import simulate

    with tempfile.TemporaryDirectory() as folder:
        run = simulate(load(write_doc(doc_for(a.requests), folder, "ops.json")), PRESET)
    s = seek(run, a.seeks)
    on, off = export_pair(run, a.repeat)
    print(f"workload: {a.requests} requests, {len(run.trace.ops)} ops, {len(run.trace.steps)} micro-steps")
    print(f"code frames of a random micro-step: p50 {s['code_p50'] * 1e3:.1f} ms, p95 {s['code_p95'] * 1e3:.1f} ms "
          f"(its snapshot rebuild: p50 {s['snap_p50'] * 1e3:.1f} ms, p95 {s['snap_p95'] * 1e3:.1f} ms)")
    print(f"export page data: with the code pane {on:.2f} s, without {off:.2f} s = {on / off:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
