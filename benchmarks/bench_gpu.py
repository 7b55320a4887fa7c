"""Backup (device -> pinned host) and load (host -> device) bandwidth through simcache's controller, against a
plain tensor copy of the same size measured in the same run (ratio). Skips with a message without CUDA.

    .venv/bin/python benchmarks/bench_gpu.py [--slots 1048576]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from simcache.controller import CacheController  # noqa: E402
from simcache.pools import Pools  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slots", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_gpu: skipped, no CUDA on this machine")
        return 0
    n = a.slots
    pools = Pools.create(n, 4, n, 4, device="cuda")
    cc = CacheController(pools, "write_through", 1)
    dev = list(range(n))
    pools.device_kv.data.copy_(torch.arange(n, device="cuda"))
    nbytes = n * pools.device_kv.data.element_size()

    def via_controller(write: bool) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(a.repeat):
            if write:
                host = cc.write(dev, node_id=1)
                ack = cc.ack_write_queue.pop()
                ack.synchronize()
                pools.host_kv.free(host)
            else:
                got = cc.load(dev, node_id=1)
                cc.ack_load_queue.pop().synchronize()
                pools.device_kv.free(got)
        return (time.perf_counter() - t) / a.repeat

    pinned = torch.empty(n, dtype=torch.int64, pin_memory=True)
    src = pools.device_kv.data

    def plain(write: bool) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(a.repeat):
            if write:
                pinned.copy_(src, non_blocking=True)
            else:
                src.copy_(pinned, non_blocking=True)
            torch.cuda.synchronize()
        return (time.perf_counter() - t) / a.repeat

    pools.device_kv.free(dev[: 0])
    print("| direction | simcache controller | plain copy | GB/s (simcache) | ratio |\n|---|---|---|---|---|")
    for write, name in ((True, "backup D->H"), (False, "load H->D")):
        if write:
            pools.device_kv.alloc(n)  # the source slots are in use, as a node's value would be
        else:
            pools.device_kv.free(list(range(n)))
            pools.host_kv.alloc(n)
        t_sim, t_plain = via_controller(write), plain(write)
        print(f"| {name} | {t_sim * 1e3:.2f} ms | {t_plain * 1e3:.2f} ms | {nbytes / t_sim / 1e9:.1f} | "
              f"{t_sim / t_plain:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
