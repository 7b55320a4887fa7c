"""GPU tier copies: simcache's copy path against a plain pinned<->device torch copy of the same size, same run.

    .venv/bin/python benchmarks/bench_gpu.py [--mib 256] [--scattered-mib 64] [--repeat 7] [--device cuda]
                                             [--requests 2000] [--rounds 3]

Backup is device -> pinned host pool, load is pinned host pool -> device, each through ``pools.copy_slots`` on the
controller's side stream and completed as an ack completes it. Every figure is the median of ``--repeat`` runs
after ``--warmup`` runs, timed by CUDA events on the copy stream from issue to completion (a staged backup's host
scatter included), with the host wall time beside it; the raw copy is timed the same way, interleaved with it.
After the runs each destination is checked slot for slot (it is cleared before every run, so a copy that did
nothing fails). Rows: consecutive slots (one block, as fresh allocations are) and scattered slots (a random
permutation: index upload, device gather, host scatter). Each slot here is one int64, so indices weigh as much as
the data; a real KV slot is kilobytes. Then the seeded realistic workload of ``benchmarks/bench_cache.py``
(``--requests``, page size 1, ``followup_fix``, tracing off) runs through ``run_ops`` on the GPU and on the CPU,
alternating: the report and every pool's contents must be identical, and the table gives both times. Exits 1 when
any check fails. Skips cleanly without CUDA.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from simcache.controller import CacheController  # noqa: E402
from simcache.gpu_check import _no_streams, pool_contents, using_streams  # noqa: E402
from simcache.ops_run import run_ops  # noqa: E402
from simcache.pools import Pools, copy_slots  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cache import workload  # noqa: E402  (the same seeded realistic workload as the CPU benchmark)


def _timed(stream, fn) -> tuple[float, float]:
    """(GPU ms between events around ``fn`` on ``stream``, host wall ms); ``fn`` issues and completes its copy."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(stream.device)
    t = time.perf_counter()
    start.record(stream)
    fn()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end), (time.perf_counter() - t) * 1e3


def _raw(stream, dst: torch.Tensor, src: torch.Tensor):
    def run() -> None:
        with torch.cuda.stream(stream):
            dst.copy_(src, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(stream)
        ev.synchronize()
    return run


def bench(a) -> tuple[list[str], bool]:
    dev = torch.device(a.device)
    n = a.mib * 2**20 // 8
    m = min(n, a.scattered_mib * 2**20 // 8)
    pools = Pools.create(n, 1, n, 1, device=dev)
    cc = CacheController(pools, "write_through", 1)
    stream, dkv, hkv = cc.stream, pools.device_kv, pools.host_kv
    pattern = (torch.arange(n, dtype=torch.int64, device=dev) * 2654435761 + 12345) % (1 << 62)
    pattern_host = pattern.cpu()
    perm = torch.randperm(m, generator=torch.Generator().manual_seed(0)).pin_memory()
    ident = torch.arange(m, dtype=torch.int64).pin_memory()
    raw_host = torch.empty(n, dtype=torch.int64, pin_memory=True)
    raw_dev = torch.empty(n, dtype=torch.int64, device=dev)

    cases = {  # name: (bytes, prepare (untimed), simcache copy, raw copy of the same size, check)
        "backup D->H, consecutive": (
            n * 8, lambda: (dkv.data.copy_(pattern), hkv.data.zero_()),
            lambda: copy_slots(dkv, range(n), hkv, range(n), stream).complete(),
            _raw(stream, raw_host, raw_dev), lambda: torch.equal(hkv.data, pattern_host)),
        "load H->D, consecutive": (
            n * 8, lambda: (hkv.data.copy_(pattern_host), dkv.data.zero_()),
            lambda: copy_slots(hkv, range(n), dkv, range(n), stream).complete(),
            _raw(stream, raw_dev, raw_host), lambda: torch.equal(dkv.data, pattern)),
        "backup D->H, scattered": (
            m * 8, lambda: (dkv.data.copy_(pattern), hkv.data.zero_()),
            lambda: copy_slots(dkv, perm, hkv, ident, stream).complete(),
            _raw(stream, raw_host[:m], raw_dev[:m]), lambda: torch.equal(hkv.data[:m], pattern_host[perm])),
        "load H->D, scattered": (
            m * 8, lambda: (hkv.data.copy_(pattern_host), dkv.data.zero_()),
            lambda: copy_slots(hkv, perm, dkv, ident, stream).complete(),
            _raw(stream, raw_dev[:m], raw_host[:m]), lambda: torch.equal(dkv.data[:m], pattern[perm.to(dev)])),
    }
    rows = ["| copy | size | simcache (GPU / wall ms) | GB/s | plain torch copy (GPU ms) | GB/s | bandwidth ratio "
            "| contents |", "|---|---|---|---|---|---|---|---|"]
    ok = True
    for name, (nbytes, prepare, sim, raw, check) in cases.items():
        sim_ms, wall_ms, raw_ms = [], [], []
        for i in range(a.warmup + a.repeat):
            prepare()
            g, w = _timed(stream, sim)
            g_raw, _ = _timed(stream, raw)
            if i >= a.warmup:
                sim_ms.append(g)
                wall_ms.append(w)
                raw_ms.append(g_raw)
        good = bool(check())
        ok &= good
        s, r = statistics.median(sim_ms), statistics.median(raw_ms)
        rows.append(f"| {name} | {nbytes / 2**20:.0f} MiB | {s:.2f} / {statistics.median(wall_ms):.2f} | "
                    f"{nbytes / s / 1e6:.1f} | {r:.2f} | {nbytes / r / 1e6:.1f} | {r / s:.2f}x | "
                    f"{'identical' if good else 'WRONG'} |")
    return rows, ok


def _plain(doc: dict, preset: str, device: str) -> tuple[dict, float]:
    """(the report with every pool's contents, wall seconds) of ``run_ops`` on ``device``, tracing off."""
    t = time.perf_counter()
    r = run_ops(doc, preset, device=device)
    if device != "cpu":
        torch.cuda.synchronize(torch.device(device))
    seconds = time.perf_counter() - t
    return {**{k: v for k, v in r.items() if not k.startswith("_")}, "contents": pool_contents(r["_cache"])}, seconds


def workload_rows(a) -> tuple[list[str], bool]:
    """The realistic workload (benchmarks/bench_cache.py's, page size 1) through ``run_ops`` on the GPU and on the
    CPU, alternating, median of ``--rounds``: the same report and pool contents, and the time each took."""
    doc = workload(a.requests, a.seed)
    n_ops = len(doc["ops"])
    cpu_s, gpu_s, same = [], [], True
    for i in range(a.rounds):
        with using_streams(_no_streams):
            want, s = _plain(doc, "followup_fix", "cpu")
        cpu_s.append(s)
        got, s = _plain(doc, "followup_fix", a.device)
        gpu_s.append(s)
        same &= got == want
        print(f"  round {i + 1}: cpu {cpu_s[-1]:.2f} s, {a.device} {gpu_s[-1]:.2f} s, "
              f"{'identical' if got == want else 'DIFFERENT'}", flush=True)
    c, g = statistics.median(cpu_s), statistics.median(gpu_s)
    return ["| workload | ops | CPU pools (s) | GPU pools (s) | GPU / CPU throughput | report and pool contents |",
            "|---|---|---|---|---|---|",
            f"| {a.requests:,} requests, followup_fix, page size 1 | {n_ops:,} | {c:.2f} | {g:.2f} | {c / g:.2f}x | "
            f"{'identical' if same else 'DIFFERENT'} |"], same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="size of the consecutive copies (default 256 MiB)")
    ap.add_argument("--scattered-mib", type=int, default=64, help="size of the scattered copies (default 64 MiB)")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per figure; the median is shown")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs first")
    ap.add_argument("--device", default="cuda", help="the GPU (cuda or cuda:N)")
    ap.add_argument("--requests", type=int, default=2000,
                    help="requests in the realistic workload run on the GPU and the CPU (default 2000; 0 skips it)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating workload runs per side; the median is shown")
    ap.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    a = ap.parse_args(argv)
    if min(a.mib, a.scattered_mib, a.repeat, a.rounds) < 1 or min(a.warmup, a.requests) < 0:
        print("bench_gpu: --mib, --scattered-mib, --repeat and --rounds must be at least 1, --warmup and "
              "--requests at least 0", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench_gpu: skipped, no CUDA on this machine")
        return 0
    print(f"bench_gpu: {torch.cuda.get_device_name(torch.device(a.device))}, torch {torch.__version__}, "
          f"median of {a.repeat} after {a.warmup} warm-up runs")
    rows, ok = bench(a)
    print("\n".join(rows), flush=True)
    if a.requests:
        print(f"\nthe realistic workload, {a.requests:,} requests, on {a.device} and on the CPU:", flush=True)
        rows, same = workload_rows(a)
        print("\n".join(rows))
        ok &= same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
