"""The storyboard for a PR comment (issue 17, part 4): PNGs of the key moments, a GIF of the stale window and a
comment.md, written under safe_io's rules.

Story: scenario A under pre_fix gives three pictures (went stale, re-admitted, the assertion) 860 px wide, a GIF
of the window from the stale step to the assertion, and a comment linking them in order with the outcome table;
with --compare the two presets share each picture. A planted symlink in DIR is moved aside, never followed; a file,
a device or an empty name as DIR is one sentence and exit status 2, and nothing is written.
"""
from __future__ import annotations

import io
import os

from PIL import Image

from simcache.cli import main
from simcache.simulate import simulate
from simcache.storyboard import WIDTH, key_moments, storyboard_files, write_storyboard


def test_key_moments_of_scenario_a_in_order():
    run = simulate("scenario_a", "pre_fix")
    assert [(s, stem) for s, stem, _ in key_moments(run)] == [(22, "went-stale"), (31, "readmitted"),
                                                                (38, "assertion")]
    assert key_moments(run)[0][2] == ("node #7 [1,2] went stale: detached by _delete_tombstone_leaf, called from "
                                      "_iteratively_delete_tombstone_leaf <- _evict_host_leaf <- evict_host while "
                                      "ongoing_backup still held it")


def test_the_storyboard_of_one_run(tmp_path):
    run = simulate("scenario_a", "pre_fix")
    written = write_storyboard(run, tmp_path / "sb")
    assert sorted(written) == ["01-went-stale.png", "02-readmitted.png", "03-assertion.png", "comment.md",
                               "legend.png", "stale-window.gif"]
    for name in ("01-went-stale.png", "02-readmitted.png", "03-assertion.png"):
        img = Image.open(written[name])
        assert img.format == "PNG" and img.width == WIDTH and 300 < img.height < 1400
    gif = Image.open(written["stale-window.gif"])
    assert gif.format == "GIF" and gif.width == WIDTH and gif.n_frames == 3  # ops 1, 2 and 3: stale .. assertion
    md = written["comment.md"].read_text()
    links = [line for line in md.splitlines() if line.startswith("![")]
    assert links == ["![1. went stale](01-went-stale.png)", "![2. readmitted](02-readmitted.png)",
                     "![3. assertion](03-assertion.png)", "![the stale window](stale-window.gif)",
                     "![legend](legend.png)"]
    assert "**2.** node #7 [1,2] re-admitted while detached: re-admitted to evictable_full_host_leaves" in md
    assert ("| `pre_fix` | `AssertionError: parent does not have child key, 1` in `_evict_host_leaf` | 1 | 0 | none "
            "| none |") in md


def test_compare_puts_both_presets_in_each_picture():
    files = storyboard_files(simulate("scenario_a", "pre_fix"), simulate("scenario_a", "followup_fix"))
    assert sorted(files) == ["01-went-stale.png", "02-readmitted.png", "03-assertion.png", "comment.md",
                             "legend.png", "stale-window.gif"]
    md = files["comment.md"]
    assert ("**3.** pre_fix: the assertion: AssertionError: parent does not have child key, 1 (in _evict_host_leaf) "
            "| followup_fix: the end: the cache survived") in md
    assert "| `followup_fix` | clean | 0 | 0 | none | none |" in md
    side = Image.open(io.BytesIO(files["03-assertion.png"]))
    assert side.width == WIDTH


def test_storyboard_writes_only_its_files_and_never_follows_a_planted_link(tmp_path, capsys):
    out = tmp_path / "sb"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, out / "comment.md")
    (out / "notes.txt").write_text("mine")
    assert main(["export", "scenario_d", "--storyboard", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / n) for n in ("01-first-violation.png", "02-went-stale.png", "03-assertion.png",
                                              "stale-window.gif", "legend.png", "comment.md")]
    assert victim.read_text() == "keep me"
    assert not (out / "comment.md").is_symlink() and (out / "comment.md").read_text().startswith("### simcache")
    assert (out / "notes.txt").read_text() == "mine"


def test_a_bad_storyboard_folder_is_one_sentence(tmp_path, capsys):
    f = tmp_path / "file.txt"
    f.write_text("x")
    for argv, msg in (([str(f)], f"--storyboard {f} is a file, not a folder; choose another folder"),
                      (["/dev/null"], "--storyboard /dev/null is a character device, not a folder"),
                      ([""], "--storyboard needs a folder name"),
                      ([str(tmp_path / "new"), "-o", "x.html"], "give either -o PAGE or --storyboard DIR, not both")):
        assert main(["export", "scenario_d", "--storyboard", *argv]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "new").exists() and f.read_text() == "x"
