"""``--reduce dpor`` (sleep sets over footprints + state caching) keeps the verdict of a search that runs every
schedule, and its footprints are sound: an operation it calls inert really touches nothing."""
from __future__ import annotations

import json
import random

import pytest

from simcache.cli import main
from simcache.errors import SimcacheError
from simcache.explore import explore, plan_for
from simcache.explore.dpor import inert
from simcache.explore.machine import Machine
from simcache.explore.sampling import draw_random
from simcache.explore.statekey import canonical_state
from simcache.scenario import gallery, load
from simcache.versions import preset

PRESETS = ("pre_fix", "described_fix", "followup_fix", "main_2026_06")

# crash_pr's actors, smaller (420 interleavings): a backup acknowledged or not, a prefetch in flight or not
SMALL = """name: small_pr
config: {policy: write_through, storage: true, prefetch_threshold: 1, device_kv: 32, device_mamba: 8, host_kv: 5,
         host_mamba: 8}
actors:
  pf: ["prefetch 1 2 9 9", "prefetch_done 4 hit"]
  R2: ["request 1 2 3 4"]
  mem: ["evict 2"]
  ctl: [events, l3_ack, l3_ack]
schedule: pf R2 pf mem ctl*3
"""


def verdict(res):
    return (res.signatures, set(dict(res.damage)), res.distinct_states, res.space_covered)


@pytest.mark.parametrize("name", ["scenario_a", "scenario_b", "scenario_d"])
@pytest.mark.parametrize("pre", PRESETS)
def test_dpor_reaches_every_outcome_end_state_and_damage_of_the_unreduced_search(name, pre):
    full = explore(name, pre, bound=None, reduce="none")
    dp = explore(name, pre, reduce="dpor")
    assert full.pruned == 0 and full.space_covered  # every schedule, each run up to its crash if it has one
    assert verdict(dp) == verdict(full)
    assert dp.schedules_run <= explore(name, pre, bound=None).schedules_run  # never more than state pruning


@pytest.mark.parametrize("pre", ["pre_fix", "followup_fix"])
def test_dpor_runs_fewer_schedules_than_state_pruning_where_operations_are_turned_away(tmp_path, pre):
    path = tmp_path / "small_pr.yaml"
    path.write_text(SMALL)
    full = explore(str(path), pre, bound=None, reduce="none")
    state = explore(str(path), pre, bound=None)
    dp = explore(str(path), pre, reduce="dpor")
    assert full.pruned == 0 and full.total_schedules == 420
    assert verdict(dp) == verdict(full) == verdict(state)
    assert dp.schedules_run < state.schedules_run < full.schedules_run


def test_an_inert_operation_leaves_the_state_untouched_and_is_turned_away():
    """The footprint dpor relies on: where ``inert`` says an operation is turned away, applying it changes
    nothing (canonical state, crash) and its status is ``-``; checked on random prefixes of every gallery scenario
    under several presets, and the check is not vacuous."""
    seen = 0
    for name in gallery():
        for pre in ("pre_fix", "followup_fix", "main_2026_06"):
            plan = plan_for(load(name), preset(pre))
            rng = random.Random(11)
            for _ in range(25):
                turns = draw_random(rng, plan.lengths)
                m = Machine.replay(plan, turns[: rng.randrange(len(turns))])
                if m.crash is not None:
                    continue
                before = canonical_state(m.cache, m.driver)
                for i, actor in enumerate(plan.actors):
                    if m.pos[i] < plan.lengths[i] and inert(plan.ops[actor][m.pos[i]], m):
                        c = m.clone()
                        assert c.step(plan, i) == "-" and c.crash is None
                        assert canonical_state(c.cache, c.driver) == before
                        seen += 1
    assert seen > 100


def test_dpor_is_an_explorer_option_with_clear_refusals(capsys):
    assert main(["explore", "scenario_b", "--reduce", "dpor", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bound"] is None and out["space_covered"] and out["schedules_run"] < out["total_schedules"]
    assert main(["explore", "scenario_b", "--reduce", "dpor", "--bound", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "drop --bound" in err
    with pytest.raises(SimcacheError, match="unknown reduction 'por'"):
        explore("scenario_a", reduce="por")
    with pytest.raises(SimcacheError, match="drop --jobs"):
        explore("scenario_a", reduce="dpor", jobs=2)
