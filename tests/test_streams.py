"""Copies on streams, proven on the CPU: the deterministic stream emulation, the device choice, and the orderings.

Story: the emulation delays every piece of stream work until something forces it, so a copy that is read too
early reads poison and a write that is not ordered lands on the wrong side of a copy. Under it (both policies) the
copy code, unchanged, gives every gallery scenario and random programs the same outcome, trace and pool contents as
the plain CPU path; and removing any one synchronisation of ``pools.py`` makes an ordering probe fail, with the
failing probes recorded below.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import simcache.pool_copy as pool_copy
import simcache.pools as pools_module
from simcache.cache import HiMambaRadixCache
from simcache.cli import main
from simcache.config import CacheConfig
from simcache.controller import CacheController
from simcache.driver import Driver
from simcache.errors import ConfigError
from simcache.gpu_check import PROBES, compare_gallery, compare_programs, run_probes, using_streams
from simcache.gpu_check import main as gpu_check_main
from simcache.pools import PendingCopy, Pools, kv_fingerprints
from simcache.streams import POISON, POLICIES, EmulatedStreams, resolve_device


def emulated(policy: str):
    return using_streams(lambda device: EmulatedStreams(policy))


# --- the emulation itself ---
def test_stream_work_waits_until_its_event_is_synchronized_and_reads_as_poison_until_then():
    st = EmulatedStreams("lazy")
    side, out = st.new_stream(), torch.zeros(3, dtype=torch.int64)
    st.launch(side, lambda o: o.copy_(torch.tensor([7, 8, 9])), out, host_out=out)
    event = st.record(side)
    assert out.tolist() == [POISON] * 3 and not event.query()
    st.synchronize(event)
    assert out.tolist() == [7, 8, 9] and event.query()


def test_a_forced_stream_runs_everything_it_holds_and_a_wait_runs_the_other_stream_first():
    st = EmulatedStreams("lazy")
    side, log = st.new_stream(), []
    st.launch(st.default, log.append, "model writes")
    st.wait(side, st.record(st.default))
    st.launch(side, log.append, "copy reads")
    first = st.record(side)
    st.launch(side, log.append, "later copy")
    assert log == []  # nothing forced yet
    st.synchronize(first)
    assert log == ["model writes", "copy reads", "later copy"]  # a GPU may run past the event


def test_eager_default_runs_the_model_at_once_and_its_wait_forces_the_side_stream():
    st = EmulatedStreams("eager_default")
    side, log = st.new_stream(), []
    st.launch(side, log.append, "load")
    st.launch(st.default, log.append, "model")
    assert log == ["model"]  # unordered: the model overtook the load
    st.wait(st.default, st.record(side))
    assert log == ["model", "load"]


def test_a_dropped_index_tensor_serves_the_next_upload_on_its_stream_only():
    st = EmulatedStreams("lazy")
    side = st.new_stream()
    a = st.upload([1, 2, 3], side)
    ptr = a.untyped_storage().data_ptr()
    del a
    assert st.upload([4], st.default).untyped_storage().data_ptr() != ptr  # another stream's pool
    b = st.upload([5, 6], side)
    assert b.untyped_storage().data_ptr() == ptr  # handed out again, as a GPU's caching allocator does
    st.synchronize(st.record(side))
    assert b.tolist() == [5, 6]


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="policy must be one of lazy, eager_default"):
        EmulatedStreams("random")


# --- a backup on a stream: the host pool gets the data only after the event ---
@pytest.mark.parametrize("device_slots, staged", [([0, 1], False), ([3, 1], True)])
def test_a_backup_reaches_the_host_pool_only_when_its_copy_completes(device_slots, staged):
    with emulated("lazy"):
        pools = Pools.create(4, 1, 4, 1, "cpu")
    cc = CacheController(pools, "write_through", 1, auto_complete=False)
    pools.device_kv.write(device_slots, [5, 6])
    host = cc.write(device_slots, node_id=1)
    (copy,) = cc.ack_write_queue[0].copies
    assert isinstance(copy, PendingCopy) and not copy.done and pools.host_kv.inflight == [copy]
    if staged:  # slots out of order: gathered into the staging buffer, nothing scattered from it yet
        assert pools.host_kv.data.tolist() == [0, 0, 0, 0] and copy.staged.tolist() == [POISON, POISON]
    else:  # one block: copied straight into the pinned host pool, whose slots are undefined until the event
        assert pools.host_kv.data.tolist() == [POISON, POISON, 0, 0] and copy.staged is None
    cc.ack_write_queue[0].synchronize()
    assert copy.done and pools.host_kv.inflight == []
    assert pools.host_kv.data.tolist() == [5, 6, 0, 0] and host == [0, 1]


# --- the device choice ---
def test_the_device_is_cpu_unless_asked_and_a_cpu_cache_has_no_streams_or_pinned_memory():
    cache = HiMambaRadixCache(CacheConfig())
    assert CacheConfig().device == "cpu" and cache.pools.streams is None and cache.controller.stream is None
    assert {p.data.device.type for p in cache.pools.all().values()} == {"cpu"}
    assert not cache.pools.host_kv.data.is_pinned()
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("device, message", [
    ("meta", "device must be one of cpu, cuda, cuda:N or auto (like cuda:0), not 'meta'"),
    ("cuda:x", "device must be one of cpu, cuda, cuda:N or auto (like cuda:0), not 'cuda:x'"),
    (None, "device must be one of cpu, cuda, cuda:N or auto, not None"),
    ("cuda:99", None),
])
def test_a_bad_device_is_one_sentence(device, message):
    if device == "cuda:99":
        message = (f"device 'cuda:99' does not exist: this machine has {torch.cuda.device_count()} GPU(s)"
                   if torch.cuda.is_available() else
                   "device 'cuda:99' needs CUDA, which this machine does not have; ask for cpu (the default) or auto")
    with pytest.raises(ConfigError) as e:
        CacheConfig(device=device)
    assert str(e.value).startswith(message)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_the_cli_refuses_cuda_without_cuda_in_one_line(capsys):
    assert main(["run", "scenario_a", "--device", "cuda"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == ("simcache: scenario_a: device 'cuda' needs CUDA, which this machine does not have; "
                                 "ask for cpu (the default) or auto\n")


def test_the_cli_runs_on_the_device_it_is_given(capsys):
    assert main(["run", "scenario_a", "--device", "auto", "--json"]) == 0
    auto = capsys.readouterr().out
    assert main(["run", "scenario_a", "--json"]) == 0
    assert capsys.readouterr().out == auto


# --- the copy code under the emulation equals the plain path ---
@pytest.mark.parametrize("policy", POLICIES)
def test_every_gallery_scenario_gives_the_same_outcome_trace_and_contents_under_the_emulation(policy):
    with emulated(policy):
        assert compare_gallery("cpu") == []


@pytest.mark.parametrize("policy", POLICIES)
def test_random_programs_give_the_same_report_and_contents_under_the_emulation(policy):
    with emulated(policy):
        assert compare_programs("cpu", 40, seed=1000) == []


@pytest.mark.parametrize("policy", [None, *POLICIES])
def test_every_ordering_probe_passes_plain_and_emulated(policy):
    if policy is None:
        assert run_probes("cpu") == {name: [] for name in PROBES}
    else:
        with emulated(policy):
            assert run_probes("cpu") == {name: [] for name in PROBES}


def test_the_emulation_really_defers_a_caches_copies_until_something_needs_them():
    with emulated("lazy"):
        cache = HiMambaRadixCache(CacheConfig(auto_complete=False))
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3]))
    st, side, host = cache.pools.streams, cache.controller.stream, cache.pools.host_kv
    assert isinstance(st, EmulatedStreams)
    # the model's writes (index, values, store; KV and Mamba) and the backup (wait, copy; KV and Mamba): none ran
    assert (len(st.default.queue), len(side.queue)) == (6, 4)
    assert len(host.inflight) == 1 and host.data.tolist()[:3] == [POISON] * 3
    assert host.read(cache.root_node.children[1].host_value) == kv_fingerprints([1, 2, 3])  # completes it
    assert (len(st.default.queue), len(side.queue), host.inflight) == (0, 0, [])


# --- each synchronisation is needed: remove it, and these probes fail (lazy / eager_default) ---
BACKUP, TWO, LOAD, RESTORE, REUSE, SCATTERED, REPEATED = PROBES
MUTATIONS = {  # what is removed: (where, the no-op), the failing probes under lazy, under eager_default
    # the host scatters a backup's staging buffer without waiting for its event (bug 1)
    "host_waits_for_event": ((pool_copy, "_host_waits_for", lambda st, event: None),
                             {BACKUP, TWO, LOAD, RESTORE, REUSE, SCATTERED, REPEATED},
                             {BACKUP, TWO, LOAD, RESTORE, SCATTERED}),
    # a host read or write does not complete the pool's pending copies first (bug 1)
    "flush_before_host_access": ((pools_module.SlotPool, "flush", lambda self: None), {BACKUP}, {BACKUP}),
    # index tensors made on the default stream and dropped while the side stream still reads them (bug 2)
    "index_tensors_on_side_stream": ((pool_copy, "_index_stream", lambda st, stream: st.default),
                                     {SCATTERED, REPEATED}, set()),
    # the side stream does not wait for the model's writes before copying
    "side_waits_for_default": ((pool_copy, "_side_waits_for_default", lambda st, stream: None),
                               {BACKUP, TWO, LOAD, RESTORE, REUSE, REPEATED}, set()),
    # the default stream does not wait for a load (bug 3: device reads before the ack, the restore race)
    "default_waits_for_load": ((pool_copy, "_default_waits_for_load", lambda st, event: None),
                               {LOAD, RESTORE, SCATTERED}, {LOAD, RESTORE, SCATTERED}),
    # the default stream writes a pool while a backup still reads a freed slot of it (bug 3)
    "default_waits_for_readers": ((pools_module.SlotPool, "_wait_for_readers", lambda self: None),
                                  {REUSE}, {REUSE}),
    # a copy reuses the host pool's staging buffer while an earlier copy still uses it
    "copies_complete_in_order": ((pools_module.SlotPool, "_wait_for_staging", lambda self: None),
                                 {SCATTERED}, {SCATTERED, REPEATED}),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_removing_any_one_synchronisation_makes_a_probe_fail(mutation, monkeypatch):
    (owner, name, no_op), *want = MUTATIONS[mutation]
    monkeypatch.setattr(owner, name, no_op)
    failing = []
    for policy in POLICIES:
        with emulated(policy):
            failing.append({probe for probe, problems in run_probes("cpu").items() if problems})
    assert failing == want
    assert any(failing)


# --- the GPU scripts, on a machine without CUDA: they import, say they skipped, and exit 0 ---
ROOT = Path(__file__).resolve().parent.parent
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the scripts run for real")


@no_cuda
def test_gpu_check_and_the_gpu_benchmark_skip_cleanly_without_cuda(capsys):
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert gpu_check_main([]) == 0 and bench.main([]) == 0
    assert capsys.readouterr().out == ("gpu_check: skipped, no CUDA on this machine (try --emulated lazy for the "
                                       "CPU emulation)\nbench_gpu: skipped, no CUDA on this machine\n")
    refusal = ("bench_gpu: --mib, --scattered-mib, --repeat and --rounds must be at least 1, --warmup and "
               "--requests at least 0\n")
    for bad in (["--mib", "0"], ["--rounds", "0"], ["--requests", "-1"], ["--warmup", "-1"]):
        assert bench.main(bad) == 2
        assert capsys.readouterr() == ("", refusal)


def test_gpu_check_runs_its_probes_and_programs_under_the_emulation(capsys):
    assert gpu_check_main(["--emulated", "lazy", "--programs", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "gpu_check: CPU, emulated streams (lazy)"
    assert [line[:4] + line[4:].split(" (")[0] for line in lines[1:]] == [
        "ok   ordering probes", "ok   3 random programs equal the plain CPU"]


@no_cuda
def test_the_one_shot_gpu_script_runs_every_step_and_exits_0_without_cuda(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PROGRAMS": "1", "PYTEST_K": "pools_live",
           "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "gpu_check.log").read_text()
    assert [line.split(" after ")[0] for line in log.splitlines() if ": exit " in line] == [
        "== torch: exit 0", "== ordering probes and equality with the CPU: exit 0", "== GPU and stream tests: exit 0",
        "== bandwidth: exit 0"]
    assert "gpu_check: skipped, no CUDA" in log and "bench_gpu: skipped, no CUDA" in log
    assert "SKIPPED [1] tests/test_gpu.py:" in log and "needs CUDA (no GPU on this machine)" in log
    assert log.endswith(f"gpu_check.sh: all steps passed; log in {tmp_path / 'gpu_check.log'}\n")
