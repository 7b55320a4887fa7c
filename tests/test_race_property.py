"""A property test that reaches the stale-node race, and whose properties are the ones each fix promises.

Programs come from ``race_programs.programs()``: gallery cases, perturbed, under nearby schedules (see there why
uniform random programs never reach the race). Every search is deterministic (``derandomize``) and bounded, so
CI sees the same programs every time. A run that dies on an assertion unrelated to a property still counts for
it (its prefix ran); such runs are counted apart as ``other`` and must stay a minority.

- pre_fix: the search finds ``parent does not have child key`` within its budget;
- each preset keeps every promise of the fix flags it sets (``PROMISES``: stale_guards, host_leaf_predicate,
  cascade_respects_host_refs, guard_before_asserts, unconditional_lru_cleanup) on every program;
- flipping one fix flag off breaks its promise: the search finds a counterexample. Operation programs cannot
  reach the states ``guard_before_asserts`` and ``unconditional_lru_cleanup`` guard against (a stale parent that
  still has a child, a tombstone left in the Mamba list; 400 programs each found none), nor call
  ``cache_unfinished_req`` (``forward_chunked``): those three flags are guarded by constructed states in
  ``test_flags.py`` and are not flipped here (``UNREACHABLE``).
"""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from race_programs import OFF, PROMISES, X, no_stale_assertion, observe, programs

from simcache.versions import PRESETS

BUDGET = 30  # programs per search
UNREACHABLE = {"guard_before_asserts", "unconditional_lru_cleanup"}


def search(preset: str, flags: dict | None, props, budget: int = BUDGET):
    """Run ``budget`` programs; return (the first (property, problem, program) that fails, the run kinds)."""
    kinds: Counter = Counter()
    found: list = []

    @settings(max_examples=budget, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def body(program):
        o = observe(program, preset, flags)
        kinds[o.kind] += 1
        for prop in props:
            problem = prop(o)
            if problem and not found:
                found.append((prop.__name__, problem, program))

    body()
    return (found[0] if found else None), kinds


# what each version promises, from the design (shared/design/sglang_reference.md), written here and not read from
# versions.py: a preset that loses one of its fixes must fail the property test, not quietly promise less
PROMISED = {
    "pre_fix": (),
    "described_fix": ("host_leaf_predicate", "stale_guards"),
    "reviewed_fix": ("host_leaf_predicate", "stale_guards", "guard_before_asserts", "unconditional_lru_cleanup"),
    "merged_fix": ("host_leaf_predicate",),
    "followup_fix": ("host_leaf_predicate", "cascade_respects_host_refs"),
    # followup_fix + #26945 and #27391, neither of which touches what these properties watch
    "main_2026_06": ("host_leaf_predicate", "cascade_respects_host_refs"),
    # main_2026_06 + the three changes of release 0.5.17 (prefetch host KV at the hit count, unreserved prefetches
    # revoked, splits leave the Mamba LRU): the stale-node code and both fixes are those of 7f67965b
    "release_0_5_17": ("host_leaf_predicate", "cascade_respects_host_refs"),
}


def promised(preset: str) -> tuple[str, ...]:
    return PROMISED[preset]


def test_pre_fix_reaches_the_stale_node_race_within_its_budget():
    found, kinds = search("pre_fix", None, [no_stale_assertion])
    assert found is not None, f"no program reached the race in {BUDGET}: {dict(kinds)}"
    assert found[0] == "no_stale_assertion" and X in found[1]
    assert kinds["race"] >= BUDGET // 5, dict(kinds)  # the generator is biased toward the race, not lucky once
    assert kinds["other"] <= BUDGET // 4, dict(kinds)  # unrelated assertions stay a minority (counted apart)


@pytest.mark.parametrize("preset", [p for p in PRESETS if promised(p)])
def test_each_preset_keeps_every_promise_of_its_fix_flags(preset):
    props = [PROMISES[f][1] for f in promised(preset)]
    found, kinds = search(preset, None, props)
    assert found is None, f"{preset}: {found[0]} broken: {found[1]}\n{found[2]!r}"
    assert sum(kinds.values()) == BUDGET


FLIPS = [(p, f) for p in PRESETS for f in promised(p) if f not in UNREACHABLE]


@pytest.mark.parametrize("preset, flag", FLIPS, ids=[f"{p}-{f}" for p, f in FLIPS])
def test_flipping_a_fix_flag_off_breaks_its_promise(preset, flag):
    found, kinds = search(preset, {flag: OFF[flag]}, [PROMISES[flag][1]])
    assert found is not None, f"{preset} with {flag} off still kept its promise on {BUDGET} programs {dict(kinds)}"
    assert found[0] == PROMISES[flag][1].__name__
