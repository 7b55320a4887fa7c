"""Stateful property tests: random programs of cache operations and asynchronous completions, per preset.

After every rule the properties each real fix guarantees are checked; a failure shrinks to a short program that
Hypothesis prints rule by rule, which pastes back into an OPS.json (see the ``ops`` list in the failure).
- every preset: the run never raises anything but the simulated cache's own exceptions, and the canonical tree
  stays well formed (every attached node's values have its key's length);
- merged_fix and later (``host_leaf_predicate == "no_children"``): a host-leaf candidate never has children;
- followup_fix (``cascade_respects_host_refs``): no rule detaches a node whose host copy is referenced;
- described_fix / reviewed_fix (``stale_guards``): ``parent does not have child key`` never fires.
"""
from __future__ import annotations

from dataclasses import replace

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from simcache.cache import HiMambaRadixCache
from simcache.config import CacheConfig
from simcache.driver import Driver
from simcache.operations import RAISED
from simcache.state import attached_ids, tree_lines
from simcache.versions import PRESETS

TOKENS = st.lists(st.sampled_from([1, 2, 3, 4, 5]), min_size=1, max_size=5)
PREFIXED = st.tuples(st.sampled_from([(), (1, 2), (1, 2, 3), (5, 6)]), TOKENS).map(lambda t: list(t[0]) + t[1])


def machine_for(preset_name: str, policy: str, check_host_refs: bool | None = None, flags=None):
    """The state machine of ``preset_name`` (or ``flags``, a preset with a flag changed) under ``policy``."""
    flags = PRESETS[preset_name] if flags is None else flags
    if check_host_refs is None:
        check_host_refs = flags.cascade_respects_host_refs

    class CacheMachine(RuleBasedStateMachine):
        reached = 0  # operations applied while a host-referenced tombstone parent stood in the tree

        def __init__(self) -> None:
            super().__init__()
            cfg = CacheConfig(policy=policy, storage=True, device_kv=16, device_mamba=4, host_kv=4, host_mamba=4,
                              load_back_threshold=1, flags=flags, device="cpu")
            self.cache = HiMambaRadixCache(cfg)
            self.drv = Driver(self.cache)
            self.ops: list[dict] = []
            self.crash = None

        def apply(self, op: dict) -> None:
            if self.crash is not None:  # the run ended at the simulated assertion; later rules are no-ops
                return
            self.ops.append(op)
            protected = {id(n): n for n in self._host_referenced()}
            if any(n.mamba_value is None and n.children for n in protected.values()):
                CacheMachine.reached += 1  # a host-referenced tombstone parent: where the cascade must stop
            before = attached_ids(self.cache)
            # a bug of simcache's own (an InternalError) or a user's mistake is raised, never an outcome
            if self.drv.step(op, len(self.ops) - 1) == RAISED:
                self.crash = self.cache.crashed
                assert self.crash.function != "driver", f"simcache itself failed: {self.crash} after ops {self.ops}"
            if check_host_refs:
                after = attached_ids(self.cache)
                for key, n in protected.items():
                    if key in before and n.host_ref_counter > 0:
                        assert key in after, f"node {n.id} [{n.key}] detached while host-referenced; ops {self.ops}"

        def _host_referenced(self):
            stack, out = [self.cache.root_node], []
            while stack:
                n = stack.pop()
                if n.host_ref_counter > 0 and n is not self.cache.root_node:
                    out.append(n)
                stack.extend(n.children.values())
            return out

        @rule(tokens=PREFIXED)
        def request(self, tokens):
            self.apply({"op": "request", "tokens": tokens})

        @rule(tokens=PREFIXED)
        def start(self, tokens):
            self.apply({"op": "start", "tokens": tokens})

        @rule()
        def finish_oldest(self):
            self.apply({"op": "finish_oldest"})

        @rule(n=st.integers(1, 6))
        def evict(self, n):
            self.apply({"op": "evict", "n": n})

        @rule(n=st.integers(1, 2))
        def evict_mamba(self, n):
            self.apply({"op": "evict_mamba", "n": n})

        @rule(n=st.integers(1, 4))
        def evict_host(self, n):
            self.apply({"op": "evict_host", "n": n})

        @rule()
        def events(self):
            self.apply({"op": "events"})

        @rule()
        def l3_ack(self):
            self.apply({"op": "l3_ack"})

        @rule(tokens=PREFIXED)
        def prefetch(self, tokens):
            self.apply({"op": "prefetch", "tokens": tokens})

        @rule(shared=st.sampled_from([(1,), (1, 2), (5, 6)]), a=TOKENS, b=TOKENS)
        def two_requests_parting_after_a_prefix(self, shared, a, b):
            # a split: a parent over two leaves; once it is written through and its storage backup is in flight, it
            # is a host-referenced node that becomes a tombstone parent when its leaves are evicted
            self.apply({"op": "request", "tokens": [*shared, 8, *a]})
            self.apply({"op": "request", "tokens": [*shared, 9, *b]})

        @rule(pick=st.integers(0, 7), more=TOKENS)
        def prefetch_past_a_backed_up_node(self, pick, more):
            # a prefetch that extends a prefix the host holds anchors at that node and holds a host ref on it until
            # the prefetch is done: the node that later becomes a tombstone parent the cascade must not delete
            backed = [n for n in self._attached() if n.host_value is not None]
            if not backed:
                return
            node = backed[pick % len(backed)]
            self.apply({"op": "prefetch", "tokens": self.cache._node_prefix_tokens(node) + more})

        def _attached(self):
            stack, out = [self.cache.root_node], []
            while stack:
                n = stack.pop()
                if n is not self.cache.root_node:
                    out.append(n)
                stack.extend(n.children[k] for k in sorted(n.children))
            return out

        @rule(n=st.integers(0, 6), hit=st.booleans())
        def prefetch_done(self, n, hit):
            self.apply({"op": "prefetch_done", "n": n, "mamba_hit": hit})

        @invariant()
        def well_formed(self):
            for line in tree_lines(self.cache):
                assert "!len" not in line, f"{line} after ops {self.ops}"

        @invariant()
        def host_leaves_are_leaves(self):
            if self.cache.flags.host_leaf_predicate == "no_children":
                for n in self.cache.evictable_full_host_leaves:
                    assert not n.children, f"host leaf {n.id} has children after ops {self.ops}"

        @invariant()
        def guards_stop_the_assertion(self):
            if self.cache.flags.stale_guards and self.crash is not None:
                assert "parent does not have child key" not in self.crash.message, \
                    f"{self.crash.outcome} in {self.crash.function} after ops {self.ops}"

    CacheMachine.__name__ = f"CacheMachine_{preset_name}_{policy}"
    return CacheMachine


SMALL = dict(max_examples=20, stateful_step_count=25)
# the budget that reaches a host-referenced tombstone parent under write-through and evicts the leaves below it
# (two requests parting after a prefix, the parent's write-through and storage backup in flight, or a prefetch
# anchored there; then an eviction): the state the follow-up fix's cascade must stop at. The old budget (20 x 25,
# without the two rules above) never got there; with them, 100 x 25 catches the break removed in 7 of 8 seeds
# tried, and in this test's own (derandomized) seed: the test of the test below pins that.
REACH = dict(max_examples=100, stateful_step_count=25)


def budget(preset_name: str, policy: str) -> dict:
    return REACH if PRESETS[preset_name].cascade_respects_host_refs and policy == "write_through" else SMALL


def run_machine(machine, shrink: bool = True, **budget) -> None:
    phases = list(Phase) if shrink else [Phase.explicit, Phase.reuse, Phase.generate]
    machine.TestCase.settings = settings(**budget, deadline=None, derandomize=True, phases=phases,
                                         suppress_health_check=list(HealthCheck), database=None)
    machine.TestCase().runTest()


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("preset_name", list(PRESETS))
def test_stateful(preset_name, policy):
    machine = machine_for(preset_name, policy)
    run_machine(machine, **budget(preset_name, policy))
    if budget(preset_name, policy) is REACH:  # the promise was put to the test, not vacuously kept
        assert machine.reached > 0


def test_the_stateful_test_catches_the_follow_up_fix_with_its_cascade_break_removed():
    """A test of the test: followup_fix with ``cascade_respects_host_refs`` off (the break in
    ``_iteratively_delete_tombstone_leaf`` removed), held to followup_fix's promise, must fail."""
    mutant = replace(PRESETS["followup_fix"], cascade_respects_host_refs=False)
    machine = machine_for("followup_fix", "write_through", check_host_refs=True, flags=mutant)
    with pytest.raises(AssertionError, match="detached while host-referenced"):
        run_machine(machine, shrink=False, **budget("followup_fix", "write_through"))
