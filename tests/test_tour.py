"""Guided tours (issue #17): played headlessly, every stop's correct answer is true of the run and every other
choice is false; stops are found by what happens, not by step numbers; a bad tour file gets one sentence.

Story: the crash tour stops at the first violation, the went-stale moment, the re-admission, the child attached
under the detached #8, its return to a leaf set, the second detach and the assertion, in that order; scenario A's
tour under followup_fix shows the cascade stopping. A learner answering wrong gets the right answer and the
explanation; the frame before the stop is shown until they answer.
"""
from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcache import simulate, tour
from simcache.errors import SimcacheError
from simcache.render.moments import moments
from simcache.safe_yaml import load_yaml
from simcache.tour import TourError, TourModel


@pytest.mark.parametrize("name", sorted(tour.gallery()))
def test_gallery_tour_played_headlessly_is_true_of_its_run(name):
    """Each stop: the frame before it, nothing later reachable; every wrong pick (in the order shown) gets its own
    hint and another try; the right one reveals the stop; the score counts first tries only."""
    model = TourModel(name)
    t = model.run.trace
    assert 6 <= len(model.tour.stops) <= 8
    for i, stop in enumerate(model.tour.stops):
        assert model.go(i) == i
        assert not model.revealed and model.step == max(0, model.steps[i] - 1)  # the frame before the stop
        assert model.limit == max(model.steps[i] - 1, model.steps[i - 1] if i else 0)
        for j, c in enumerate(stop.choices):
            assert tour.claim_holds(c.claim, model.run, model.steps[i]) == (j == stop.answer), (i, j)
        shown = model.choices
        wrong = [p for p in range(len(shown)) if p != model.answer_position]
        for p in wrong[: i % len(wrong) + 1] if i % 2 else []:  # odd stops: some wrong tries first
            right, hint = model.answer(p)
            assert not right and hint == (shown[p].hint or stop.hint) and hint and not model.revealed
            assert model.step == max(0, model.steps[i] - 1)
        right, text = model.answer(model.answer_position)
        assert right and text.endswith(stop.explain) and model.step == model.steps[i]
        assert text.startswith("Right, at try" if i % 2 else "Right.")
    assert model.done and model.limit is None and model.score == (len(model.tour.stops) + 1) // 2
    assert model.steps == sorted(model.steps) and model.steps[-1] < len(t.steps)


def test_gallery_choices_are_shuffled_by_the_seed_in_the_tour():
    """The right answer is not always in one place (it was A at 14 of 14 stops); the order is the seed's."""
    where = {name: [TourModel(name).tour.order(i).index(s.answer) for i, s in enumerate(tour.load(name).stops)]
             for name in tour.gallery()}
    assert where == {"crash_pr": [1, 2, 1, 0, 2, 2, 1, 0], "scenario_a": [2, 1, 1, 0, 1, 0, 0],
                     "unified_refill": [2, 1, 2, 0, 1, 0]}
    assert all(len(set(w)) >= 2 for w in where.values()) and {p for w in where.values() for p in w} == {0, 1, 2}
    t = tour.load("crash_pr")
    assert t.seed == 5 and [t.order(i) for i in range(8)] == [tour.load("crash_pr").order(i) for i in range(8)]
    other = replace(t, seed=6)
    assert [other.order(i) for i in range(8)] != [t.order(i) for i in range(8)]


def test_crash_tour_stops_where_the_story_happens():
    model = TourModel("crash_pr")
    t, m = model.run.trace, moments(model.run.trace)
    child = next(s.index for s in t.steps if s.kind == "attach" and s.detail.get("parent") == 8
                 and s.index > m["went-stale"][0])  # 9,9 was attached under #8 before it went stale
    second = [s.index for s in t.steps if s.kind == "detach" and s.node == 8][1]
    back = m["went-stale"][0] + 1  # evict_host has returned: write_backup resumes, with the detached #8
    assert "evict_host" in t.steps[back - 1].stack and t.steps[back].stack[-1] == "write_backup"
    assert model.steps == [m["violation"][0], m["went-stale"][0], back, m["readmitted"][0], child,
                           m["readmitted"][2], second, m["assertion"][0]]
    assert "write_backup()" in model.run.trace.snapshots[back].holders[8]


def test_a_tour_that_claims_something_false_is_refused():
    doc = load_yaml(tour.gallery()["crash_pr"].read_text(), "crash_pr.yaml")
    bad = copy.deepcopy(doc)
    bad["stops"][1]["choices"][0]["correct"], bad["stops"][1]["choices"][1]["correct"] = False, True
    bad["stops"][1]["choices"][0]["hint"] = bad["stops"][1]["choices"][1].pop("hint")
    t = tour.from_doc(bad, "bad")
    problems = tour.check(t, simulate("crash_pr", "pre_fix"))
    assert len(problems) == 2 and problems[0].startswith("stop 2 (It goes stale), choice 1")
    with pytest.raises(TourError, match="does not match the run: stop 2"):
        tour.checked(t)
    unreached = copy.deepcopy(doc)
    unreached["stops"][0]["at"] = {"moment": "cleaned-up"}
    with pytest.raises(TourError, match=r"^tour x does not match the run: stop 1 \(The first broken invariant\) is "
                                        r"at .* never reaches; point it at a moment the run has$"):
        tour.checked(tour.from_doc(unreached, "x"))


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("stops"), "tour is missing 'stops'"),
    (lambda d: d.update(extra=1), "tour has unknown field 'extra'"),
    (lambda d: d["stops"][0].update(at={"moment": "exploded"}), "stop 1.at.moment is 'exploded'; choose one of"),
    (lambda d: d["stops"][0].update(at={"moment": "violation", "kind": "call"}), "needs exactly one of moment"),
    (lambda d: d["stops"][0].update(at={"moment": "violation", "nth": 0}), "nth must be a whole number from 1"),
    (lambda d: d["stops"][0]["choices"][0].update(correct=False), "must mark exactly one choice"),
    (lambda d: d["stops"][0]["choices"][0].update(claim={"holds": "x"}), "choice 1.holds must be a mapping"),
    (lambda d: d["stops"][0]["choices"][0].update(claim={"sings": {}}), "names unknown claim 'sings'"),
    (lambda d: d["stops"][0]["choices"][0].update(claim={"violated": {"invariant": "nope"}}), "is 'nope'"),
    (lambda d: d["stops"][0].update(ask=""), "stop 1.ask must be non-empty text"),
    (lambda d: d["stops"][0].update(choices=[d["stops"][0]["choices"][0]]), "2 to 6 choices"),
    (lambda d: d.update(preset="post_fix"), "preset is 'post_fix'; choose one of"),
    (lambda d: d["stops"][0].update(ask="x" * 5000), "is 5,000 characters long"),
])
def test_bad_tour_gets_one_sentence(change, message):
    doc = load_yaml(tour.gallery()["crash_pr"].read_text(), "crash_pr.yaml")
    change(doc)
    with pytest.raises(TourError) as e:
        tour.from_doc(doc)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_tour_files(tmp_path):
    (tmp_path / "t.yaml").write_text("title: [unclosed\n")
    with pytest.raises(TourError, match="not valid YAML at line"):
        tour.load(tmp_path / "t.yaml")
    (tmp_path / "t.json").write_text('{"title": "a", "title": "b"}')
    with pytest.raises(TourError, match="title"):
        tour.load(tmp_path / "t.json")
    with pytest.raises(TourError, match="no tour named .nope. and no such file; gallery tours: crash_pr"):
        tour.load("nope")
    (tmp_path / "b.yaml").write_bytes(b"\xff\xfe")
    with pytest.raises(TourError, match="give a UTF-8 text file"):
        tour.load(tmp_path / "b.yaml")


def test_cli_export_with_a_tour(capsys, tmp_path):
    from simcache.cli import main

    out = tmp_path / "t.html"
    assert main(["export", "crash_pr", "--tour", "crash_pr", "-o", str(out)]) == 0  # the tour's preset: pre_fix
    html = out.read_text()
    assert '<section id="tour"><h2>Tour: The crash, predicted: how a deleted node lives on until the assertion' in html
    data = json.loads(html.split('id="simcache-data">')[1].split("</script>")[0])
    assert [s["step"] for s in data["tour"]] == TourModel("crash_pr").steps
    assert all(data["runs"][0]["frames"][s["frame"]]["step"] == s["step"] for s in data["tour"])
    assert data["runs"][0]["frames"][data["tour"][1]["before"]]["step"] == data["tour"][1]["step"] - 1
    for argv, message in ((["scenario_a", "--tour", "crash_pr"], "tour crash_pr is for crash_pr under pre_fix, "
                                                                  "not scenario_a under pre_fix"),
                          (["crash_pr", "--tour", "nope"], "no tour named 'nope'"),
                          (["crash_pr", "--tour", "crash_pr", "--compare", "pre_fix,merged_fix"], "without --compare")):
        bad = tmp_path / "bad.html"
        assert main(["export", *argv, "-o", str(bad)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and not bad.exists()


def test_a_teachers_new_tour_with_calls_and_operation_ends():
    """A tour written from scratch (as docs/tours.md shows): a stop at a call, one at an operation's end."""
    doc = {"title": "Deletions", "scenario": "crash_pr", "preset": "pre_fix", "stops": [
        {"at": {"kind": "call", "function": "_delete_tombstone_leaf"}, "ask": "Which node is about to be deleted?",
         "choices": [{"text": "1,2", "claim": {"in_children": {"node": "1,2", "of": "#2", "is": True}},
                      "correct": True},
                     {"text": "5,6 is already gone", "claim": {"exists": {"node": "5,6", "is": False}}}],
         "explain": "The cascade walks up from 9,9 to its parent."},
        {"at": {"kind": "call", "function": "_delete_tombstone_leaf"}, "ask": "And the next deletion?",
         "choices": [{"text": "#8 again", "claim": {"attached": {"node": "#8", "is": False}}, "correct": True},
                     {"text": "#8 is attached", "claim": {"attached": {"node": "#8", "is": True}}}],
         "explain": "It was detached at the first one."},
        {"at": {"op_end": 4}, "ask": "Is 1,2 backed up?", "title": "After op 4",
         "choices": [{"text": "no", "claim": {"violated": {"invariant": "backup_continuity"}}, "correct": True},
                     {"text": "yes", "claim": {"violated": {"invariant": "backup_continuity", "is": False}}}],
         "explain": "Backup continuity broke at op 2."}]}
    t = tour.from_doc(doc, "deletions")
    run = simulate("crash_pr", "pre_fix")
    calls = [s.index for s in run.trace.steps if s.kind == "call" and s.detail["function"] == "_delete_tombstone_leaf"]
    with pytest.raises(TourError, match=r"stop 3 \(After op 4\) is at step \d+, before stop 2"):
        tour.stop_steps(t, run)
    doc["stops"] = doc["stops"][:2]
    t = tour.from_doc(doc, "deletions")
    assert tour.stop_steps(t, run) == calls[:2] and tour.check(t, run) == []


def test_a_tours_text_is_text_on_the_page_and_in_the_widget(tmp_path):
    from simcache.export import render_page
    from simcache.tour_player import static_tour

    doc = load_yaml(tour.gallery()["crash_pr"].read_text(), "crash_pr.yaml")
    doc["title"], doc["intro"] = "<img src=x onerror=alert(1)>", "</script><script>alert(2)</script>"
    doc["stops"][0]["ask"] = "</script><b>bold?</b>"
    t = tour.from_doc(doc, "hostile")
    run = simulate("crash_pr", "pre_fix")
    html = render_page(run, tour=t)
    head, rest = html.split('<script type="application/json" id="simcache-data">')
    block, tail = rest.split("</script>", 1)  # the data block: JSON, where only "</" could end it early
    assert "</" not in block and json.loads(block.replace("<\\/", "</"))["tour_title"] == doc["title"]
    assert "<img src=x" not in head + tail and "&lt;img src=x onerror=alert(1)&gt;" in tail  # the body: after it
    assert "<script>alert(2)" not in head + tail and "&lt;/script&gt;&lt;script&gt;alert(2)" in tail
    assert "&lt;/script&gt;&lt;b&gt;bold?&lt;/b&gt;" in static_tour(TourModel(t, run))


# --- issue #43 item 13: a refusal names the right cause ---
def test_a_tour_that_names_its_scenario_by_file_can_be_taken(tmp_path, capsys):
    """As docs/tours.md says, ``scenario:`` may be a scenario file; a relative path is read beside the tour file."""
    from simcache.cli import main
    from simcache.scenario import gallery as scenarios

    (tmp_path / "scen").mkdir()
    (tmp_path / "tours").mkdir()
    with scenarios()["crash_pr"].open("rb") as f:
        (tmp_path / "scen" / "mine.yaml").write_bytes(f.read())
    doc = load_yaml(tour.gallery()["crash_pr"].read_text(), "crash_pr.yaml")
    doc["scenario"] = "../scen/mine.yaml"
    path = tmp_path / "tours" / "t.json"
    path.write_text(json.dumps(doc))
    model = TourModel(path)
    assert model.steps == TourModel("crash_pr").steps and model.run.scenario.source.endswith("mine.yaml")
    assert tour.checked(path, simulate(str(tmp_path / "scen" / "mine.yaml"), "pre_fix"))[2] == model.steps
    out = tmp_path / "page.html"
    assert main(["export", str(tmp_path / "scen" / "mine.yaml"), "--tour", str(path), "-o", str(out)]) == 0
    assert '<section id="tour">' in out.read_text()
    doc["scenario"] = "../scen/nope.yaml"
    path.write_text(json.dumps(doc))
    with pytest.raises(TourError) as e:
        TourModel(path)
    assert str(e.value) == ("tour t names scenario '../scen/nope.yaml', which cannot be loaded: no scenario named "
                            "'../scen/nope.yaml' and no such file; gallery scenarios: crash_pr, hidden_needle, "
                            "nonleaf_prefetch, scenario_a, scenario_b, scenario_c, scenario_d, unified_refill, "
                            "unified_write_back")
    capsys.readouterr()


@pytest.mark.parametrize("argv, said", [
    (["--flag", "stale_guards=true"], "which --flag stale_guards=True changed: stop 7 (The second detach) is at "
     "{'kind': 'detach', 'node': '#8'}, which this run reaches only before stop 6 (first at step 122, stop 6 at "
     "step 222); take the tour without --flag"),
    (["--ops", "6:9"], "which --ops 6:9 (operations 6..8 of 12 only) changed: stop 2 (It goes stale) is at "
     "{'moment': 'went-stale'}, which this run never reaches; take the tour without --ops"),
    (["--schedule", "R2 pf pf R4 mem R6 ctl*4 mem R7"], "which --schedule 'R2 pf*2 R4 mem R6 ctl*4 mem R7' (not the "
     "scenario's own) changed: stop 1 (The first broken invariant) is at {'moment': 'violation'}, which this run "
     "never reaches; take the tour without --schedule"),
])
def test_changes_the_command_made_are_named_not_the_tour(argv, said, tmp_path, capsys):
    from simcache.cli import main

    out = tmp_path / "t.html"
    assert main(["export", "crash_pr", "--tour", "crash_pr", "-o", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"simcache: tour crash_pr holds on crash_pr under pre_fix, but not on this run, {said}\n"
    assert not out.exists()
    assert main(["export", "crash_pr", "--tour", "crash_pr", "-o", str(out), "--ops", "0:12"]) == 0  # all of them


def test_a_change_the_tour_survives_is_no_refusal_and_a_wrong_tour_is_still_the_tours():
    run = simulate("crash_pr", "pre_fix", ops=(0, 12))
    assert tour.changes(tour.load("crash_pr"), run) == [] and tour.checked("crash_pr", run)[2] == \
        TourModel("crash_pr").steps
    doc = load_yaml(tour.gallery()["crash_pr"].read_text(), "crash_pr.yaml")
    doc["stops"][0]["at"] = {"moment": "readmitted", "nth": 9}  # wrong on its own run too: the tour is blamed
    with pytest.raises(TourError) as e:
        tour.checked(tour.from_doc(doc, "x"), simulate("crash_pr", "pre_fix", {"stale_guards": True}))
    assert str(e.value) == ("tour x does not match the run: stop 1 (The first broken invariant) is at {'moment': "
                            "'readmitted', 'nth': 9}, which this run never reaches; point it at a moment the run has")


def test_stops_out_of_order_are_not_reported_as_never_reached():
    run = simulate("crash_pr", "pre_fix")
    choice = [{"text": "yes", "claim": {"outcome": {"is": "assertion"}}, "correct": True},
              {"text": "no", "claim": {"outcome": {"is": "clean"}}}]
    stops = [{"at": at, "ask": "?", "explain": ".", "choices": choice}
             for at in ({"kind": "detach", "node": "#8"}, {"moment": "assertion"}, {"kind": "attach", "parent": "#8"},
                        {"returns": "evict_host"})]
    t = tour.from_doc({"title": "t", "scenario": "crash_pr", "preset": "pre_fix", "stops": stops[:3]}, "t")
    with pytest.raises(TourError) as e:
        tour.checked(t, run)
    assert str(e.value) == ("tour t does not match the run: stop 3 (Stop 3) is at {'kind': 'attach', 'parent': '#8'}, "
                            "which this run reaches only before stop 2 (first at step 49, stop 2 at step 262); order "
                            "the stops as the run goes")
    t = tour.from_doc({"title": "t", "scenario": "crash_pr", "preset": "pre_fix", "stops": [stops[1], stops[3]]}, "t")
    with pytest.raises(TourError) as e:
        tour.stop_steps(t, run)
    assert str(e.value) == ("stop 2 (Stop 2) is at {'returns': 'evict_host'}, which crash_pr under pre_fix reaches "
                            "only before stop 1 (first at step 33, stop 1 at step 262); order the stops as the run "
                            "goes")
    never = tour.from_doc({"title": "t", "scenario": "crash_pr", "preset": "pre_fix",
                           "stops": [{**stops[0], "at": {"returns": "load_back"}}]}, "t")
    with pytest.raises(TourError) as e:
        tour.stop_steps(never, run)
    assert str(e.value) == ("stop 1 (Stop 1) is at {'returns': 'load_back'}, which crash_pr under pre_fix never "
                            "reaches; point it at a moment the run has")


# --- issue #43: a fuzz of the tour format finds no exception but SimcacheError ---
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 10**7) | st.floats(allow_nan=True) |
                     st.text(max_size=12) | st.sampled_from(["#8", "1,2", "pre_fix", "went-stale", "attach", "holds",
                                                             "evict_host", "crash_pr", "nothing", "attachment"]),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4),
                     max_leaves=12)
_GALLERY_DOC = load_yaml(tour.gallery()["crash_pr"].read_text(), "crash_pr.yaml")


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


_ALL_PATHS = list(_paths(_GALLERY_DOC))


@st.composite
def _mutated(draw):
    doc = copy.deepcopy(_GALLERY_DOC)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_ALL_PATHS))
        if not path:
            return draw(_JSON)
        at = doc
        try:
            for p in path[:-1]:
                at = at[p]
            what = draw(st.sampled_from(["replace", "delete", "add"]))
            if what == "replace":
                at[path[-1]] = draw(_JSON)
            elif what == "delete":
                del at[path[-1]]
            elif isinstance(at, dict):
                at[draw(st.text(max_size=8))] = draw(_JSON)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation changed the shape there
    return doc


_RUN = {}


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_mutated(), picks=st.lists(st.integers(-2, 7), max_size=6))
def test_fuzzed_tour_documents_raise_only_simcache_errors(doc, picks):
    if "run" not in _RUN:
        _RUN["run"] = simulate("crash_pr", "pre_fix")
    try:
        t = tour.from_doc(doc, "fuzz")
        model = TourModel(t, _RUN["run"])
    except SimcacheError:
        return
    for p in picks:
        try:
            model.answer(p)
        except SimcacheError:
            pass
        model.go(model.index + 1)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
       suffix=st.sampled_from([".yaml", ".json", ".yml"]))
def test_fuzzed_tour_files_raise_only_simcache_errors(tmp_path_factory, text, suffix):
    path = tmp_path_factory.mktemp("fuzz") / f"t{suffix}"
    path.write_text(text, encoding="utf-8")
    try:
        tour.load(path)
    except SimcacheError:
        pass


def test_the_widget_tour_hints_retries_and_keeps_the_player_behind_the_question():
    """The JupyterLab tour: the player cannot pass the frame before the open question (steps, last, jumps), its
    timeline hides the outcome; a wrong pick is locked red with its hint; the right one reveals and opens "next"."""
    from simcache.tour_player import TourPlayer

    run = simulate("crash_pr", "pre_fix")
    tp = TourPlayer("crash_pr", run)
    m, pm = tp.model, tp.player.model
    before = m.steps[0] - 1
    assert pm.limit == before and pm.cursor == before and pm.hide_outcome
    assert [b.description for b in tp.buttons] == [f"{'ABC'[i]}. {c.text}" for i, c in enumerate(m.choices)]
    tp.player.buttons["next"].click()
    tp.player.buttons["last"].click()
    assert pm.cursor == before
    assert not pm.jump("assertion")
    assert pm.message == "The tour keeps what comes next hidden: answer its question first."
    assert "pre_fix: assertion" not in pm.timeline() and ">pre_fix</text>" in pm.timeline()
    assert tp.next.disabled and not tp.give_up.disabled
    wrong = (m.answer_position + 1) % len(tp.buttons)
    tp.buttons[wrong].click()
    assert tp.buttons[wrong].disabled and tp.buttons[wrong].button_style == "danger"
    assert not tp.buttons[m.answer_position].disabled
    assert f"Hint: {escape_html(m.choices[wrong].hint)}" in tp.feedback.value
    assert pm.cursor == before and tp.next.disabled
    tp.buttons[m.answer_position].click()
    assert tp.buttons[m.answer_position].button_style == "success" and all(b.disabled for b in tp.buttons)
    assert pm.cursor == m.steps[0] and not tp.next.disabled and pm.limit == m.steps[1] - 1
    assert "Score: 0 of 1 answered right at the first try (8 stops in all)." in tp.score.value
    tp.next.click()
    assert m.index == 1 and pm.cursor == m.steps[1] - 1
    tp.give_up.click()
    assert m.revealed and pm.cursor == m.steps[1] and "The answer is" in tp.feedback.value
    tp.prev.click()  # back to stop 1: still answered
    assert m.index == 0 and m.revealed and all(b.disabled for b in tp.buttons) and pm.cursor == m.steps[0]


def escape_html(text: str) -> str:
    from html import escape

    return escape(text)
