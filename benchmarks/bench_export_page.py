"""The exported page of a long run, A against B in one alternating run: open time and step times in Chromium.

    .venv/bin/python benchmarks/bench_export_page.py --build PAGE.html [--requests 2000]
    .venv/bin/python benchmarks/bench_export_page.py A.html B.html [--repeat 5] [--pause 0]

``--build`` writes the page ``bench_trace.py`` measures (``simcache export`` of its seeded 2,000-request
write-through run) with the ``simcache`` on ``PYTHONPATH``, so a baseline is built from another checkout
(``PYTHONPATH=/that/tree python benchmarks/bench_export_page.py --build base.html``). Given pages, each round
opens each page in a fresh headless Chromium (Playwright, /usr/bin/chromium), the order alternating round by
round so machine load hits both alike, and times what ``bench_trace.py`` times: until the page says it is ready,
then the p95 of 40 "next" clicks in a row, 40 "previous" clicks and 40 random slider jumps (``--pause`` seconds
after opening first, to see steps without the browser's background compilation). Medians over rounds, and the
per-round ratio of open times (B / A).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_trace import CHROMIUM, FLAGS, PRESET, doc_for, write_doc  # noqa: E402

STEPS = """(id) => { const t = []; const b = document.getElementById(id);
    for (let i = 0; i < 40; i++) { const a = performance.now(); b.click(); t.push(performance.now() - a); }
    return t; }"""
JUMPS = """() => { const t = []; const s = document.getElementById('slider');
    const n = parseInt(s.max, 10); let x = 12345;
    for (let i = 0; i < 40; i++) { x = (x * 1103515245 + 12345) % 2147483648;
      const a = performance.now(); s.value = String(x % (n + 1)); s.oninput(); t.push(performance.now() - a); }
    return t; }"""


def build(path: str, requests: int) -> None:
    import tempfile

    from simcache.export import export_html
    from simcache.scenario import load
    from simcache.simulate import simulate

    with tempfile.TemporaryDirectory() as folder:
        run = simulate(load(write_doc(doc_for(requests), folder, "ops.json")), PRESET)
    a = time.perf_counter()
    export_html(run, path, progress=False)
    print(f"{path}: built in {time.perf_counter() - a:.1f} s, {os.path.getsize(path) / 2**20:.1f} MB")


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[18]


def measure(pw, path: str, pause: float) -> dict:
    b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
    try:
        page = b.new_page(viewport={"width": 1600, "height": 1000})
        a = time.perf_counter()
        page.goto(Path(path).resolve().as_uri())
        page.wait_for_selector("body[data-ready]", timeout=120_000)
        out = dict(open=time.perf_counter() - a)
        time.sleep(pause)
        out.update(next=p95(page.evaluate(STEPS, "btn-next")), prev=p95(page.evaluate(STEPS, "btn-prev")),
                   jump=p95(page.evaluate(JUMPS)))
        return out
    finally:
        b.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", help="exported pages to compare (the first is the baseline of the ratio)")
    ap.add_argument("--build", metavar="PAGE", help="write the 2,000-request run's page here and stop")
    ap.add_argument("--requests", type=int, default=2000, help="requests in the built run (default 2000)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds, each opening every page once (default 5)")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds between opening and stepping (default 0)")
    a = ap.parse_args()
    if a.build:
        build(a.build, a.requests)
        return 0
    if not a.pages:
        ap.error("give one or more exported pages, or --build PAGE")
    missing = [p for p in a.pages if not os.path.isfile(p)]
    if missing:
        ap.error(f"no such page: {missing[0]}; write one with --build")
    from playwright.sync_api import sync_playwright

    got: dict[str, list[dict]] = {p: [] for p in a.pages}
    with sync_playwright() as pw:
        for r in range(a.repeat):
            for p in a.pages if r % 2 == 0 else a.pages[::-1]:
                got[p].append(measure(pw, p, a.pause))
            print(f"round {r + 1}/{a.repeat}: " + ", ".join(f"{os.path.basename(p)} {got[p][-1]['open']:.2f} s"
                                                          for p in a.pages), file=sys.stderr)
    print(f"{a.repeat} alternating rounds, load average {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs\n")
    print("| page | size | opens (median) | step next / previous / random jump (p95, median) |\n|---|---|---|---|")
    for p in a.pages:
        m = {k: statistics.median(x[k] for x in got[p]) for k in ("open", "next", "prev", "jump")}
        each = ", ".join(f"{x['open']:.2f}" for x in got[p])
        print(f"| {os.path.basename(p)} | {os.path.getsize(p) / 2**20:.1f} MB | {m['open']:.2f} s [{each}] | "
              f"{m['next']:.0f} / {m['prev']:.0f} / {m['jump']:.0f} ms |")
    base = a.pages[0]
    for p in a.pages[1:]:
        ratios = [x["open"] / y["open"] for x, y in zip(got[p], got[base], strict=True)]
        print(f"\n{os.path.basename(p)} / {os.path.basename(base)} open time: median ratio "
              f"{statistics.median(ratios):.2f} [{', '.join(f'{r:.2f}' for r in ratios)}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
