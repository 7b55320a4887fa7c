"""Exact outcomes of ``simcache/pools.py``: fingerprints, free lists and free counts, observer events, double
frees, accounting, slot data and copies (plain and under the stream emulation) (mutation testing, issue 19)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from simcache.errors import ConfigError
from simcache.pools import (
    KV_START,
    DoubleFree,
    PendingCopy,
    PoolAccounting,
    Pools,
    SlotPool,
    _cpu_index,
    _index,
    _last_writes,
    _on,
    _span,
    copy_slots,
    kv_extend,
    kv_fingerprint_array,
    kv_fingerprints,
    mamba_fingerprint,
    mamba_fingerprint_of,
)
from simcache.streams import _CPU, POISON, EmulatedStreams

M62 = (1 << 62) - 1


def reference_kv(tokens, h=0x2545F4914F6CDD1D):
    """The KV fingerprint written out: a polynomial hash mod 2**62 over ``t mod 2**32`` (#41: numpy computes it as
    one cumulative sum; here one token at a time)."""
    out = []
    for t in tokens:
        h = (h * 0x9E3779B97F4A7C15 + t % 2**32 + 0x632BE59BD9B4E019) % 2**62
        out.append(h)
    return out


def test_kv_fingerprints_fold_each_token_into_a_62_bit_polynomial_hash_of_the_whole_prefix():
    tokens = [5, 2**32 + 5, -1, 0, 2**40 + 7, 12345, 2**70 + 1]
    assert kv_fingerprints(tokens) == reference_kv(tokens)
    first = (0x2545F4914F6CDD1D * 0x9E3779B97F4A7C15 + 5 + 0x632BE59BD9B4E019) % 2**62
    assert kv_fingerprints([5]) == [first]
    # the token is taken mod 2**32 (5 and 2**32 + 5 fold in the same), but the prefix before it makes two 5s differ
    assert kv_fingerprints([5, 5])[1] == (first * 0x9E3779B97F4A7C15 + 5 + 0x632BE59BD9B4E019) % 2**62
    assert kv_fingerprints([5, 2**32 + 5]) == kv_fingerprints([5, 5]) and len(set(kv_fingerprints([5, 5]))) == 2
    assert all(0 <= h <= M62 for h in kv_fingerprints(tokens))
    # ``start`` drops the first fingerprints, each still a function of the whole prefix
    assert kv_fingerprints(tokens, 2) == reference_kv(tokens)[2:]
    assert kv_fingerprints(tokens, 1) == reference_kv(tokens)[1:]
    assert kv_fingerprints(tokens, 0) == reference_kv(tokens)
    assert kv_fingerprints([]) == [] and kv_fingerprints([1, 2], 2) == []
    # a long prompt (numpy's cumulative sum) gives the token-by-token values, and continues from any prefix
    long = [(i * 7919) % 100_003 for i in range(5000)]
    assert kv_fingerprints(long) == reference_kv(long)
    head, tail = kv_fingerprints(long[:1234]), kv_extend(reference_kv(long[:1234])[-1], long[1234:])
    assert head + tail[0] == reference_kv(long) and tail[1] == reference_kv(long)[-1]
    assert kv_extend(KV_START, long) == (reference_kv(long), reference_kv(long)[-1]) and kv_extend(9, []) == ([], 9)
    assert isinstance(kv_fingerprint_array(long), np.ndarray) and kv_fingerprint_array(long).tolist() == head + tail[0]


def test_the_mamba_fingerprint_follows_the_last_kv_fingerprint_and_the_length():
    tokens = [9, 8, 7, 6]
    kv = reference_kv(tokens)
    for n in range(1, 5):
        assert mamba_fingerprint(tokens[:n]) == (kv[n - 1] * 31 + n + 7) % 2**62
        assert mamba_fingerprint_of(kv, n) == (kv[n - 1] * 31 + n + 7) % 2**62
    assert mamba_fingerprint([]) == 7 and mamba_fingerprint_of([], 0) == 7 and mamba_fingerprint_of(kv, 0) == 7
    big = [2**61 + 1]  # the product wraps at 62 bits
    assert mamba_fingerprint_of(big, 1) == ((2**61 + 1) * 31 + 8) % 2**62


def recording(pool):
    events = []
    pool.observer = lambda name, what, slots: events.append((name, what, slots))
    return events


def test_a_new_pool_has_every_slot_free_in_order_and_nothing_recorded():
    pool = SlotPool("host_mamba", 3, "cpu", host=True)
    assert (pool.name, pool.size, pool.host, pool.device) == ("host_mamba", 3, True, _CPU)
    assert pool.device is _CPU
    cpu = torch.device("cpu")  # a device object is kept as given, and a CPU pool's tensor still waits for first use
    given = SlotPool("x", 1, cpu)
    assert given.device is cpu and cpu is not _CPU and "data" not in given.__dict__ and given.read([0]) == [0]
    assert list(pool.free_slots) == [0, 1, 2] and pool._free_count == [1, 1, 1]
    assert (pool.double_frees, pool.num_allocs, pool.observer, pool.stack_fn()) == ([], 0, None, ())
    assert (pool.streams, pool.inflight, pool.readers, pool._staging) == (None, [], [], None)
    assert SlotPool("device_kv", 2).host is False and SlotPool("device_kv", 2)._pin is False
    # a CPU pool's tensor and numpy view are made on first use, zeros of the pool's size
    assert "data" not in pool.__dict__ and "_np" not in pool.__dict__
    assert pool._np.tolist() == [0, 0, 0] and pool.data.tolist() == [0, 0, 0] and pool.data.dtype == torch.int64
    pool.data[1] = 9  # the view shares the tensor's memory
    assert pool._np.tolist() == [0, 9, 0]


def test_a_pool_on_another_device_makes_its_tensor_at_once_with_no_numpy_view():
    pool = SlotPool("device_kv", 4, "meta")
    assert pool.device == torch.device("meta") and "data" in pool.__dict__
    assert (tuple(pool.data.shape), pool.data.dtype, pool.data.device.type, pool._np) == ((4,), torch.int64,
                                                                                       "meta", None)


def test_a_missing_attribute_is_the_usual_attribute_error():
    pool = SlotPool("device_kv", 2)
    with pytest.raises(AttributeError) as e:
        _ = pool.nothing
    assert str(e.value) == "'SlotPool' object has no attribute 'nothing'"
    bare = SlotPool.__new__(SlotPool)  # no size yet: data is not made, it is missing
    with pytest.raises(AttributeError) as e:
        _ = bare.data
    assert str(e.value) == "'SlotPool' object has no attribute 'data'"


def test_alloc_and_free_tell_the_observer_and_count_allocations():
    pool = SlotPool("device_kv", 4)
    events = recording(pool)
    assert pool.alloc(5) is None and pool.num_allocs == 0
    assert pool.alloc(1) == [0] and pool.alloc(0) == [] and pool.alloc(3) == [1, 2, 3]
    assert pool.num_allocs == 3 and pool._free_count == [0, 0, 0, 0] and pool.available_size() == 0
    assert pool.alloc(1) is None
    assert pool.free([2]) == 1 and pool._free_count == [0, 0, 1, 0]
    assert pool.free([2, 0]) == 2  # 2 again: a double free, recorded with the stack at the time
    assert pool.free([]) == 0
    assert events == [("device_kv", "alloc_fail", (5,)), ("device_kv", "alloc", (0,)), ("device_kv", "alloc", ()),
                      ("device_kv", "alloc", (1, 2, 3)), ("device_kv", "alloc_fail", (1,)),
                      ("device_kv", "free", (2,)), ("device_kv", "double_free", (2,)), ("device_kv", "free", (2, 0)),
                      ("device_kv", "free", ())]
    assert pool.double_frees == [DoubleFree("device_kv", (2,), ())]
    assert list(pool.free_slots) == [2, 2, 0] and pool._free_count == [1, 0, 2, 0]


def test_a_double_free_records_the_stack_and_every_slot_already_free_in_order():
    pool = SlotPool("host_kv", 5)
    pool.stack_fn = lambda: ("evict", "free")
    pool.alloc(5)
    pool.free([4])
    pool.free([1])
    events = recording(pool)
    pool.free([1, 3, 4, 0])  # a generator is taken as well as a list
    pool.free(iter([0]))
    assert pool.double_frees == [DoubleFree("host_kv", (1, 4), ("evict", "free")),
                                 DoubleFree("host_kv", (0,), ("evict", "free"))]
    assert events == [("host_kv", "double_free", (1, 4)), ("host_kv", "free", (1, 3, 4, 0)),
                      ("host_kv", "double_free", (0,)), ("host_kv", "free", (0,))]
    assert pool._free_count == [2, 2, 0, 1, 2] and list(pool.free_slots) == [4, 1, 1, 3, 4, 0, 0]
    assert pool.is_free(0) and not pool.is_free(2) and pool.used_slots() == {2}


def test_alloc_of_exactly_the_free_slots_takes_them_all():
    pool = SlotPool("device_mamba", 2)
    assert pool.alloc(2) == [0, 1] and pool.available_size() == 0 and pool.used_slots() == {0, 1}
    pool.free([1])
    assert pool.alloc(1) == [1] and pool.is_free(1) is False


def test_accounting_names_each_kind_of_problem_sorted():
    pool = SlotPool("device_kv", 8)
    pool.alloc(8)
    pool.free([7, 5, 6])
    pool.free([6])  # twice in the free list
    assert pool.accounting([3, 0, 0, 7, 5, 3, 3, 1]) == PoolAccounting(
        leaked=(2, 4), free_but_referenced=(5, 7), duplicated_in_free_list=(6,), shared=(0, 3))
    assert pool.accounting(iter(range(8))) == PoolAccounting(leaked=(), free_but_referenced=(5, 6, 7),
                                                             duplicated_in_free_list=(6,), shared=())


def without_numpy_view(pool):
    """The pool as on a GPU: no numpy view, so writes, reads and copies go through torch indexing."""
    _ = pool._np  # made now, so that the next line is not undone by the first use
    pool._np = None
    return pool


@pytest.mark.parametrize("view", [True, False])
def test_writes_reads_and_plain_copies_move_exactly_the_slots_named(view):
    dev, host = SlotPool("device_kv", 5), SlotPool("host_kv", 6, host=True)
    if not view:
        without_numpy_view(dev), without_numpy_view(host)
    dev.write([3, 0, 4], [30, 1, 40])
    dev.write([], [])
    dev.write(range(1, 3), iter([10, 20]))
    assert dev.data.tolist() == [1, 10, 20, 30, 40]
    assert dev.read([4, 0, 4]) == [40, 1, 40] and dev.read(range(2, 4)) == [20, 30] and dev.read([]) == []
    assert copy_slots(dev, [4, 1], host, [0, 5]) is None
    assert host.data.tolist() == [40, 0, 0, 0, 0, 10]
    assert copy_slots(dev, range(0, 2), host, range(2, 4)) is None
    assert copy_slots(host, torch.tensor([5, 0]), dev, torch.tensor([0, 1])) is None
    assert copy_slots(dev, [], host, []) is None
    assert host.data.tolist() == [40, 0, 1, 10, 0, 10] and dev.data.tolist() == [10, 40, 20, 30, 40]


def test_a_copy_between_a_pool_with_a_view_and_one_without_uses_torch():
    dev, host = SlotPool("device_kv", 3), without_numpy_view(SlotPool("host_kv", 3, host=True))
    dev.write([0, 1, 2], [7, 8, 9])
    copy_slots(dev, [2, 0], host, [0, 1])
    assert host.read([0, 1, 2]) == [9, 7, 0]
    copy_slots(host, [0], dev, [1])
    assert dev.read([0, 1, 2]) == [7, 9, 9]


def test_index_helpers_keep_a_tensor_and_make_int64_tensors_of_anything_else():
    t = torch.tensor([3, 1])
    assert _index(t) is t and _index(range(2)) == [0, 1] and _index((5, 4)) == [5, 4]
    assert _cpu_index(t) is t and _cpu_index([]).dtype == torch.int64 and _cpu_index([]).tolist() == []
    assert _cpu_index((5, 4)).tolist() == [5, 4] and _cpu_index(range(1, 3)).dtype == torch.int64
    on = _on([2, 0], torch.device("meta"))
    assert (on.device.type, on.dtype, tuple(on.shape)) == ("meta", torch.int64, (2,))
    moved = _on(t, torch.device("meta"))
    assert (moved.device.type, tuple(moved.shape)) == ("meta", (2,))
    assert _on(range(2, 4), _CPU).tolist() == [2, 3] and _on(t, _CPU) is t and _on([], _CPU).dtype == torch.int64


@pytest.mark.parametrize("slots, span", [
    (range(4, 7), (4, 7)), (range(4, 10, 2), None), (range(3, 4), (3, 4)),
    ([4, 5, 6], (4, 6 + 1)), ([4], (4, 5)), ([4, 6], None), ([6, 5, 4], None), ([4, 6, 6], None), ([4, 4, 6], None),
    ((0, 1), (0, 2)), (torch.tensor([0, 1]), None),
])
def test_span_is_the_start_and_stop_of_consecutive_slots_only(slots, span):
    assert _span(slots) == span


def test_the_staging_buffer_is_reused_while_it_is_big_enough_and_at_least_doubles():
    pool = SlotPool("host_kv", 8, host=True)
    first = pool._staging_for(1)
    assert first.numel() == 1 and pool._staging.numel() == 1 and first.dtype == torch.int64
    buf = pool._staging
    assert pool._staging_for(1).numel() == 1 and pool._staging is buf  # exactly big enough: kept
    assert pool._staging_for(3).numel() == 3 and pool._staging.numel() == 3  # max(3, 2 * 1)
    buf = pool._staging
    assert pool._staging_for(2).numel() == 2 and pool._staging is buf
    assert pool._staging_for(4).numel() == 4 and pool._staging.numel() == 6  # max(4, 2 * 3)
    assert pool._staging_for(13).numel() == 13 and pool._staging.numel() == 13
    assert not pool._staging.is_pinned()  # the pool's tensor is not pinned (no GPU)


def emulated_pools():
    st = EmulatedStreams("lazy")
    pools = Pools.create(4, 2, 4, 2, "cpu", streams=st)
    return st, pools, pools.device_kv, pools.host_kv, st.new_stream()


def test_under_streams_a_device_write_is_stream_work_and_a_host_write_lands_at_once():
    st, pools, dev, host, _ = emulated_pools()
    assert pools.streams is st and [p.streams for p in pools.all().values()] == [st] * 4
    assert [p.host for p in pools.all().values()] == [False, False, True, True]
    dev.write([1, 2], [5, 6])
    assert dev.data.tolist() == [0, 0, 0, 0]  # queued on the default stream
    assert dev.read([2, 1, 0]) == [6, 5, 0] and dev.data.tolist() == [0, 5, 6, 0]  # the read ran it
    dev.write([], [])
    assert len(st.default.queue) == 0
    host.write([3], [9])
    assert host.data.tolist() == [0, 0, 0, 9] and host.read([3, 0]) == [9, 0] and len(st.default.queue) == 0


def test_a_block_backup_copies_straight_into_the_host_pool_and_completes_once():
    st, pools, dev, host, side = emulated_pools()
    dev.write([0, 1], [11, 12])
    copy = copy_slots(dev, [0, 1], host, [2, 3], side)
    assert (copy.host, copy.host_idx, copy.staged, copy.done, copy.streams) == (host, None, None, False, st)
    assert host.inflight == [copy] and dev.readers == [copy.event]
    assert host.data.tolist() == [0, 0, POISON, POISON]  # undefined until the event
    copy.complete()
    assert copy.done and host.inflight == [] and host.data.tolist() == [0, 0, 11, 12]
    copy.complete()  # a second time changes nothing
    assert copy.done and host.inflight == [] and host.data.tolist() == [0, 0, 11, 12]


def test_a_staged_backup_reaches_the_host_pool_only_at_completion_and_later_copies_wait_for_it():
    st, pools, dev, host, side = emulated_pools()
    dev.write([0, 1, 2, 3], [10, 11, 12, 13])
    first = copy_slots(dev, [3, 1], host, [0, 2], side)
    assert first.host is host and first.host_idx.tolist() == [0, 2] and first.staged.tolist() == [POISON, POISON]
    assert first.staged.data_ptr() == host._staging.data_ptr() and host.inflight == [first]
    assert host.data.tolist() == [0, 0, 0, 0] and dev.readers == [first.event]
    # the next staged copy takes the staging buffer only after the first has landed
    second = copy_slots(dev, [2, 0], host, [3, 1], side)
    assert first.done and host.data.tolist() == [13, 0, 11, 0] and host.inflight == [second]
    assert dev.readers == [second.event]  # the first backup's event has passed: no wait kept for it
    third = copy_slots(dev, [0, 1], host, [0, 1], side)  # a block copy also waits for the staged one
    assert second.done and host.inflight == [third] and dev.readers == [third.event]
    assert host.read([0, 1, 2, 3]) == [10, 11, 11, 12] and third.done and host.inflight == []


def test_a_device_write_after_a_backup_waits_for_the_backup_to_read_first():
    st, pools, dev, host, side = emulated_pools()
    dev.write([0, 1], [1, 2])
    copy_slots(dev, [1, 0], host, [0, 1], side)
    unfinished = copy_slots(pools.device_mamba, [0], pools.host_mamba, [1], side)
    assert len(dev.readers) == 1 and pools.device_mamba.readers == [unfinished.event]
    dev.write([0, 1], [7, 8])  # reuses the slots the backup reads
    assert dev.readers == []
    assert host.read([0, 1]) == [2, 1] and dev.read([0, 1]) == [7, 8]


@pytest.mark.parametrize("src_slots, dst_slots", [([2, 3], [0, 1]), ([3, 1], [2, 0])])
def test_a_load_reaches_the_device_before_the_models_next_read(src_slots, dst_slots):
    st, pools, dev, host, side = emulated_pools()
    host.write([0, 1, 2, 3], [20, 21, 22, 23])
    copy = copy_slots(host, src_slots, dev, dst_slots, side)
    assert copy.host is host and copy.host_idx is None and host.inflight == [copy] and dev.readers == []
    if src_slots == [3, 1]:  # gathered on the CPU into the staging buffer now
        assert copy.staged.tolist() == [23, 21] and copy.staged.data_ptr() == host._staging.data_ptr()
    else:
        assert copy.staged is None
    assert dev.data.tolist() == [0, 0, 0, 0] and not copy.done
    expected = [0, 0, 0, 0]
    for s, d in zip(src_slots, dst_slots, strict=True):
        expected[d] = 20 + s
    assert dev.read([0, 1, 2, 3]) == expected  # the default stream waited for the load
    assert dev.data.tolist() == expected and not copy.done  # nothing on the host side completed it yet
    host.flush()
    assert copy.done and host.inflight == []


def test_a_copy_between_a_plain_pool_and_a_streamed_one_runs_on_the_stream():
    st, pools, dev, host, side = emulated_pools()
    plain = SlotPool("host_kv", 2, host=True)
    plain.write([0, 1], [4, 5])
    copy = copy_slots(plain, [1, 0], dev, [0, 1], side)
    assert isinstance(copy, PendingCopy) and plain.inflight == [copy] and dev.data.tolist() == [0, 0, 0, 0]
    assert dev.read([0, 1]) == [5, 4]


def test_without_a_stream_a_copy_on_streamed_pools_is_done_at_once():
    st, pools, dev, host, side = emulated_pools()
    host.write([1], [5])
    assert copy_slots(host, [1], dev, [3]) is None  # no stream given
    assert dev.data.tolist() == [0, 0, 0, 5] and host.inflight == [] and dev.readers == []
    assert copy_slots(dev, [], host, [], side) is None and host.inflight == []


@pytest.mark.parametrize("dst, src, want", [
    ([7, 8, 6, 7], [1, 2, 3, 4], ([8, 6, 7], [2, 3, 4])),  # the first 7 is overwritten by the last
    ([5, 5, 5], torch.tensor([1, 2, 3]), ([5], [3])),
    ([2, 9, 2, 9, 4], range(10, 15), ([2, 9, 4], [12, 13, 14])),
    ((3, 1, 2), [4, 5, 6], ([3, 1, 2], [4, 5, 6])),  # no slot repeats: the same slots, as a list
])
def test_each_repeated_destination_slot_is_kept_once_with_its_last_source(dst, src, want):
    got_dst, got_src = _last_writes(dst, src)
    assert (got_dst, list(got_src)) == want and type(got_dst) is list
    assert all(type(v) is int for v in got_src)  # plain ints, also from a tensor of sources


def test_destination_slots_given_as_a_tensor_are_taken_as_they_are():
    dst, src = torch.tensor([1, 1]), [5, 6]
    assert _last_writes(dst, src) == (dst, src)


def _index_writes(st):
    """Every index write (``_put``, ``_scatter``) run on ``st``: (function name, destination slots), read when the
    work runs (an uploaded index holds its values only from then on)."""
    seen, launch = [], st.launch

    def spy(stream, fn, *args, host_out=None):
        if fn.__name__ in ("_put", "_scatter"):
            def run(data, idx, values, fn=fn):
                seen.append((fn.__name__, idx.tolist()))
                return fn(data, idx, values)
            return launch(stream, run, *args, host_out=host_out)
        return launch(stream, fn, *args, host_out=host_out)

    st.launch = spy
    return seen


def test_under_streams_a_repeated_destination_slot_is_written_once_by_its_last_writer():
    # after a double free, one allocation can name a slot twice; CUDA leaves which repeated write lands undefined
    st, pools, dev, host, side = emulated_pools()
    seen = _index_writes(st)
    dev.write([1, 2, 1], [10, 20, 30])
    assert dev.read([0, 1, 2, 3]) == [0, 30, 20, 0] and seen == [("_put", [2, 1])]
    host.write([0, 1, 2, 3], [40, 41, 42, 43])
    load = copy_slots(host, [3, 0, 2], dev, [0, 3, 0], side)  # a load into slot 0 twice
    assert load.staged.tolist() == [40, 42]
    assert dev.read([0, 1, 2, 3]) == [42, 30, 20, 40] and seen[1:] == [("_scatter", [3, 0])]
    backup = copy_slots(dev, [1, 2, 3], host, [2, 1, 2], side)  # a backup into host slot 2 twice
    assert backup.host_idx.tolist() == [1, 2] and len(seen) == 2
    backup.complete()
    assert host.read([0, 1, 2, 3]) == [40, 20, 40, 43]


def test_a_double_free_program_writes_each_slot_once_and_equals_the_plain_cpu():
    # random program 216 (pre_fix): a double free hands device slot 7 out twice in one allocation; on a GPU its
    # two writes raced and the pool contents differed from the CPU's (seen on an H200 by scripts/gpu_check.sh)
    from simcache.gpu_check import _no_streams, pool_contents, random_program, using_streams
    from simcache.ops_run import run_ops

    doc = random_program(216)
    with using_streams(_no_streams):
        want = run_ops(doc, "pre_fix")
    repeated = []

    def emulated(device):
        st = EmulatedStreams("lazy")
        seen = _index_writes(st)
        repeated.append(seen)
        return st

    with using_streams(emulated):
        got = run_ops(doc, "pre_fix")
    assert want["double_frees"] == [{"pool": "device_kv", "slots": [6, 7, 8],
                                     "chain": ["_evict_to_host", "_evict_device_leaf", "evict"]}]
    assert pool_contents(got["_cache"]) == pool_contents(want["_cache"])  # reading runs every pending write
    writes = [w for seen in repeated for w in seen]
    assert len(repeated) == 1 and len(writes) > 0 and all(len(set(slots)) == len(slots) for _, slots in writes)
    assert ("_put", [8, 6, 7]) in writes  # the allocation [7, 8, 6, 7]: the first 7's write is overwritten anyway
    assert {k: v for k, v in got.items() if k[0] != "_"} == {k: v for k, v in want.items() if k[0] != "_"}


def test_pools_are_made_on_the_device_named_with_pinning_only_on_a_gpu():
    pools = Pools.create(3, 1, 5, 2)
    assert [(n, p.name, p.size, p.device, p.host, p._pin) for n, p in pools.all().items()] == [
        ("device_kv", "device_kv", 3, _CPU, False, False), ("device_mamba", "device_mamba", 1, _CPU, False, False),
        ("host_kv", "host_kv", 5, _CPU, True, False), ("host_mamba", "host_mamba", 2, _CPU, True, False)]
    assert pools.streams is None and all(p.streams is None for p in pools.all().values())
    assert all(p.device is _CPU for p in pools.all().values())  # "cpu" names the one shared CPU device
    same = Pools.create(1, 1, 1, 1, torch.device("cpu"))  # a device object is taken as it is
    assert same.device_kv.device == _CPU and same.streams is None and not same.host_kv._pin
    meta = Pools.create(2, 1, 2, 1, torch.device("meta"))  # another device: the device tier only, unpinned host
    assert [(p.device.type, p._pin, p.streams) for p in meta.all().values()] == [
        ("meta", False, None), ("meta", False, None), ("cpu", False, None), ("cpu", False, None)]
    assert meta.device_kv.data.device.type == "meta" and meta.host_kv.data.device.type == "cpu"
    assert list(pools.all()) == list(Pools.NAMES) == ["device_kv", "device_mamba", "host_kv", "host_mamba"]
    with pytest.raises(ConfigError, match="not 'gpu'"):
        Pools.create(1, 1, 1, 1, "gpu")
