"""The shrinker's fewest-preemptions pass (``pass_schedule``) does work no other pass does.

On every gallery case the cheap local moves (``pass_merge``) already reach the fewest preemptions, so removing
``pass_schedule`` changed no gallery result (issue 19: that mutant survived every test). Here the two evictions
of scenario B's minimal case are one actor ``M``, scheduled ``A B M C M``: ``M`` is preempted once, and
``A B C M M`` fails the same way with none (found by enumerating every order of the five operations: four fail).
With the local moves switched off, only the re-scheduling pass can find that order.
"""
from __future__ import annotations

import importlib

import pytest

from simcache.explore import shrink as shrink_fn
from simcache.explore import shrink_passes
from simcache.scenario import from_doc, load


def grouped_b():
    doc = shrink_fn(load("scenario_b"), "pre_fix", schedule=load("scenario_b").minimal_schedule).scenario.as_doc()
    actors = doc["actors"]
    doc["actors"] = dict(A=actors["A"], B=actors["B"], C=actors["C"], M=actors["mem"] + actors["mem2"])
    for k in ("expect", "schedule", "title", "description", "preset"):
        doc.pop(k, None)
    doc["name"] = "scenario_b_grouped"
    return from_doc(doc, name="scenario_b_grouped")


@pytest.mark.parametrize("local_moves", [True, False])
def test_the_shrunk_schedule_has_the_fewest_preemptions_with_or_without_the_local_moves(monkeypatch, local_moves):
    shrink_module = importlib.import_module("simcache.explore.shrink")  # the package re-exports the function
    if not local_moves:
        passes = tuple(p for p in shrink_passes.PASSES if p is not shrink_passes.pass_merge)
        monkeypatch.setattr(shrink_module, "STRATEGIES", ((passes,),))
    sc = grouped_b()
    small = shrink_fn(sc, "pre_fix", schedule="A B M C M")
    assert (small.schedule, small.steps, small.preemptions, small.signature) == (
        "A B C M*2", 5, 0, "AssertionError: parent does not have child key, 1 @ _evict_host_leaf")
