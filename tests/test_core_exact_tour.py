"""tour.py compared whole on crash_pr under pre_fix: a node named by id or by key text, a stop's match on kind,
node and parent, where each kind of stop lands (the very first step, right after the previous stop, past the
last operation, never), each claim kind true and false, the problems ``check`` lists and the sentence ``checked``
raises, and the model's first stop, its answers' range and its bounds."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace as NS

import pytest

from simcache import simulate
from simcache.errors import ConfigError
from simcache.render.moments import op_end
from simcache.tour import (
    Choice,
    TourError,
    TourModel,
    _matches,
    _node_id,
    check,
    checked,
    claim_holds,
    load,
    stop_steps,
)

SNAP = NS(nodes={3: NS(id=3, key_text="1,2"), 5: NS(id=5, key_text="1,2"), 7: NS(id=7, key_text="x8")})


@pytest.fixture(scope="module")
def run():
    return simulate("crash_pr", "pre_fix")


@pytest.fixture(scope="module")
def tour():
    return load("crash_pr")


def test_a_node_by_id_or_by_key_text():
    assert _node_id("#8", None) == 8  # an id needs no state
    assert _node_id("x8", SNAP) == 7  # a key text that ends in digits is still a key text
    assert _node_id("#x", SNAP) is None and _node_id("9,9", SNAP) is None
    with pytest.raises(TourError) as e:
        _node_id("1,2", SNAP)
    assert str(e.value) == "node '1,2' names 2 nodes here (#3, #5); name it by id"


def test_a_stop_matches_kind_node_and_parent():
    step = NS(index=4, kind="attach", node=5, detail={"parent": 3, "function": "f"})
    snap_of = {4: SNAP}.__getitem__
    assert _matches(step, {"kind": "attach"}, snap_of)
    assert not _matches(step, {"kind": "detach"}, snap_of)
    assert _matches(step, {"kind": "attach", "function": "f"}, snap_of)
    assert not _matches(step, {"kind": "attach", "function": "g"}, snap_of)
    assert _matches(step, {"kind": "attach", "parent": "#3"}, snap_of)
    assert not _matches(step, {"kind": "attach", "parent": "#9"}, snap_of)
    assert not _matches(step, {"kind": "attach", "node": "#5", "parent": "#9"}, snap_of)
    assert _matches(step, {"kind": "attach", "node": "#5", "parent": "#3"}, snap_of)
    assert not _matches(step, {"kind": "attach", "node": "#6"}, snap_of)
    assert not _matches(NS(index=4, kind="attach", node=None, detail={}), {"kind": "attach", "node": "#5"}, snap_of)
    keyed = NS(index=4, kind="attach", node=7, detail={"parent": 7})
    assert _matches(keyed, {"kind": "attach", "parent": "x8"}, snap_of)  # a key text is read from the state
    assert _matches(keyed, {"kind": "attach", "node": "x8"}, snap_of)


def with_stops(tour, *ats):
    base = tour.stops[0]
    return replace(tour, stops=tuple(replace(base, at=at, title=f"s{i}") for i, at in enumerate(ats, 1)))


def test_where_each_kind_of_stop_lands(run, tour):
    t = run.trace
    assert stop_steps(tour, run) == [49, 122, 123, 124, 130, 222, 261, 262]
    first = t.ops[0].last_step
    nxt = t.steps[first + 1]
    assert nxt.kind == "op"
    assert stop_steps(with_stops(tour, {"kind": "op"}), run) == [0]  # the very first step
    assert stop_steps(with_stops(tour, {"op_end": 0}, {"kind": "op"}), run) == [first, first + 1]
    assert stop_steps(with_stops(tour, {"op_end": len(t.ops) - 1}), run) == [op_end(t, len(t.ops) - 1)]
    for never in ({"op_end": len(t.ops)}, {"kind": "attach", "function": "nope"}, {"moment": "readmitted", "nth": 9}):
        with pytest.raises(TourError) as e:
            stop_steps(with_stops(tour, never), run)
        assert str(e.value) == (f"stop 1 (s1) is at {never}, which crash_pr under pre_fix never reaches; point it "
                                "at a moment the run has")
    with pytest.raises(TourError) as e:
        stop_steps(with_stops(tour, {"op_end": 3}, {"op_end": 1}), run)
    assert str(e.value) == (f"stop 2 (s2) is at step {op_end(t, 1)}, before stop 1 (step {op_end(t, 3)}); order the "
                            "stops as the run goes")


def test_each_claim_true_and_false(run):
    s = op_end(run.trace, 3)
    clean = simulate("scenario_a", "followup_fix")

    def holds(claim, on=run, step=s):
        return claim_holds(claim, on, step)

    assert holds({"outcome": {"is": "assertion"}}) and not holds({"outcome": {"is": "clean"}})
    assert holds({"outcome": {"is": "assertion", "raised_in": "_delete_tombstone_leaf"}})
    assert not holds({"outcome": {"is": "assertion", "raised_in": "evict"}})
    assert holds({"outcome": {"is": "clean"}}, clean, 0)
    assert not holds({"outcome": {"is": "clean", "raised_in": "evict"}}, clean, 0)  # no crash to have raised
    assert holds({"holds": {"node": "#8", "holder": "full_lru"}})
    assert not holds({"holds": {"node": "#8", "holder": "nothing"}})
    assert not holds({"holds": {"node": "#2", "holder": "lru"}})  # a node nobody holds
    assert holds({"holds": {"node": "#2", "holder": "nothing"}})
    assert not holds({"holds": {"node": "#99", "holder": "nothing"}})  # no such node: no claim about it holds
    assert not holds({"attached": {"node": "#99", "is": False}})
    assert holds({"exists": {"node": "#99", "is": False}}) and holds({"exists": {"node": "1,2", "is": True}})
    assert holds({"attached": {"node": "#8", "is": True}})
    assert holds({"parent": {"node": "#8", "is": "#2"}}) and holds({"parent": {"node": "#9", "is": "1,2"}})
    assert not holds({"parent": {"node": "#9", "is": "3,4"}}) and not holds({"parent": {"node": "#2", "is": "#2"}})
    assert holds({"in_children": {"node": "#9", "of": "1,2", "is": True}})
    assert holds({"in_children": {"node": "#9", "of": "#2", "is": False}})
    assert not holds({"in_children": {"node": "#9", "of": "#99", "is": False}})
    v = run.trace.violations[0]
    assert holds({"violated": {"invariant": v.invariant, "is": True}}, step=v.step)
    assert holds({"violated": {"invariant": v.invariant, "is": False}}, step=v.step - 1)


def test_check_lists_every_disagreement_and_checked_says_the_first(run, tour):
    stop = tour.stops[0]
    wrong = Choice(text="x" * 45, claim={"violated": {"invariant": "no_double_free", "is": True}}, correct=True)
    right = replace(stop.choices[0], correct=False)
    bad = replace(tour, stops=(replace(stop, choices=(right, wrong)),) + tour.stops[1:])
    problems = check(bad, run)
    assert problems == [
        f"stop 1 ({stop.title}), choice 1 ({right.text[:40]}): its claim {right.claim} is true at step 49, but the "
        "choice is marked wrong",
        f"stop 1 ({stop.title}), choice 2 ({'x' * 40}): its claim {wrong.claim} is false at step 49, but the choice is "
        "marked correct"]
    assert check(tour, run) == []
    with pytest.raises(TourError) as e:
        checked(bad, run)
    assert str(e.value) == f"tour crash_pr does not match the run: {problems[0]}"
    one = replace(tour, stops=(replace(stop, choices=(stop.choices[0], wrong)),) + tour.stops[1:])
    with pytest.raises(TourError) as e:
        checked(one, run)
    assert str(e.value) == f"tour crash_pr does not match the run: {check(one, run)[0]}"


def test_taking_a_tour(run, tour):
    model = TourModel(tour, run)
    assert model.run is run and model.index == 0 and model.chosen is None and model.steps == stop_steps(tour, run)
    assert model.step == 48 and not model.revealed and model.limit == 48
    assert model.orders == [tour.order(i) for i in range(len(tour.stops))] and model.orders[0] == [2, 0, 1]
    assert [c.text for c in model.choices] == [tour.stops[0].choices[k].text for k in (2, 0, 1)]
    assert model.answer_position == 1  # the right choice (index 0 in the file) is shown second
    n = len(model.stop.choices)
    for bad in (n, -1, "1", 1.0, True):
        with pytest.raises(ConfigError) as e:
            model.answer(bad)
        assert str(e.value) == f"choice {bad!r} is not one of 0..{n - 1}"
    assert model.go(5) == 0  # no stop past the first open one
    assert model.answer(0) == (False, tour.stops[0].choices[2].hint) and not model.revealed and model.step == 48
    with pytest.raises(ConfigError) as e:
        model.answer(0)
    assert str(e.value) == "choice 0 was already tried at this stop; pick another"
    right, text = model.answer(1)
    assert right and model.revealed and model.step == 49 and model.chosen == 1
    assert text == f"Right, at try 2: “{tour.stops[0].choices[0].text}”. {tour.stops[0].explain}"
    with pytest.raises(ConfigError) as e:
        model.answer(2)
    assert str(e.value) == "stop 1 is already answered; go to another stop"
    assert model.score == 0 and model.limit == 121  # stop 2 (step 122) is open: the frame before it
    assert model.score_text() == "Score: 0 of 1 answered right at the first try (8 stops in all)."
    assert model.go(1) == 1 and model.step == 121
    right, text = model.answer(model.answer_position)
    assert right and text == f"Right. {tour.stops[1].explain}" and model.score == 1
    assert model.limit == 122  # stop 3 asks over stop 2's own frame
    model.go(2)
    assert model.step == 122 and model.give_up() == (f"The answer is “{tour.stops[2].choices[0].text}”. "
                                                      f"{tour.stops[2].explain}")
    assert model.revealed and model.score == 1 and model.limit == 123 and not model.done
    assert model.go(99) == 3 and model.go(-5) == 0 and model.revealed and model.step == 49
    with pytest.raises(ConfigError):
        model.go("1")
    for i in range(3, len(tour.stops)):
        model.go(i)
        model.answer(model.answer_position)
    assert model.done and model.limit is None and model.score == len(tour.stops) - 2
