"""Checks of the GPU path that a device machine runs in a few minutes; the CPU suite runs the same probes emulated.

    python -m simcache.gpu_check [--programs 300] [--device cuda] [--emulated lazy|eager_default]

A *probe* drives the cache through one place where a copy between tiers races the model's work, and checks the
exact data afterwards; it returns the problems it found (none when every ordering holds). On a GPU the probes run
on real streams twice: as they are, and with the side stream delayed (``torch.cuda._sleep`` before each copy), so a
missing wait lets the model's work overtake the copy. Then every gallery scenario and a few hundred random
programs must give the same report and the same pool contents on the GPU as on the CPU. Without CUDA (and without
``--emulated``) it prints that it skipped and exits 0; it exits 1 when a check fails.

``tests/test_streams.py`` runs the probes under ``streams.EmulatedStreams`` and removes each synchronisation in
turn (see ``pool_copy.py``), which makes a probe fail: the CPU suite sees a missing synchronisation.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from . import pools as pools_module
from .cache import HiMambaRadixCache
from .config import CacheConfig
from .controller import CacheController
from .driver import Driver
from .fingerprints import kv_fingerprints, mamba_fingerprint
from .invariants import check_all
from .ops_run import run_ops
from .pool_copy import copy_slots
from .pools import Pools
from .scenario import gallery, load
from .simulate import simulate
from .streams import POLICIES, CudaStreams, EmulatedStreams
from .versions import PRESETS, preset

T = [1, 2, 3, 4]


@contextmanager
def using_streams(factory: Callable[[torch.device], object]) -> Iterator[None]:
    """Pools made inside get their stream backend from ``factory(device)`` (the emulation, a delayed GPU)."""
    old = pools_module.backend_for
    pools_module.backend_for = factory
    try:
        yield
    finally:
        pools_module.backend_for = old


def _no_streams(device: torch.device) -> None:
    return None  # the reference: plain copies, at once, in program order


class DelayedCudaStreams(CudaStreams):
    """Real CUDA streams whose side streams sleep before each piece of work: copies finish late."""

    def __init__(self, device: torch.device, cycles: int = 20_000_000) -> None:
        super().__init__(device)
        self.cycles = cycles

    def launch(self, stream, fn, *args, host_out=None) -> None:
        if stream != self.default:
            with torch.cuda.stream(stream):
                torch.cuda._sleep(self.cycles)
        super().launch(stream, fn, *args, host_out=host_out)


# --- probes: each returns a list of problems ---
def _make(device: str, scheduler: bool = False, **config) -> tuple[HiMambaRadixCache, Driver]:
    cfg = dict(device_kv=32, device_mamba=8, host_kv=32, host_mamba=8, load_back_threshold=1,
               flags=preset("followup_fix"), device=device)
    cache = HiMambaRadixCache(CacheConfig(**{**cfg, **config}))
    return cache, Driver(cache, retry_mamba_alloc=scheduler)


def _check(problems: list[str], what: str, got, want) -> None:
    if got != want:
        problems.append(f"{what}: got {got}, want {want}")


def _whole_state(problems: list[str], cache: HiMambaRadixCache, drv: Driver) -> None:
    for name, problem in check_all(cache, list(drv.live.values())).items():
        if problem:
            problems.append(f"{name}: {problem}")


def probe_backup_lands_at_ack(device: str) -> list[str]:
    """A backup (KV and Mamba) is read on the host before its ack and after it."""
    problems: list[str] = []
    cache, drv = _make(device, auto_complete=False)
    drv.start([9, 8, 7])  # a live request first, so the node's first KV slot (3) and Mamba slot (1) differ
    drv.finish(drv.start(T))
    node = cache.root_node.children[1]
    host, mamba_host = cache.pools.host_kv, cache.pools.host_mamba
    _check(problems, "host KV before the ack", host.read(node.host_value), kv_fingerprints(T))
    cache.controller.complete_writes(1)
    cache.check_hicache_events()
    _check(problems, "host KV after the ack", host.read(node.host_value), kv_fingerprints(T))
    _check(problems, "host Mamba after the ack", mamba_host.read(node.mamba_host_value), [mamba_fingerprint(T)])
    _whole_state(problems, cache, drv)
    return problems


def probe_two_backups_before_an_ack(device: str) -> list[str]:
    """Two backups into the same host pools before either ack: the staging buffer serves one at a time."""
    problems: list[str] = []
    cache, drv = _make(device, auto_complete=False)
    drv.finish(drv.start([1, 2, 3]))
    drv.finish(drv.start([4, 5, 6]))
    cache.controller.complete_writes(2)
    cache.check_hicache_events()
    for first, toks in ((1, [1, 2, 3]), (4, [4, 5, 6])):
        node = cache.root_node.children[first]
        _check(problems, f"host KV of {toks}", cache.pools.host_kv.read(node.host_value), kv_fingerprints(toks))
        _check(problems, f"host Mamba of {toks}", cache.pools.host_mamba.read(node.mamba_host_value),
               [mamba_fingerprint(toks)])
    _whole_state(problems, cache, drv)
    return problems


def _evicted_to_host(device: str, scheduler: bool = False):
    """A cache whose node ``T`` was cached, backed up (acked), then evicted from the device: (cache, driver, node)."""
    cache, drv = _make(device, scheduler=scheduler)
    drv.finish(drv.start(T))
    cache.check_hicache_events()
    cache.evict(len(T))
    return cache, drv, cache.root_node.children[1]


def probe_load_read_before_its_ack(device: str) -> list[str]:
    """A loaded node's device KV is read (the model uses it) before the load's ack is processed."""
    problems: list[str] = []
    cache, drv, node = _evicted_to_host(device)
    if node.value is not None or node.host_value is None:
        return [f"set-up: the node should be on the host only, it is {node!r}"]
    rid = drv.start(T + [5])
    _check(problems, "device KV of the loaded node", cache.pools.device_kv.read(node.value), kv_fingerprints(T))
    _check(problems, "the request's KV", cache.pools.device_kv.read(drv.live[rid].kv), kv_fingerprints(T + [5]))
    drv.finish(rid)
    cache.check_hicache_events()
    _whole_state(problems, cache, drv)
    return problems


def probe_scheduler_restore_race(device: str) -> list[str]:
    """Scheduler mode restores a node's Mamba state into the request's own slot, which the model then overwrites
    with the request's state: the model's write must land after the restore."""
    problems: list[str] = []
    cache, drv, node = _evicted_to_host(device, scheduler=True)
    if node.mamba_value is not None or node.mamba_host_value is None:
        return [f"set-up: the node's Mamba state should be on the host only, it is {node!r}"]
    rid = drv.start(T + [5])
    req = drv.live[rid]
    _check(problems, "the request's Mamba state", cache.pools.device_mamba.read([req.mamba_pool_idx]),
           [mamba_fingerprint(T + [5])])
    drv.finish(rid)
    cache.check_hicache_events()
    _whole_state(problems, cache, drv)
    return problems


def probe_freed_slot_reused_during_backup(device: str) -> list[str]:
    """A node's device KV is freed and handed out again (a stale path, a double free) while its backup reads it:
    the backup still delivers what the node held when it was issued, as the plain copy does."""
    pools = Pools.create(8, 2, 8, 2, device)
    cc = CacheController(pools, "write_through", 1, auto_complete=False)
    dev = pools.device_kv.alloc(4)
    pools.device_kv.write(dev, [11, 12, 13, 14])
    host = cc.write(dev, node_id=1)
    pools.device_kv.free(dev)
    again = pools.device_kv.alloc(8)
    pools.device_kv.write(again, [99] * 8)
    cc.complete_writes(1)
    cc.ack_write_queue.pop(0).synchronize()
    problems: list[str] = []
    _check(problems, "host KV of the backup", pools.host_kv.read(host), [11, 12, 13, 14])
    _check(problems, "device KV after the reuse", pools.device_kv.read(again), [99] * 8)
    return problems


def probe_scattered_copies(device: str) -> list[str]:
    """Slots out of order (a fragmented free list) go through the staging buffer: two backups and two loads back
    to back before their acks, the model reading other slots in between."""
    pools = Pools.create(16, 2, 16, 2, device)
    cc = CacheController(pools, "write_through", 1, auto_complete=False)
    kv = pools.device_kv
    a, b, va, vb = [7, 12, 9, 14], [4, 11, 13], [101, 102, 103, 104], [201, 202, 203]
    kv.write(a, va)
    kv.write(b, vb)
    host_a = cc.write(a, node_id=1)
    seen = kv.read([1, 3])  # the model reads other slots meanwhile
    host_b = cc.write(b, node_id=2)  # the staging buffer again, before the first ack
    problems: list[str] = []
    _check(problems, "the model's read during the backups", seen, [0, 0])
    cc.complete_writes(2)
    while cc.ack_write_queue:
        cc.ack_write_queue.pop(0).synchronize()
    _check(problems, "host KV of the first backup", pools.host_kv.read(host_a), va)
    _check(problems, "host KV of the second backup", pools.host_kv.read(host_b), vb)
    dev_b = cc.load(host_b[::-1], node_id=3)
    dev_a = cc.load(host_a[::-1], node_id=4)
    _check(problems, "device KV of the first load, before its ack", kv.read(dev_b), vb[::-1])
    _check(problems, "device KV of the second load, before its ack", kv.read(dev_a), va[::-1])
    cc.complete_loads(2)
    while cc.ack_load_queue:
        cc.ack_load_queue.pop(0).synchronize()
    _check(problems, "device KV after the load acks", kv.read(dev_b + dev_a), vb[::-1] + va[::-1])
    return problems


def probe_repeated_destination_slots(device: str, n: int = 256) -> list[str]:
    """After a double free one allocation can name a slot twice. A write, a backup and a load naming each of 8
    slots ``n / 8`` times leave every slot its last writer's value, as on the CPU (CUDA's index writes alone
    leave the winner undefined; random program 216 of the GPU check met it)."""
    pools = Pools.create(n, 2, n, 2, device)
    st = pools.streams
    side = st.new_stream() if st is not None else None
    kv, host, repeated = pools.device_kv, pools.host_kv, [i % 8 for i in range(n)]
    kv.write(list(range(n)), [5000 + i for i in range(n)])
    backup = copy_slots(kv, list(range(n)), host, repeated, side)  # host slot k <- device slot n - 8 + k
    kv.write(repeated, list(range(1, n + 1)))  # device slot k <- n - 7 + k
    load = copy_slots(host, repeated, kv, [8 + s for s in repeated], side)  # device slot 8 + k <- host slot k
    for copy in (backup, load):
        if copy is not None:
            copy.complete()
    problems: list[str] = []
    last = [n - 8 + k for k in range(8)]
    _check(problems, "host KV after a backup naming each slot repeatedly", host.read(range(8)),
           [5000 + i for i in last])
    _check(problems, "device KV after a write and a load naming each slot repeatedly", kv.read(range(16)),
           [i + 1 for i in last] + [5000 + i for i in last])
    return problems


PROBES = {f.__name__.removeprefix("probe_"): f for f in (
    probe_backup_lands_at_ack, probe_two_backups_before_an_ack, probe_load_read_before_its_ack,
    probe_scheduler_restore_race, probe_freed_slot_reused_during_backup, probe_scattered_copies,
    probe_repeated_destination_slots)}


def run_probes(device: str) -> dict[str, list[str]]:
    """Every probe on ``device`` (with whatever stream backend is in force); a probe that raises is a problem."""
    out = {}
    for name, probe in PROBES.items():
        try:
            out[name] = probe(device)
        except Exception as e:  # noqa: BLE001 -- a crash is a failed probe, reported with the others
            out[name] = [f"raised {type(e).__name__}: {e}"]
    return out


# --- equality with the CPU ---
def pool_contents(cache: HiMambaRadixCache) -> dict[str, list[int]]:
    return {name: pool.read(range(pool.size)) for name, pool in cache.pools.all().items()}


def random_program(seed: int, length: int = 60) -> dict:
    """A random oracle-format program under small pools: requests over shared prefixes, evictions, acks (some
    delayed: manual acks), storage, prefetches, the scheduler driver."""
    rng = random.Random(seed)
    storage = rng.random() < 0.5
    cfg = dict(policy=rng.choice(["write_through", "write_through_selective", "write_back"]), storage=storage,
               device_kv=rng.choice([16, 24, 32]), device_mamba=rng.choice([3, 4, 6]),
               host_kv=rng.choice([4, 8, 12]), host_mamba=rng.choice([2, 4, 8]), load_back_threshold=1,
               auto_complete=rng.random() < 0.6, driver=rng.choice(["fuzz", "scheduler"]))
    prefixes = [[1, 2], [1, 2, 3], [4, 5, 6], [7]]
    ops = []
    for _ in range(length):
        toks = list(rng.choice(prefixes)) + [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
        r = rng.random()
        ops.append({"op": "request", "tokens": toks} if r < 0.3 else {"op": "start", "tokens": toks} if r < 0.4
                   else {"op": "finish_oldest"} if r < 0.5 else {"op": "evict", "n": rng.randint(1, 6)} if r < 0.6
                   else {"op": "evict_host", "n": rng.randint(1, 4)} if r < 0.66 else {"op": "events"} if r < 0.74
                   else {"op": "write_ack"} if r < 0.8 else {"op": "load_ack"} if r < 0.86
                   else {"op": "l3_ack"} if r < 0.9 and storage else {"op": "prefetch", "tokens": toks}
                   if r < 0.95 and storage else {"op": "prefetch_done", "n": rng.randint(0, 6),
                                                  "mamba_hit": rng.random() < 0.6} if storage else {"op": "events"})
    return {"config": cfg, "ops": ops}


def _report(r: dict) -> dict:
    out = {k: v for k, v in r.items() if not k.startswith("_")}
    out["contents"] = pool_contents(r["_cache"])
    return out


def compare_programs(device: str, programs: int, seed: int = 0,
                     presets: tuple[str, ...] = tuple(PRESETS)) -> list[str]:
    """Random programs on ``device`` against the plain CPU: the same report field for field, the same data."""
    problems = []
    for i in range(programs):
        doc, name = random_program(seed + i), presets[i % len(presets)]
        with using_streams(_no_streams):
            want = _report(run_ops(doc, name))
        got = _report(run_ops(doc, name, device=device))
        if got != want:
            fields = sorted(k for k in want if got.get(k) != want[k])
            problems.append(f"program {seed + i} under {name}: {', '.join(fields)} differ")
    return problems


def compare_gallery(device: str) -> list[str]:
    """Every gallery scenario under every preset it records, with its trace: the same as on the plain CPU."""
    problems = []
    for scenario in gallery():
        sc = load(scenario)
        for name in sc.expect:
            with using_streams(_no_streams):
                want = simulate(sc, name)
            got = simulate(sc, name, device=device)
            jw, jg = want.to_json(), got.to_json()
            fields = sorted(k for k in jw if jg.get(k) != jw[k])
            if pool_contents(got.cache) != pool_contents(want.cache):
                fields.append("pool contents")
            if fields:
                problems.append(f"{scenario} under {name}: {', '.join(fields)} differ")
    return problems


# --- the command ---
def _section(title: str, problems: list[str], seconds: float) -> bool:
    print(f"{'ok  ' if not problems else 'FAIL'} {title} ({seconds:.1f} s)")
    for p in problems[:20]:
        print(f"       {p}")
    if len(problems) > 20:
        print(f"       ... and {len(problems) - 20} more")
    return not problems


def _timed(fn: Callable[[], list[str]]) -> tuple[list[str], float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simcache.gpu_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="the GPU to check (cuda or cuda:N; default cuda)")
    ap.add_argument("--programs", type=int, default=300, help="random programs compared with the CPU (default 300)")
    ap.add_argument("--seed", type=int, default=0, help="first random program's seed")
    ap.add_argument("--emulated", choices=POLICIES, help="run on the CPU under the stream emulation instead")
    a = ap.parse_args(argv)
    ok = True
    if a.emulated:
        print(f"gpu_check: CPU, emulated streams ({a.emulated})")
        with using_streams(lambda dev: EmulatedStreams(a.emulated)):
            probes, s = _timed(lambda: [f"{k}: {p}" for k, v in run_probes("cpu").items() for p in v])
            ok &= _section("ordering probes", probes, s)
            programs, s = _timed(lambda: compare_programs("cpu", a.programs, a.seed))
            ok &= _section(f"{a.programs} random programs equal the plain CPU", programs, s)
        return 0 if ok else 1
    if not torch.cuda.is_available():
        print("gpu_check: skipped, no CUDA on this machine (try --emulated lazy for the CPU emulation)")
        return 0
    dev = torch.device(a.device)
    print(f"gpu_check: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    probes, s = _timed(lambda: [f"{k}: {p}" for k, v in run_probes(a.device).items() for p in v])
    ok &= _section("ordering probes on CUDA streams", probes, s)
    with using_streams(lambda d: DelayedCudaStreams(d) if d.type == "cuda" else None):
        probes, s = _timed(lambda: [f"{k}: {p}" for k, v in run_probes(a.device).items() for p in v])
        ok &= _section("ordering probes with the side stream delayed", probes, s)
    with using_streams(lambda d: DelayedCudaStreams(d, cycles=200_000) if d.type == "cuda" else None):
        programs, s = _timed(lambda: compare_programs(a.device, 20, a.seed + 10_000))
        ok &= _section("20 random programs, side stream delayed, equal the CPU", programs, s)
    found, s = _timed(lambda: compare_gallery(a.device))
    ok &= _section("gallery (every scenario and preset, traces) equal the CPU", found, s)
    programs, s = _timed(lambda: compare_programs(a.device, a.programs, a.seed))
    ok &= _section(f"{a.programs} random programs equal the CPU", programs, s)
    print("gpu_check: all checks passed" if ok else "gpu_check: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
