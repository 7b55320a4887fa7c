"""The Python API on hostile arguments (issue 43, item 12): every public callable of ``simcache``, ``simcache.teach``,
``simcache.tour``, the players and the objects they hand out (``Driver``, ``TourModel``, ``PlayerModel``,
``OutcomeTable``, ``Lab``, ``SchedulerGame``) checks its arguments, and a mistake is one ``SimcacheError`` sentence.

A Hypothesis fuzz draws argument lists from wrong types and near-miss values (``None``, numbers past 64 bits, NaN,
names that almost fit, lists where a name goes, simcache objects of the wrong kind) for each callable, and asserts
that nothing but a ``SimcacheError`` comes out (a result is fine). The issue's own examples are pinned whole.
"""
from __future__ import annotations

import inspect
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simcache
import simcache.player as player
import simcache.teach as teach
import simcache.tour as tour
import simcache.tour_player as tour_player
from simcache.errors import ArgumentError, CacheAssertion, ConfigError, ScenarioError, SimcacheError
from simcache.operations import Skip

MODULES = (simcache, teach, tour, player, tour_player)


def public_callables() -> dict[str, object]:
    """Every public function and class of the API's modules (their ``__all__``, else every public name defined in
    simcache), exceptions aside."""
    out = {}
    for mod in MODULES:
        for name in getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]:
            obj = getattr(mod, name)
            where = getattr(obj, "__module__", "") or ""
            if inspect.ismodule(obj) or not callable(obj) or not where.startswith("simcache") or \
                    where == "simcache.errors":  # (a module without __all__ also shows the helpers it imports)
                continue
            if isinstance(obj, type) and issubclass(obj, BaseException):
                continue
            out[f"{mod.__name__}.{name}"] = obj
    return out


@cache
def objects() -> dict[str, object]:
    """One valid object of each kind the API hands out (the fuzz offers them where they do not belong, too)."""
    from simcache.explore import explore

    run = simcache.simulate("scenario_a")
    return dict(run=run, cache=simcache.HiMambaRadixCache(simcache.CacheConfig()), tour=tour.load("crash_pr"),
                result=explore("scenario_a", strategy="random", budget=3), flags=simcache.preset("pre_fix"),
                config=simcache.CacheConfig(), failure=explore("scenario_a", strategy="random", budget=5).first_failure)


WORDS = ["crash_pr", "scenario_a", "pre_fix", "followup_fix", "end", "start", "went-stale", "0:3", "", "R1", "mem",
         "ghost", "abc", "x" * 300, "attach", "evict 2", "request 1 2", "1", "\x00", "../../etc/passwd"]


def hostile() -> st.SearchStrategy:
    return st.one_of(
        st.none(), st.booleans(), st.integers(-5, 40), st.sampled_from([2**64, -(2**64), 10**5000]),
        st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(WORDS), st.text(max_size=6),
        st.lists(st.integers(-3, 6), max_size=4), st.lists(st.sampled_from(WORDS), max_size=3),
        st.dictionaries(st.sampled_from(["key", "op", "n", "tokens", "R1"]), st.integers(-2, 3), max_size=2),
        st.just(object()), st.binary(max_size=4), st.tuples(st.integers(-1, 3), st.integers(-1, 3)),
        st.sampled_from(sorted(objects())).map(lambda k: objects()[k]))


ALLOWED = (SimcacheError, CacheAssertion, Skip)  # a user's mistake; the simulated cache's own assertion; no room
FIXED = {"simcache.player.Player": dict(precompute=False), "simcache.player.PlayerModel": dict(precompute=False),
         "simcache.tour_player.Player": dict(precompute=False),
         "simcache.tour_player.TourPlayer": dict(precompute=False)}  # drawing every frame is slow and beside the point


def _call(fn, data, fixed=None) -> None:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    n = data.draw(st.integers(len(required), len(positional)), label="arguments")
    args = [data.draw(hostile(), label=positional[i].name) for i in range(n)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        args += data.draw(st.lists(hostile(), max_size=2), label="*args")
    try:
        fn(*args, **(fixed or {}))
    except ALLOWED:
        pass


FUZZ = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", sorted(public_callables()))
@FUZZ
@given(data=st.data())
def test_no_public_callable_lets_anything_but_a_simcache_error_out(name, data):
    _call(public_callables()[name], data, FIXED.get(name))


def _methods():
    o = objects()
    return {
        "Driver": (lambda: simcache.Driver(simcache.HiMambaRadixCache(simcache.CacheConfig())),
                   ["start", "finish", "inject", "step", "apply"]),
        "TourModel": (lambda: _tour_model(), ["answer", "go"]),
        "PlayerModel": (lambda: player.PlayerModel(o["run"], precompute=False),
                        ["go", "step", "op_start", "step_op", "position_of", "jump", "set_toggles", "step_of", "frame",
                         "code", "timeline"]),
        "OutcomeTable": (lambda: _table(), ["__getitem__", "cell", "row", "outcomes"]),
        "Lab": (teach.Lab, ["do", "match", "panels", "stack_of", "node", "lru", "leaves", "free"]),
        "SchedulerGame": (lambda: player.SchedulerGame("scenario_a", widgets=False), ["pick", "step_inside"]),
    }


@cache
def _tour_model():
    return tour.TourModel("crash_pr")


@cache
def _table():
    return teach.outcome_table(["scenario_a"], ["pre_fix"])


METHODS = [(kind, m) for kind, (_, names) in {
    "Driver": (None, ["start", "finish", "inject", "step", "apply"]), "TourModel": (None, ["answer", "go"]),
    "PlayerModel": (None, ["go", "step", "op_start", "step_op", "position_of", "jump", "set_toggles", "step_of",
                           "frame", "code", "timeline"]),
    "OutcomeTable": (None, ["__getitem__", "cell", "row", "outcomes"]),
    "Lab": (None, ["do", "match", "panels", "stack_of", "node", "lru", "leaves", "free"]),
    "SchedulerGame": (None, ["pick", "step_inside"])}.items() for m in names]


@pytest.mark.parametrize("kind, method", METHODS, ids=[f"{k}.{m}" for k, m in METHODS])
@FUZZ
@given(data=st.data())
def test_no_method_of_what_the_api_hands_out_lets_anything_but_a_simcache_error_out(kind, method, data):
    make, _ = _methods()[kind]
    _call(getattr(make(), method), data)


def test_the_fuzz_walks_every_public_name():
    names = public_callables()
    assert len(names) >= 60
    for expected in ("simcache.simulate", "simcache.Driver", "simcache.check_invariants", "simcache.tree_text",
                     "simcache.teach.show", "simcache.teach.flags", "simcache.teach.outcome_table",
                     "simcache.tour.load", "simcache.tour.TourModel", "simcache.tour_player.TourPlayer",
                     "simcache.player.PlayerModel"):
        assert expected in names


# --- the issue's examples, whole -------------------------------------------------------------------------------------

def _driver():
    return simcache.Driver(simcache.HiMambaRadixCache(simcache.CacheConfig()))


@pytest.mark.parametrize("call, error, message", [
    (lambda: teach.show("crash_pr"), ArgumentError,
     "show takes a Run (what simcache.simulate returns) as run, not str 'crash_pr'; e.g. show(simulate('crash_pr'))"),
    (lambda: teach.flags(), ArgumentError,
     "flags needs at least one preset to show, like flags('pre_fix', 'followup_fix')"),
    (lambda: teach.outcome_table("scenario_a", "pre_fix"), ArgumentError,
     "scenarios must be a list of names (at least one), not str 'scenario_a'; e.g. outcome_table(['scenario_a', "
     "'crash_pr'], ['pre_fix'])"),
    (lambda: simcache.check_invariants(None), ArgumentError,
     "check_invariants takes a HiMambaRadixCache as cache, not None; e.g. check_invariants(HiMambaRadixCache("
     "CacheConfig()))"),
    (lambda: simcache.tree_text(None), ArgumentError,
     "tree_text takes a HiMambaRadixCache as cache, not None; e.g. tree_text(HiMambaRadixCache(CacheConfig()))"),
    (lambda: simcache.simulate("scenario_a", ops="0:3"), ConfigError,
     "ops must be a pair (A, B) of operation numbers from 0 (either may be None for an open end), like ops=(0, 500), "
     "not '0:3'"),
    (lambda: _driver().finish("ghost"), ArgumentError, "Driver.finish: no live request 'ghost'; the live ones: none"),
    (lambda: _driver().start("abc"), ArgumentError,
     "Driver.start: tokens must be a non-empty list of whole numbers from 0 to 2**62 - 1, like [1, 2, 3], not 'abc'"),
    (lambda: _driver().inject([{"key": "x"}]), ScenarioError,
     "inject node 0: key must be a non-empty list of whole numbers from 0 to 2**62 - 1, like [1, 2]"),
    (lambda: tour.load(None), tour.TourError,
     "a tour is a gallery name or a tour file, not None; e.g. load('crash_pr'); gallery tours: crash_pr, scenario_a, "
     "unified_refill"),
    (lambda: tour_player.TourPlayer(42), tour.TourError,
     "a tour is a gallery name or a tour file, not 42; e.g. load('crash_pr'); gallery tours: crash_pr, scenario_a, "
     "unified_refill"),
    (lambda: _tour_model().answer("1"), ConfigError, "choice '1' is not one of 0..2"),
])
def test_the_issues_examples_are_one_sentence_each(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert isinstance(e.value, SimcacheError) and str(e.value) == message


def test_a_driver_refused_a_bad_argument_and_is_unchanged():
    drv = _driver()
    rid = drv.start([1, 2, 3])
    before = simcache.tree_text(drv.cache)
    for bad in (lambda: drv.start([1, -2]), lambda: drv.start([4], rid=rid), lambda: drv.finish(None),
                lambda: drv.inject([{"key": [1, 2], "parent": 5}]), lambda: drv.step({"op": "evict", "n": "x"}, 1)):
        with pytest.raises(SimcacheError):
            bad()
    assert simcache.tree_text(drv.cache) == before and list(drv.live) == [rid]
    drv.finish(rid)
    assert list(drv.live) == []
