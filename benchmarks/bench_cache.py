"""Cache operations per second across prompt lengths, page sizes and write policies, against SGLang's real code.

    .venv/bin/python benchmarks/bench_cache.py [--quick] [--rounds 3] [--oracle DIR] [--vendor DIR]

The matrix (``benchmarks/matrix.py``): prompts of about 50, 300 and 2,000 tokens (means, log-normal tails), page
sizes 1 and 16, and the three write policies; one seeded multi-turn chat workload per cell. For each cell:
- SGLang's real code as a *bare loop*: the oracle's real cache built over its fake pools and controller
  (``shared/tools/sglang_oracle``), driven by the oracle's own driver, with only the op loop inside the timer. None
  of the oracle's per-op instrumentation runs (stale-reference scans, status letters, JSON state). The oracle is
  imported at run time from ``--oracle`` and its SGLang files from ``--vendor`` / ``$SGLANG_ORACLE_VENDOR``; when
  either is missing the comparison is skipped with the reason. Nothing from SGLang is part of simcache.
- simcache's public replay entry point ``run_ops(doc, preset)`` as a whole, tracing off: validation, the loop and
  the result (tree, slots, counters, accounting, free lists).
The end states (canonical tree, tree slots, every pool's free list) are asserted identical before any timing; the
two sides then alternate (real, simcache, real, simcache, ...) and each figure is a median. The worst cell is the
headline; the whole matrix follows, and is written to ``build/bench_cache.md``. ``--quick``: a quarter of the
requests per cell (for iteration). ``--classic`` adds the older single-workload rows (the ``Driver.apply`` loop,
tracing overhead, scale).
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from simcache.cache import HiMambaRadixCache  # noqa: E402
from simcache.driver import Driver, Skip  # noqa: E402
from simcache.ops_run import build_config, check_doc, run_ops  # noqa: E402
from simcache.state import tree_lines, tree_slot_lines  # noqa: E402
from simcache.trace import Recorder  # noqa: E402
from simcache.versions import preset as preset_flags  # noqa: E402

PRESET = "followup_fix"
# the timer of the compared sides: wall time (the default), or this process's CPU time (``--clock cpu``: on a
# machine shared with other work, the time the run itself used; both sides run in this one process)
CLOCK = [time.perf_counter]


def workload(n_requests: int, seed: int = 0, device_kv: int = 1024, host_kv: int = 2048, page_size: int = 1,
             policy: str = "write_through_selective") -> dict:
    """Multi-turn chats over a few shared system prompts, random lengths; regular controller acks and device
    evictions; L3 storage off."""
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
    cfg = dict(policy=policy, storage=False, page_size=page_size, device_kv=device_kv, device_mamba=256,
               host_kv=host_kv, host_mamba=512, load_back_threshold=10)
    return {"config": cfg, "ops": ops}


# --- simcache, timed the same way as the real code ---
def sim_loop(doc: dict, preset: str = PRESET):
    """(seconds of the bare ``Driver.apply`` loop, cache)."""
    cfg, ops = check_doc(doc)
    cache = HiMambaRadixCache(build_config(cfg, preset_flags(preset)))
    drv = Driver(cache, retry_mamba_alloc=cfg["driver"] == "scheduler")
    apply = drv.apply
    t = CLOCK[0]()
    for i, op in enumerate(ops):
        try:
            apply(op, i)
        except Skip:
            pass
    return CLOCK[0]() - t, cache


def sim_state(cache) -> dict:
    return dict(tree=tree_lines(cache), tree_slots=tree_slot_lines(cache),
                free={n: list(p.free_slots) for n, p in cache.pools.all().items()})


def sim_run_ops(doc: dict, preset: str = PRESET, clock=None):
    clock = clock or CLOCK[0]
    t = clock()
    res = run_ops(doc, preset)
    return clock() - t, res


# --- SGLang's real code (the oracle's cache and fakes, no per-op instrumentation) ---
class RealCode:
    """SGLang's real HiMambaRadixCache over the oracle's fakes, driven by the oracle's driver in a bare loop."""

    def __init__(self, oracle, mods) -> None:
        self.oracle, self.mods = oracle, mods

    @classmethod
    def load(cls, oracle_dir: str, vendor: str | None, preset: str = PRESET):
        """(RealCode, None), or (None, the reason it cannot run here)."""
        if not os.path.isfile(os.path.join(oracle_dir, "oracle.py")):
            return None, f"the oracle is not at {os.path.abspath(oracle_dir)} (give --oracle DIR)"
        vendor = vendor or os.environ.get("SGLANG_ORACLE_VENDOR") or os.path.join(oracle_dir, "vendor")
        if not os.path.isfile(os.path.join(vendor, preset, "hi_mamba_radix_cache.py")):
            return None, (f"SGLang's files for {preset} are not in {os.path.abspath(vendor)} (see the oracle's "
                          f"README; give --vendor DIR or set SGLANG_ORACLE_VENDOR)")
        sys.path.insert(0, os.path.abspath(oracle_dir))
        try:
            import oracle  # type: ignore

            logging.disable(logging.CRITICAL)
            mods, _ = oracle.load(preset, vendor)
        except (Exception, SystemExit) as e:  # noqa: BLE001
            return None, f"the oracle could not load ({e})"
        return cls(oracle, mods), None

    def loop(self, doc: dict, clock=None):
        """(seconds of the bare op loop, env)."""
        clock = clock or CLOCK[0]
        o = self.oracle
        cfg, ops = o.check_doc(doc)
        env = o.Env(self.mods, cfg, max_ctx=max([len(op.get("tokens", ())) for op in ops] + [8]))
        drv = o.Driver(env)
        apply, skip = drv.apply, o.Skip
        t = clock()
        for i, op in enumerate(ops):
            try:
                apply(op, i)
            except skip:
                pass
        return clock() - t, env

    @staticmethod
    def state(env) -> dict:
        tree, slots = env.canonical_tree()
        return dict(tree=tree, tree_slots=slots, free={p: [int(x) for x in pool.free_slots]
                                                       for p, pool in env.pools().items()})


def default_oracle() -> str:
    """``shared/tools/sglang_oracle`` next to the repository (``../shared``), or next to a folder above it."""
    d = os.path.dirname(HERE)
    for _ in range(3):
        d = os.path.dirname(d)
        cand = os.path.join(d, "shared", "tools", "sglang_oracle")
        if os.path.isdir(cand):
            return cand
    return os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "tools", "sglang_oracle")


def alternate(sides: dict, rounds: int) -> dict:
    """Run each side once per round, in turn (A B C A B C ..): {name: median seconds}."""
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            times[name].append(fn()[0])
    return {k: statistics.median(v) for k, v in times.items()}


def speed_rows(a, real: RealCode | None, why: str | None) -> list[str]:
    rows = []
    for ps in (1, 16):
        doc = workload(a.requests, a.seed, page_size=ps)
        n = len(doc["ops"])
        _, cache = sim_loop(doc)
        res = run_ops(doc, PRESET)
        mine = sim_state(cache)
        assert mine == dict(tree=res["tree"], tree_slots=res["tree_slots"], free=res["free"]), "run_ops != loop"
        sides = {"loop": lambda d=doc: sim_loop(d), "run_ops": lambda d=doc: sim_run_ops(d)}
        same = "not compared"
        if real is not None:
            _, env = real.loop(doc)
            theirs = real.state(env)
            if theirs != mine:
                bad = [k for k in mine if mine[k] != theirs[k]]
                raise SystemExit(f"page size {ps}: simcache's end state differs from the real code's in {bad}")
            same = "identical"
            sides = {"real": lambda d=doc: real.loop(d), **sides}
        med = alternate(sides, a.rounds)
        head = f"| {ps} | {n:,} | {res['outcome']}, {len(res['tree'])} nodes, end states {same} |"
        if real is None:
            rows.append(f"{head} skipped: {why} | {med['loop']:.3f} s | {med['run_ops']:.3f} s | - |")
        else:
            r = med["real"]
            loop, ro = med["loop"], med["run_ops"]
            rows.append(f"{head} {r:.3f} s ({n / r:,.0f} ops/s) | {loop:.3f} s ({n / loop:,.0f} ops/s) | "
                        f"{ro:.3f} s ({n / ro:,.0f} ops/s) | **{r / loop:.2f}×** (loop), "
                        f"**{r / ro:.2f}×** (`run_ops`) |")
    return rows


def matrix_rows(a, real: RealCode | None, why: str | None) -> tuple[list[dict], str]:
    """One dict per cell: its workload, both sides' medians and the ratio (simcache's throughput / the real code's)."""
    from matrix import cells, prompt_stats
    from matrix import workload as cell_workload

    rows = []
    for mean, requests, ps, policy in cells(a.quick, _ints(a.means), _ints(a.page_sizes), _names(a.policies)):
        doc = cell_workload(mean, requests, ps, policy, seed=a.seed)
        avg, longest = prompt_stats(doc)
        res = run_ops(doc, PRESET)
        row = dict(mean=mean, ps=ps, policy=policy, ops=len(doc["ops"]), avg=avg, longest=longest,
                   nodes=len(res["tree"]), outcome=res["outcome"])
        sides = {"run_ops": lambda d=doc: sim_run_ops(d)}
        if real is not None:
            _, env = real.loop(doc)
            theirs = real.state(env)
            mine = dict(tree=res["tree"], tree_slots=res["tree_slots"], free=res["free"])
            if theirs != mine:
                bad = [k for k in mine if mine[k] != theirs[k]]
                raise SystemExit(f"cell {mean} tokens, page size {ps}, {policy}: simcache's end state differs from "
                                 f"the real code's in {bad}")
            sides = {"real": lambda d=doc: real.loop(d), **sides}
        row.update(alternate(sides, a.rounds))
        if real is not None:
            row["ratio"] = row["real"] / row["run_ops"]
        rows.append(row)
        print(f"[cell] {mean:>5} tokens, page {ps:>2}, {policy}: " + (
            f"{row['ratio']:.2f}x" if real is not None else f"{row['run_ops']:.3f} s"), file=sys.stderr, flush=True)
    return rows, ("identical" if real is not None else f"not compared: {why}")


def matrix_table(rows: list[dict], same: str, rounds: int) -> str:
    lines = ["| prompt tokens (mean / longest) | page size | write policy | ops | final tree | SGLang real code, "
             "bare loop | simcache `run_ops` | simcache / real throughput |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        real = f"{r['real']:.3f} s" if "real" in r else "-"
        ratio = f"**{r['ratio']:.2f}×**" if "ratio" in r else "-"
        lines.append(f"| {r['avg']:,.0f} / {r['longest']:,} | {r['ps']} | {r['policy']} | {r['ops']:,} | "
                     f"{r['nodes']:,} nodes, {r['outcome']} | {real} | {r['run_ops']:.3f} s | {ratio} |")
    lines.append(f"\nEnd states {same}; medians of {rounds} alternating rounds.")
    return "\n".join(lines)


def headline(rows: list[dict]) -> str:
    if not any("ratio" in r for r in rows):
        return "**Worst cell**: not compared with the real code (see below)."
    w = min(rows, key=lambda r: r["ratio"])
    long_cells = [r for r in rows if r["mean"] == max(x["mean"] for x in rows)]
    lw = min(long_cells, key=lambda r: r["ratio"])
    return (f"**Worst cell: {w['ratio']:.2f}× the real code's throughput** (`run_ops`, tracing off; prompts of "
            f"{w['avg']:,.0f} tokens on average, page size {w['ps']}, {w['policy']}: {w['real']:.3f} s real vs "
            f"{w['run_ops']:.3f} s simcache). Longest prompts, worst cell: {lw['ratio']:.2f}× (page size {lw['ps']}, "
            f"{lw['policy']}); at page size 1 / 16 there: "
            + " / ".join(f"{min(r['ratio'] for r in long_cells if r['ps'] == ps):.2f}×"
                         for ps in sorted({r['ps'] for r in long_cells})) + " (worst policy each).")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(","))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a quarter of the requests per cell, for iteration")
    ap.add_argument("--means", default="50,300,2000", help="prompt lengths of the matrix (default 50,300,2000)")
    ap.add_argument("--page-sizes", default="1,16", help="page sizes of the matrix (default 1,16)")
    ap.add_argument("--policies", default="write_through,write_through_selective,write_back",
                    help="write policies of the matrix (default: all three)")
    ap.add_argument("--out", default=os.path.join("build", "bench_cache.md"), help="the markdown written")
    ap.add_argument("--classic", action="store_true", help="also the single-workload rows (loop, tracing, scale)")
    ap.add_argument("--requests", type=int, default=2000, help="requests of the classic workload (default 2000)")
    ap.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per figure; medians (default 3)")
    ap.add_argument("--oracle", default=default_oracle(),
                    help="the sglang_oracle folder (default: shared/tools/sglang_oracle beside the repository or "
                         "beside a folder above it)")
    ap.add_argument("--vendor", help="folder with SGLang's files per preset (default $SGLANG_ORACLE_VENDOR, else "
                                     "the oracle's vendor/)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time the sides by wall time (default) or by this process's CPU time")
    ap.add_argument("--skip-scale", action="store_true", help="with --classic: no scale rows")
    ap.add_argument("--only-scale", action="store_true", help="only the scale rows")
    a = ap.parse_args()
    if a.clock == "cpu":
        CLOCK[0] = time.process_time
    if a.only_scale:
        return scale(a)
    real, why = RealCode.load(a.oracle, a.vendor)
    load0 = os.getloadavg()
    rows, same = matrix_rows(a, real, why)
    load1 = os.getloadavg()
    out = [f"## simcache against SGLang's real code ({PRESET}), the matrix{' (quick)' if a.quick else ''}\n",
           headline(rows) + "\n",
           f"Command: `.venv/bin/python benchmarks/bench_cache.py{' --quick' if a.quick else ''}"
           f"{' --clock cpu' if a.clock == 'cpu' else ''}`; {'CPU' if a.clock == 'cpu' else 'wall'} time; load "
           f"average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end ({os.cpu_count()} CPUs).\n",
           matrix_table(rows, same, a.rounds)]
    text = "\n".join(out)
    print(text)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text + "\n")
    if not a.classic:
        return 0
    return classic(a, real, why)


def classic(a, real: RealCode | None, why: str | None) -> int:
    print(f"\n## The classic workload: {a.requests:,} requests, write-through-selective, prompts <= 240 tokens, "
          f"tracing off; medians of {a.rounds} alternating rounds\n")
    print("| page size | ops | result | SGLang real code, bare loop | simcache `Driver.apply` loop | simcache "
          "`run_ops` | simcache / real throughput |\n|---|---|---|---|---|---|---|")
    print("\n".join(speed_rows(a, real, why)))
    if a.skip_scale:
        return 0
    small = workload(max(200, a.requests // 10), a.seed)
    tiny = workload(30, a.seed, device_kv=128, host_kv=256)  # teaching size: the player's and notebooks' scale
    med = alternate({"off": lambda: sim_run_ops(small),
                     "trace": lambda: _timed(lambda: run_ops(small, PRESET, recorder=Recorder(snapshots=False,
                                                                                           invariants=False)))},
                    a.rounds)
    med_t = alternate({"off": lambda: sim_run_ops(tiny),
                       "full": lambda: _timed(lambda: run_ops(tiny, PRESET, recorder=Recorder(snapshots=True,
                                                                                               invariants=True)))},
                      a.rounds)
    print("\n## Tracing overhead (`run_ops`)\n\n| workload | tracing off | traced | ratio |\n|---|---|---|---|")
    print(f"| {len(small['ops'])} ops, micro-step trace | {med['off']:.3f} s | {med['trace']:.3f} s | "
          f"{med['trace'] / med['off']:.1f}× |")
    print(f"| teaching size, {len(tiny['ops'])} ops, trace + snapshot every micro-step + invariants | "
          f"{med_t['off']:.4f} s | {med_t['full']:.3f} s | {med_t['full'] / med_t['off']:.0f}× |")
    return scale(a)


def scale(a) -> int:
    print("\n## Scale (`run_ops`, tracing off; pools grow with the work beyond the realistic workload's)\n")
    print("| requests | ops | CPU time | time ratio | peak MiB | memory ratio |\n|---|---|---|---|---|---|")
    base = max(100, a.requests // 4)  # warm: by then the pools are full and evictions steady
    # pools never smaller than the realistic workload's (a request must fit), growing with the work beyond that:
    # more leaves, which is what made SGLang's heap per eviction call cost more per operation
    docs = [workload(n, a.seed, device_kv=max(1024, n // 3), host_kv=max(2048, 2 * n // 3), page_size=1)
            for n in (base, base * 10, base * 100)]
    # one run each (long runs), timed in this process's CPU time: sizes cannot alternate, and on a shared machine
    # wall time over minutes mostly measures the other processes
    med = alternate({i: (lambda d=d: sim_run_ops(d, clock=time.process_time)) for i, d in enumerate(docs)}, 1)
    first_t = first_m = None
    for i, d in enumerate(docs):
        tracemalloc.start()  # memory in a separate run: tracemalloc slows Python down several times
        run_ops(d, PRESET)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        first_t, first_m = first_t or med[i], first_m or peak
        print(f"| {base * 10 ** i:,} | {len(d['ops']):,} | {med[i]:.3f} s | {med[i] / first_t:.1f}× | {peak:.1f} | "
              f"{peak / first_m:.1f}× |")
    return 0


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


if __name__ == "__main__":
    sys.exit(main())
