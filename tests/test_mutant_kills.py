"""Tests written to kill mutants that passed every other test (issue 19's mutation run), through public entry
points: the DOT of a snapshot and the export's page data.

- a stale node is drawn red and dashed in every frame while it is stale, not only at the step it went stale
  (mutant: stale nodes drawn grey);
- every frame of an exported page carries its invariant panel, and the panel changes when an invariant breaks
  (mutant: the invariant panel dropped from the export);
- in a side-by-side page the second run's frame shows the same operation at the same offset as the first's
  (mutant: compare frames no longer lock-stepped);
(A changed assertion message is killed by ``test_assertion_messages.py``. The shrinker's fewest-preemptions pass
removed changes no shrunk result on any case tried, so no test here; ``test_minimality.py`` checks by brute
force that every shrunk case has the fewest preemptions, which is what the pass is for. A prefetch-anchor holder
missed by went-stale detection: no operation sequence found detaches a prefetch anchor, so the last test
detaches one by hand.)
"""
from __future__ import annotations

import re
from functools import cache

from views_helpers import run_c, story

from simcache import CacheConfig, Driver, HiMambaRadixCache, Recorder
from simcache.export import page_data
from simcache.render.dot import snapshot_to_dot
from simcache.simulate import simulate

S = story()
RED = "#dc2626"


def node_line(dot: str, nid: int) -> str:
    lines = [ln for ln in dot.splitlines() if re.match(rf"\s*n{nid} \[", ln)]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_stale_node_is_drawn_red_and_dashed_while_it_stays_stale():
    t = run_c().trace
    late = S["late"]  # an operation after the one in which node 8 went stale; no highlight any more
    snap = t.snapshots[late]
    assert 8 in snap.stale and late > S["stale"]
    line = node_line(snapshot_to_dot(snap), 8)
    assert f'color="{RED}"' in line and "dashed" in line and "stale" in line
    assert "went-stale" not in line  # the red is the stale state's own, not the went-stale highlight's


def test_every_exported_frame_carries_its_invariant_panel():
    data = page_data(run_c())
    frames = data["runs"][0]["frames"]
    first_bad = S["first_violation"]
    panels = [data["html"][f["inv"]] for f in frames]
    assert all('class="sc-panel sc-invariants"' in p for p in panels)
    before = [p for f, p in zip(frames, panels, strict=True) if f["step"] < first_bad]
    after = [p for f, p in zip(frames, panels, strict=True) if f["step"] >= first_bad]
    assert before and after
    assert all("violated" not in p for p in before)
    assert all(f"violated from step {first_bad}" in p for p in after)


@cache
def scenario_a(preset: str):
    return simulate("scenario_a", preset)


def test_side_by_side_frames_show_the_same_operation_at_the_same_offset():
    # scenario A: followup_fix's cascade stops early, so its operations take other numbers of steps than pre_fix's;
    # pre_fix stops at its assertion (op 3): every step of both runs is shown, to the end of each
    ra, rb = scenario_a("pre_fix"), scenario_a("followup_fix")
    data = page_data(ra, compare=rb)
    ta, tb = ra.trace, rb.trace
    a, b = data["runs"][0]["frames"], data["runs"][1]["frames"]
    assert len(a) == len(b) >= max(len(ta.steps), len(tb.steps))
    assert [f["step"] for f in a][-1] == len(ta.steps) - 1 and [f["step"] for f in b][-1] == len(tb.steps) - 1
    assert {f["step"] for f in a} == set(range(len(ta.steps)))  # every step of both runs can be shown
    assert {f["step"] for f in b} == set(range(len(tb.steps)))
    seen = {}
    for fa, fb in zip(a, b, strict=True):
        k = fa["op"]
        assert fb["op"] == k, (fa["step"], fb["step"])
        offset = seen[k] = seen.get(k, -1) + 1  # the position's offset inside operation k
        for f, t in ((fa, ta), (fb, tb)):
            if k < len(t.ops):
                assert f["step"] == min(t.ops[k].first_step + offset, t.ops[k].last_step)
            else:  # a run that stopped earlier stays on its last step
                assert f["step"] == len(t.steps) - 1
    assert sorted(seen) == list(range(max(len(ta.ops), len(tb.ops))))
    assert any(fa["step"] != fb["step"] for fa, fb in zip(a, b, strict=True))  # not the same step numbers


def test_the_export_compare_shows_how_the_longer_run_ends():
    # issue #13: crash_pr's described_fix runs on past pre_fix's assertion and ends cleanly; its end must be on the page
    ra, rb = simulate("crash_pr", "pre_fix"), simulate("crash_pr", "described_fix")
    assert len(rb.trace.steps) > len(ra.trace.steps) and rb.outcome == "clean"
    a, b = (r["frames"] for r in page_data(ra, compare=rb)["runs"])
    assert (a[-1]["step"], b[-1]["step"]) == (len(ra.trace.steps) - 1, len(rb.trace.steps) - 1)
    assert b[-1]["op"] == len(rb.trace.ops) - 1


def test_a_prefetch_anchor_is_named_among_the_holders_of_a_node_that_goes_stale():
    """No operation sequence found detaches a prefetch anchor, so the race's detach is done by hand (as
    test_flags does): the recorder must still name every holder, the prefetch anchor included."""
    cache = HiMambaRadixCache(CacheConfig(policy="write_through", storage=True, write_through_threshold=1,
                                          device="cpu"))
    drv, rec = Driver(cache), Recorder(snapshots=False)
    rec.attach(cache, drv)
    ops = [{"op": "request", "tokens": [1, 2]}, {"op": "events"}, {"op": "prefetch", "tokens": [1, 2, 9]}]
    for i, op in enumerate(ops):
        rec.begin_op(i, op)
        drv.apply(op, i)
        rec.end_op(i, ".")
    anchor = cache.ongoing_prefetch["pf"].last_host_node
    assert anchor.key == (1, 2)
    rec.begin_op(3, {"op": "events"})
    cache._pop_from_parent(anchor)
    rec.end_op(3, ".")
    assert [(e.node, e.key, e.holders) for e in rec.went_stale] == [
        (anchor.id, "1,2", ("evictable_full_device_leaves", "full_lru_list", "mamba_lru_list", "ongoing_backup",
                            "prefetch anchor"))]
