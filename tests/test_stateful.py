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

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from simcache.cache import HiMambaRadixCache
from simcache.config import CacheConfig
from simcache.driver import Driver
from simcache.operations import RAISED
from simcache.state import attached_ids, tree_lines
from simcache.versions import PRESETS

TOKENS = st.lists(st.sampled_from([1, 2, 3, 4, 5]), min_size=1, max_size=5)
PREFIXED = st.tuples(st.sampled_from([(), (1, 2), (1, 2, 3), (5, 6)]), TOKENS).map(lambda t: list(t[0]) + t[1])


def machine_for(preset_name: str, policy: str, check_host_refs: bool | None = None):
    if check_host_refs is None:
        check_host_refs = PRESETS[preset_name].cascade_respects_host_refs

    class CacheMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            cfg = CacheConfig(policy=policy, storage=True, device_kv=16, device_mamba=4, host_kv=4, host_mamba=4,
                              load_back_threshold=1, flags=PRESETS[preset_name], device="cpu")
            self.cache = HiMambaRadixCache(cfg)
            self.drv = Driver(self.cache)
            self.ops: list[dict] = []
            self.crash = None

        def apply(self, op: dict) -> None:
            if self.crash is not None:  # the run ended at the simulated assertion; later rules are no-ops
                return
            self.ops.append(op)
            protected = {id(n): n for n in self._host_referenced()}
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


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("preset_name", list(PRESETS))
def test_stateful(preset_name, policy):
    machine = machine_for(preset_name, policy)
    machine.TestCase.settings = settings(max_examples=20, stateful_step_count=25, deadline=None, derandomize=True,
                                         suppress_health_check=list(HealthCheck), database=None)
    machine.TestCase().runTest()
