"""Exact tests of the CPU stream emulation's bookkeeping (``simcache.streams.EmulatedStreams``): names, counters,
the policy's error and ``upload``'s blocks, which the ordering tests in ``test_streams.py`` do not pin."""
from __future__ import annotations

import pytest
import torch

from simcache.streams import POLICIES, EmulatedStreams


def test_streams_are_named_default_then_side_1_2_and_count_what_ran():
    em = EmulatedStreams()
    assert em.policy == "lazy" and POLICIES == ("lazy", "eager_default")
    a, b = em.new_stream(), em.new_stream()
    assert [repr(s) for s in (em.default, a, b)] == [
        "<emulated stream default: 0 ran, 0 pending>", "<emulated stream side1: 0 ran, 0 pending>",
        "<emulated stream side2: 0 ran, 0 pending>"]
    out = torch.zeros(2, dtype=torch.int64)
    em.launch(a, out.fill_, 7)
    em.launch(a, out.add_, 1)
    assert repr(a) == "<emulated stream side1: 0 ran, 2 pending>" and out.tolist() == [0, 0]
    event = em.record(a)
    assert (event.position, event.query()) == (2, False)
    em.synchronize(event)
    assert repr(a) == "<emulated stream side1: 2 ran, 0 pending>" and out.tolist() == [8, 8] and event.query()


def test_a_policy_it_does_not_know_is_one_sentence():
    with pytest.raises(ValueError) as e:
        EmulatedStreams("LAZY")
    assert str(e.value) == "policy must be one of lazy, eager_default, not 'LAZY'"


def test_upload_fills_a_block_of_the_values_length_as_int64_and_an_empty_list_still_gets_one_slot():
    em = EmulatedStreams()
    side = em.new_stream()
    got = em.upload([3, 1, 2], side)
    assert (got.dtype, got.shape, repr(side)) == (torch.int64, (3,), "<emulated stream side1: 0 ran, 1 pending>")
    em.synchronize(em.record(side))
    assert got.tolist() == [3, 1, 2] and got._base.shape == (3,)
    empty = em.upload([], side)
    assert (empty.shape, empty._base.shape, empty.dtype) == ((0,), (1,), torch.int64)
    halves = em.upload(torch.tensor([5, 6], dtype=torch.int32), side)
    em.synchronize(em.record(side))
    assert (halves.dtype, halves.tolist()) == (torch.int64, [5, 6])
