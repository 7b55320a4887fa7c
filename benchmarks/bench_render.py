"""Rendering cost: milliseconds per frame for trees of 10, 100 and 1,000 nodes against the floor of running
``dot`` alone on the same DOT text (ratio, same run), and the player's step latency with cached renders.

    .venv/bin/python benchmarks/bench_render.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from simcache.cache import HiMambaRadixCache  # noqa: E402
from simcache.config import CacheConfig  # noqa: E402
from simcache.driver import Driver  # noqa: E402
from simcache.render.dot import snapshot_to_dot  # noqa: E402
from simcache.render.svg import SVG_CACHE, render_svg  # noqa: E402
from simcache.snapshot import take  # noqa: E402


def tree_of(n_nodes: int):
    """A cache whose tree has about ``n_nodes`` nodes: groups of requests sharing a prefix (splits)."""
    cache = HiMambaRadixCache(CacheConfig(device_kv=8 * n_nodes + 64, device_mamba=n_nodes + 8, host_kv=8,
                                          host_mamba=8, device="cpu"))
    drv = Driver(cache)
    i = 0
    while len(cache.full_lru_list) < n_nodes:
        g = i // 3
        drv.finish(drv.start([10_000 + g, 20_000 + g, 30_000 + i]))
        i += 1
    return take(cache)


def best(fn, repeat=5) -> float:
    out = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def main() -> int:
    print("| nodes | snapshot -> DOT | DOT -> SVG (simcache, uncached) | `dot -Tsvg` alone | frame / dot-alone |"
          "\n|---|---|---|---|---|")
    for n in (10, 100, 1000):
        snap = tree_of(n)
        t_dot = best(lambda snap=snap: snapshot_to_dot(snap))
        src = snapshot_to_dot(snap)

        def uncached(src=src):
            SVG_CACHE.data.clear()
            render_svg(src)

        rep = 3 if n < 1000 else 1
        t_svg = best(uncached, rep)
        t_alone = best(lambda src=src: subprocess.run(["dot", "-Tsvg"], input=src.encode(), capture_output=True,
                                                      check=True), rep)
        print(f"| {len(snap.order)} | {t_dot * 1e3:.1f} ms | {t_svg * 1e3:.1f} ms | {t_alone * 1e3:.1f} ms | "
              f"{(t_dot + t_svg) / t_alone:.2f} |")
    from simcache.player import PlayerModel
    from simcache.simulate import simulate

    run = simulate("scenario_c", "pre_fix")
    t0 = time.perf_counter()
    model = PlayerModel(run)
    model.precompute()
    t_pre = time.perf_counter() - t0
    times = []
    for _ in range(model.num_steps - 1):
        t = time.perf_counter()
        model.step(1)
        model.svg()
        times.append(time.perf_counter() - t)
    times.sort()
    print(f"\nplayer on scenario_c ({model.num_steps} micro-steps): precompute {t_pre * 1e3:.0f} ms; "
          f"step median {times[len(times) // 2] * 1e3:.2f} ms, max {times[-1] * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
