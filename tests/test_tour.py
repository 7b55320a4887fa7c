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

import pytest

from simcache import simulate, tour
from simcache.render.moments import moments
from simcache.safe_yaml import load_yaml
from simcache.tour import TourError, TourModel


@pytest.mark.parametrize("name", sorted(tour.gallery()))
def test_gallery_tour_played_headlessly_is_true_of_its_run(name):
    model = TourModel(name)
    t = model.run.trace
    assert 6 <= len(model.tour.stops) <= 8
    for i, stop in enumerate(model.tour.stops):
        model.go(i)
        assert not model.revealed and model.step == max(0, model.steps[i] - 1)  # the frame before the stop
        right, text = model.answer(stop.answer)
        assert right and text.startswith("Right.") and model.step == model.steps[i]
        for j, c in enumerate(stop.choices):
            assert tour.claim_holds(c.claim, model.run, model.steps[i]) == (j == stop.answer), (i, j)
            if j != stop.answer:
                model.go(i)
                right, text = model.answer(j)
                assert not right and stop.choices[stop.answer].text in text and stop.explain in text
    assert model.steps == sorted(model.steps) and model.steps[-1] < len(t.steps)


def test_crash_tour_stops_where_the_story_happens():
    model = TourModel("crash_pr")
    t, m = model.run.trace, moments(model.run.trace)
    child = next(s.index for s in t.steps if s.kind == "attach" and s.detail.get("parent") == 8
                 and s.index > m["went-stale"][0])  # 9,9 was attached under #8 before it went stale
    second = [s.index for s in t.steps if s.kind == "detach" and s.node == 8][1]
    assert model.steps == [m["violation"][0], m["went-stale"][0], m["readmitted"][0], child, m["readmitted"][2],
                           second, m["assertion"][0]]


def test_a_tour_that_claims_something_false_is_refused():
    doc = load_yaml(tour.gallery()["crash_pr"].read_text(), "crash_pr.yaml")
    bad = copy.deepcopy(doc)
    bad["stops"][1]["choices"][0]["correct"], bad["stops"][1]["choices"][1]["correct"] = False, True
    t = tour.from_doc(bad, "bad")
    problems = tour.check(t, simulate("crash_pr", "pre_fix"))
    assert len(problems) == 2 and problems[0].startswith("stop 2 (It goes stale), choice 1")
    with pytest.raises(TourError, match="does not match the run: stop 2"):
        tour.checked(t)
    unreached = copy.deepcopy(doc)
    unreached["stops"][0]["at"] = {"moment": "cleaned-up"}
    with pytest.raises(TourError, match=r"^stop 1 \(The first broken invariant\) is at .* never reaches"):
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
    with pytest.raises(TourError, match="no tour named 'nope' and no such file; gallery tours: crash_pr"):
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
