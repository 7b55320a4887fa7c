"""A run narrowed by ``--ops A:B`` says so in every output and is never called clean (#43 item 1); the replay
command reproduces exactly the run shown, quoted for a shell (#43 item 2); every view keeps the real operation
numbers of a window and abbreviates long keys one way (#40 §1).

Story: crash_pr raises at operation 11 under pre_fix; ``--ops 6:9`` traces operations 6..8 only, so nothing in it
raises, and 9..11 never run: the JSON, the transcript, the export header and the storyboard table must all say
"narrowed" and none may say "clean".
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from simcache.cli import main
from simcache.export import page_data, render_page
from simcache.render.frames import caption
from simcache.render.words import op_number, sentence, short, short_key
from simcache.simulate import simulate
from simcache.storyboard import storyboard_files
from simcache.transcript import outcome_words, replay_command, run_label, transcript

ROOT = Path(__file__).resolve().parent.parent


def narrowed():
    return simulate("crash_pr", "pre_fix", ops=(6, 9))


def test_a_narrowed_runs_json_says_narrowed_never_clean(capsys):
    assert main(["run", "crash_pr", "--ops", "6:9", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["outcome"] == "narrowed" and j["assertion"] is None
    assert j["window"] == {"ops": "6:9", "operations": 12,
                           "narrowed": "operations 6..8 of 0..11 (--ops 6:9): 0..5 ran untraced, 9..11 never ran"}
    assert simulate("crash_pr", "pre_fix").to_json()["window"] is None
    whole = simulate("crash_pr", "pre_fix", ops=(0, 12))  # the whole schedule is not a narrowing
    assert whole.window is None and whole.outcome == "assertion"
    tail = simulate("crash_pr", "pre_fix", ops=(6, None))  # to the end: it still reaches the assertion
    assert tail.outcome == "assertion" and tail.to_json()["window"]["narrowed"] == \
        "operations 6..11 of 0..11 (--ops 6:12): 0..5 ran untraced"


def test_a_narrowed_transcript_and_outcome_words_say_so():
    r = narrowed()
    text = transcript(r)
    assert text.splitlines()[1] == ("NARROWED: operations 6..8 of 0..11 (--ops 6:9): 0..5 ran untraced, 9..11 never "
                                    "ran; the outcome below is this window's, not the scenario's")
    assert "clean" not in text
    assert outcome_words(r).startswith("narrowed to operations 6..8 of 0..11 (--ops 6:9): 0..5 ran untraced, 9..11 "
                                       "never ran: no assertion in this window; ")


def test_the_export_header_and_the_storyboard_of_a_narrowed_run_never_say_clean():
    r = narrowed()
    html = render_page(r)
    header = html.split('<p id="outcome">', 1)[1].split("</p>", 1)[0]
    assert "narrowed to operations 6..8" in header and "clean" not in header
    files = storyboard_files(r)
    comment = files["comment.md"]
    row = next(x for x in comment.splitlines() if x.startswith("| `pre_fix`"))
    assert "narrowed to operations 6..8" in row and "clean" not in row
    assert "survived" not in comment and "clean" not in comment.replace("cleaned up", "")


def test_a_window_keeps_its_real_operation_numbers():
    r = narrowed()
    t = r.trace
    assert [op_number(t, k) for k in range(len(t.ops))] == [6, 7, 8]
    assert caption(r, 0).startswith("Op 6 (ctl: events): ")
    frames = page_data(r)["runs"][0]["frames"]
    assert sorted({f["num"] for f in frames}) == [6, 7, 8]


def test_damage_without_an_assertion_is_said_in_the_clis_words_everywhere():
    r = simulate("crash_pr", "described_fix")
    words = outcome_words(r)
    assert words == "no assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]"
    assert words in transcript(r).replace("outcome: ", "")
    html = render_page(r)
    assert words in html.split('<p id="outcome">', 1)[1].split("</p>", 1)[0]
    assert f"| {words} |" in storyboard_files(r)["comment.md"]


def test_the_replay_command_reproduces_the_run_exactly():
    r = simulate("crash_pr", "pre_fix", flags={"stale_guards": True}, schedule="pf R2 pf R4 mem R6 ctl*4 mem R7",
                 ops=(2, 9))
    cmd = replay_command(r)
    assert cmd == "python -m simcache run crash_pr --preset pre_fix --flag stale_guards=true --ops 2:9"
    assert run_label(r) == "pre_fix + stale_guards=true"
    argv = shlex.split(cmd)[3:]
    again = simulate(argv[1], argv[3], {"stale_guards": True}, ops=(2, 9))
    assert again.to_json() == r.to_json()
    other = simulate("crash_pr", "pre_fix", schedule="R2 pf pf R4 mem R6 ctl*4 mem R7")
    assert replay_command(other) == ("python -m simcache run crash_pr --preset pre_fix --schedule "
                                     "'R2 pf*2 R4 mem R6 ctl*4 mem R7'")


def test_a_file_scenario_is_named_by_its_path_and_a_hostile_name_runs_nothing(tmp_path):
    """A scenario file named ``x; touch INJECTED #``: its replay command, pasted into a shell, runs simcache on
    that file and nothing else."""
    from simcache.scenario import gallery

    src = Path(str(gallery()["crash_pr"])).read_text()
    path = tmp_path / "x; touch INJECTED #.yaml"
    path.write_text(src)
    r = simulate(str(path), "pre_fix", flags={"stale_guards": True})
    cmd = replay_command(r)
    assert cmd == f"python -m simcache run '{path}' --preset pre_fix --flag stale_guards=true"
    work = tmp_path / "work"
    work.mkdir()
    out = subprocess.run(["sh", "-c", cmd.replace("python", shlex.quote(sys.executable), 1)], cwd=work,
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert not (work / "INJECTED").exists() and list(work.iterdir()) == []
    assert out.stdout == transcript(r) + "\n"
    story = storyboard_files(r)["comment.md"]
    assert f"`{cmd}`" in story


def test_a_scenario_made_in_python_has_no_replay_command():
    from views_helpers import scenario_doc

    r = simulate(scenario_doc("scenario_C_ops"), "pre_fix")
    assert replay_command(r) is None
    assert "No command line reproduces it" in storyboard_files(r)["comment.md"]


@pytest.mark.parametrize("text, want", [
    ("detach [1,2,3,4,5,6]#8 from []#2", "detach [1,2,3,4,5,6]#8 from []#2"),
    ("detach [1,2,3,4,5,6,7]#8 from []#2", "detach [1,2,3,…,7 (7)]#8 from []#2"),
    ("request [1 2 3 4 5 6 7 8]", "request [1,2,3,…,8 (8)]"),
    ("alloc host_kv [0, 1, 2, 3, 4, 5, 6, 7, 8]", "alloc host_kv [0,1,2,…,8 (9)]"),
    ("no list here", "no list here"),
])
def test_one_rule_abbreviates_every_key(text, want):
    assert short(text) == want
    assert short_key(range(648)) == "0,1,2,…,647 (648)"


def test_a_648_token_holder_row_is_abbreviated_like_the_node_labels():
    """#40 §1: a holder row printed a 648-character key in full (``parent pointer of [3000,3001,…]``)."""
    from simcache.render.ghosts import ghosts_at

    doc = {"config": {"policy": "write_through", "device_kv": 700, "host_kv": 700, "device_mamba": 4,
                      "host_mamba": 4}, "ops": [{"op": "request", "tokens": list(range(3000, 3648))}]}
    r = simulate(doc, "pre_fix")
    for s in range(len(r.trace.steps)):
        cap = caption(r, s)
        assert len(cap) < 240, cap
        for g in ghosts_at(r.trace, s).values():
            assert all(len(h) < 120 for h in g.holders)
    assert all(len(sentence(st)) < 200 for st in r.trace.steps)
