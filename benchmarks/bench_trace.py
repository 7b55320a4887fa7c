"""Traces that scale (#12, #41): `simcache run --json` across the benchmark matrix; seeking and the HTML export.

    .venv/bin/python benchmarks/bench_trace.py [--quick] [--rounds 3]
    .venv/bin/python benchmarks/bench_trace.py --classic [--requests 2000] [--scale 10] [--no-browser]

The matrix (``benchmarks/matrix.py``: prompts of about 50, 300 and 2,000 tokens, page sizes 1 and 16, the three
write policies): per cell, ``simcache run FILE --json`` in-process against the same operations replayed with
tracing off (``ops_run.execute`` without a recorder), alternating, medians; and the run's peak resident memory in a
fresh process (``VmHWM``). The worst cell (time ratio, then memory) is the headline; the whole matrix follows and
is written to ``build/bench_trace.md``. Each cell's ratio is of the medians; the ratio of each side's fastest run
beside it is what a loaded machine disturbs least (another process only ever slows a run down). ``--quick``: fewer
requests per cell.

``--classic``: the older single-workload rows below, on ``bench_cache.workload``.

The workload is ``bench_cache.workload`` (seeded: multi-turn chats over shared system prompts, write-through,
device evictions every 50 requests, a host tier small enough that host eviction and load-back happen regularly).
Every figure is measured in this one run; the baseline of each ratio is the same operations replayed with tracing
off (``ops_run.execute`` without a recorder), interleaved with the traced runs so machine load hits both alike.

- ``run``: ``python -m simcache run FILE --json`` in-process (events, holders, went-stale / cleaned-up, invariants
  at operation boundaries; no snapshots), and its peak resident memory in a fresh process (``VmHWM``, not
  ``ru_maxrss``, which also counts this benchmark's own size at the fork; the interpreter with torch imported is
  part of it and is printed separately).
- ``scale``: the same at ``--scale`` times the requests: time and memory ratios.
- ``seek``: ``trace.snapshots[i]`` for random micro-steps with no rebuilt snapshot cached (state rebuild only),
  then building the frame's DOT (rendering measured separately).
- ``export``: ``simcache export`` of the run: size, and in headless Chromium (Playwright, /usr/bin/chromium) the
  time until the page is ready and the time a step (and a random jump) takes.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_cache import workload  # noqa: E402

from simcache.ops_run import check_doc, execute  # noqa: E402
from simcache.versions import preset as preset_flags  # noqa: E402

PRESET = "followup_fix"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

MEASURE = r"""
import io, json, resource, sys, time, contextlib
sys.path.insert(0, {root!r})


def peak():
    # this process's own high-water mark (VmHWM): ru_maxrss also counts the parent's size at the fork (Linux keeps
    # it across exec), so a benchmark that has grown reads its own size in every child
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


import torch, simcache.cli  # the interpreter's own footprint, before the run
base = peak()
with contextlib.redirect_stdout(io.StringIO()):
    rc = simcache.cli.main(["run", {path!r}, "--preset", {preset!r}, "--json"])
print(json.dumps(dict(rc=rc, base_mb=base, peak_mb=peak())))
"""


def doc_for(requests: int, seed: int = 0) -> dict:
    doc = workload(requests, seed=seed, device_kv=1024, host_kv=1024)
    doc["config"]["policy"] = "write_through"
    return doc


def write_doc(doc: dict, folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


CLOCK = [time.perf_counter]  # ``--clock cpu``: this process's CPU time (a loaded machine's wall time is noise)


def time_off(doc: dict) -> float:
    cfg, ops = check_doc(doc)
    clock = CLOCK[0]
    t = clock()
    execute(cfg, [(None, op) for op in ops], preset_flags(PRESET))
    return clock() - t


def time_run(path: str) -> float:
    import contextlib
    import io

    from simcache.cli import main

    clock = CLOCK[0]
    t = clock()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["run", path, "--preset", PRESET, "--json"])
    assert rc == 0, rc
    return clock() - t


def peak_memory(path: str) -> dict:
    code = MEASURE.format(root=ROOT, path=path, preset=PRESET)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def pair(doc: dict, path: str, repeat: int) -> tuple[float, float]:
    """(tracing off, `simcache run --json`) seconds, best of ``repeat`` alternating runs."""
    off, run = [], []
    for _ in range(repeat):
        off.append(time_off(doc))
        run.append(time_run(path))
    return min(off), min(run)


def activity(run) -> dict:
    t = run.trace
    kinds = {}
    for s in t.steps:
        kinds[s.kind] = kinds.get(s.kind, 0) + 1
    calls = {}
    for s in t.steps:
        if s.kind == "call":
            f = s.detail.get("function")
            calls[f] = calls.get(f, 0) + 1
    return dict(ops=len(t.ops), steps=len(t.steps), detaches=kinds.get("detach", 0),
                device_evictions=calls.get("evict", 0), host_evictions=calls.get("evict_host", 0),
                load_backs=calls.get("load_back", 0) + kinds.get("load_ack", 0), tree=len(run.result["tree"]),
                checkpoints=len(t.checkpoints), outcome=run.outcome)


def seek_figures(run, n: int, seed: int = 1) -> dict:
    from simcache.render.frames import tree_dot
    from simcache.render.svg import render_svg

    t = run.trace
    rng = random.Random(seed)
    steps = [rng.randrange(len(t.steps)) for _ in range(n)]
    rebuild, dot = [], []
    for s in steps:
        t.snapshots._lru.clear()
        t.snapshots._last_miss = None
        a = time.perf_counter()
        t.snapshots[s]
        rebuild.append(time.perf_counter() - a)
        a = time.perf_counter()
        tree_dot(run, s)
        dot.append(time.perf_counter() - a)
    a = time.perf_counter()
    for s in steps[:10]:
        render_svg(tree_dot(run, s) + " ")  # uncached: one dot process per frame
    svg = (time.perf_counter() - a) / 10
    q = statistics.quantiles(rebuild, n=20)
    return dict(p50=statistics.median(rebuild), p95=q[18], max=max(rebuild), dot_p50=statistics.median(dot),
                svg_mean=svg)


def export_figures(run, folder: str, browser: bool) -> dict:
    from simcache.export import export_html

    path = os.path.join(folder, "run.html")
    a = time.perf_counter()
    export_html(run, path)
    out = dict(build_s=time.perf_counter() - a, size_mb=os.path.getsize(path) / 2**20)
    if not browser or not os.path.exists(CHROMIUM):
        return out
    from pathlib import Path

    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = b.new_page(viewport={"width": 1600, "height": 1000})
        a = time.perf_counter()
        page.goto(Path(path).as_uri())
        page.wait_for_selector("body[data-ready]", timeout=120_000)
        out["open_s"] = time.perf_counter() - a
        step = page.evaluate("""() => { const t = []; const b = document.getElementById('btn-next');
            for (let i = 0; i < 40; i++) { const a = performance.now(); b.click(); t.push(performance.now() - a); }
            return t; }""")
        paced = page.evaluate("""async () => { const t = []; const b = document.getElementById('btn-next');
            for (let i = 0; i < 30; i++) { await new Promise(r => setTimeout(r, 600));
              const a = performance.now(); b.click(); t.push(performance.now() - a); }
            return t; }""")
        jump = page.evaluate("""() => { const t = []; const s = document.getElementById('slider');
            const n = parseInt(s.max, 10); let x = 12345;
            for (let i = 0; i < 40; i++) { x = (x * 1103515245 + 12345) % 2147483648;
              const a = performance.now(); s.value = String(x % (n + 1)); s.oninput();
              t.push(performance.now() - a); }
            return t; }""")
        b.close()
    out["step_p95_ms"] = statistics.quantiles(step, n=20)[18]
    out["paced_p95_ms"] = statistics.quantiles(paced, n=20)[18]
    out["jump_p95_ms"] = statistics.quantiles(jump, n=20)[18]
    return out


def matrix(a) -> int:
    from matrix import cells, prompt_stats
    from matrix import workload as cell_workload

    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for mean, requests, ps, policy in cells(a.quick, tuple(int(x) for x in a.means.split(",")),
                                                tuple(int(x) for x in a.page_sizes.split(",")),
                                                tuple(a.policies.split(","))):
            doc = cell_workload(mean, requests, ps, policy)
            path = write_doc(doc, folder, "cell.json")
            offs, runs = [], []
            for _ in range(a.rounds):
                offs.append(time_off(doc))
                runs.append(time_run(path))
            off, run = statistics.median(offs), statistics.median(runs)
            mem = peak_memory(path)
            avg, longest = prompt_stats(doc)
            rows.append(dict(mean=mean, ps=ps, policy=policy, ops=len(doc["ops"]), avg=avg, longest=longest,
                             off=off, run=run, ratio=run / off, fast=min(runs) / min(offs), peak=mem["peak_mb"],
                             base=mem["base_mb"]))
            print(f"[cell] {mean:>5} tokens, page {ps:>2}, {policy}: {run / off:.1f}x (fastest runs "
                  f"{min(runs) / min(offs):.1f}x), {mem['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    w = max(rows, key=lambda r: r["ratio"])
    f = max(rows, key=lambda r: r["fast"])
    m = max(rows, key=lambda r: r["peak"])
    head = (f"**Worst cell: `run --json` {w['ratio']:.1f}× tracing off** (prompts of {w['avg']:,.0f} tokens on "
            f"average, page size {w['ps']}, {w['policy']}: {w['off']:.3f} s → {w['run']:.3f} s; budget ≤ 5×); "
            f"by each side's fastest run, the worst cell is {f['fast']:.1f}× (prompts of {f['avg']:,.0f} tokens, "
            f"page size {f['ps']}, {f['policy']}). "
            f"**Highest peak: {m['peak']:.0f} MB** (prompts of {m['avg']:,.0f} tokens, page size {m['ps']}, "
            f"{m['policy']}; the interpreter with torch alone: {m['base']:.0f} MB; budget ≤ 400 MB).")
    lines = [f"## `simcache run --json` across the matrix ({PRESET}){' (quick)' if a.quick else ''}\n", head + "\n",
             f"Command: `.venv/bin/python benchmarks/bench_trace.py{' --quick' if a.quick else ''}"
             f"{' --clock cpu' if a.clock == 'cpu' else ''}`; {'CPU' if a.clock == 'cpu' else 'wall'} time; load "
             f"average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end ({os.cpu_count()} CPUs); medians of "
             f"{a.rounds} alternating rounds.\n",
             "| prompt tokens (mean / longest) | page size | write policy | ops | tracing off | `run --json` | "
             "ratio | ratio of the fastest runs | peak memory |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['avg']:,.0f} / {r['longest']:,} | {r['ps']} | {r['policy']} | {r['ops']:,} | "
                     f"{r['off']:.3f} s | {r['run']:.3f} s | **{r['ratio']:.1f}×** | {r['fast']:.1f}× | "
                     f"{r['peak']:.0f} MB |")
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--scale", type=int, default=10, help="the larger run has this many times the requests")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seeks", type=int, default=200)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--quick", action="store_true", help="the matrix with fewer requests per cell")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per matrix cell; medians (default 3)")
    ap.add_argument("--means", default="50,300,2000", help="prompt lengths of the matrix (default 50,300,2000)")
    ap.add_argument("--page-sizes", default="1,16", help="page sizes of the matrix (default 1,16)")
    ap.add_argument("--policies", default="write_through,write_through_selective,write_back",
                    help="write policies of the matrix (default: all three)")
    ap.add_argument("--out", default=os.path.join("build", "bench_trace.md"), help="the markdown written")
    ap.add_argument("--classic", action="store_true", help="the single-workload rows (scale, seek, export) instead")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time the matrix's sides by wall time (default) or by this process's CPU time")
    a = ap.parse_args()
    if a.clock == "cpu":
        CLOCK[0] = time.process_time
    if not a.classic:
        return matrix(a)
    from simcache.scenario import load
    from simcache.simulate import simulate

    with tempfile.TemporaryDirectory() as folder:
        doc = doc_for(a.requests)
        path = write_doc(doc, folder, "ops.json")
        # each pair runs with only its own document alive: a 10x document held meanwhile is a heap every garbage
        # collection rescans, which a user's `simcache run` does not have (it slowed the traced side most)
        off, run_s = pair(doc, path, a.repeat)
        mem = peak_memory(path)
        big = doc_for(a.requests * a.scale)
        big_path = write_doc(big, folder, "ops_big.json")
        big_off, big_run = pair(big, big_path, 1)
        big_mem = peak_memory(big_path)
        full = simulate(load(path), PRESET)  # the player's and the export's run: snapshots on demand
        act = activity(full)
        seek = seek_figures(full, a.seeks)
        exp = export_figures(full, folder, not a.no_browser)

    n = a.requests
    rows = [
        ("workload", f"{n} requests, {act['ops']} ops, {act['steps']} micro-steps, final tree {act['tree']} "
                     f"nodes; {act['device_evictions']} device evictions, {act['host_evictions']} host evictions, "
                     f"{act['load_backs']} load-backs, {act['detaches']} detaches; {act['checkpoints']} "
                     f"checkpoints", ""),
        ("tracing-off replay", f"{off:.2f} s", ""),
        ("`simcache run --json` (full trace, holders, went-stale, invariants)",
         f"{run_s:.2f} s = {run_s / off:.1f}x", "<= 5x"),
        ("  peak memory (fresh process)",
         f"{mem['peak_mb']:.0f} MB (interpreter + torch alone: {mem['base_mb']:.0f} MB)", "<= 400 MB"),
        (f"{a.scale}x the requests ({len(big['ops'])} ops): tracing off / run",
         f"{big_off:.2f} s / {big_run:.2f} s = {big_run / big_off:.1f}x", ""),
        (f"  time of run, {a.scale}x vs 1x", f"{big_run / run_s:.1f}x", f"<= {int(1.2 * a.scale)}x"),
        (f"  peak memory, {a.scale}x vs 1x",
         f"{big_mem['peak_mb']:.0f} MB = {big_mem['peak_mb'] / mem['peak_mb']:.1f}x (above the interpreter: "
         f"{(big_mem['peak_mb'] - big_mem['base_mb']) / max(1, mem['peak_mb'] - mem['base_mb']):.1f}x)",
         f"<= {int(1.2 * a.scale)}x"),
        ("seek to a random micro-step (state rebuild)",
         f"p50 {1000 * seek['p50']:.0f} ms, p95 {1000 * seek['p95']:.0f} ms, max {1000 * seek['max']:.0f} ms",
         "p95 <= 50 ms"),
        ("  + the frame's DOT / its SVG by dot", f"{1000 * seek['dot_p50']:.0f} ms / {1000 * seek['svg_mean']:.0f} ms",
         ""),
        ("export: build, size", f"{exp['build_s']:.1f} s, {exp['size_mb']:.1f} MB", "<= 30 MB"),
    ]
    if "open_s" in exp:
        rows += [("  opens in headless Chromium", f"{exp['open_s']:.2f} s", "<= 3 s"),
                 ("  a step at reading pace (0.6 s apart; the next frames are drawn ahead) (p95)",
                  f"{exp['paced_p95_ms']:.0f} ms", "<= 50 ms"),
                 ("  a step with nothing drawn ahead (40 clicks in a row) / a random jump (p95)",
                  f"{exp['step_p95_ms']:.0f} ms / {exp['jump_p95_ms']:.0f} ms", "<= 50 ms")]
    print(f"traces that scale ({os.cpu_count()} CPUs; ratios from this one run)\n")
    print("| what | measured | target |\n|---|---|---|")
    for what, got, target in rows:
        print(f"| {what} | {got} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
