"""The storyboard for a PR comment (issue 17 part 4, issue 40 §4): at most three PNGs and a comment.md, written
under safe_io's rules.

Story: scenario A under pre_fix gives two pictures (went stale, the end) 860 px wide and a comment with the
outcome table first; with --compare the divergence comes first, side by side with both runs' code at the guard.
A planted symlink in DIR is moved aside, never followed; a file, a device or an empty name as DIR is one sentence
and exit status 2, and nothing is written.
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
    assert sorted(written) == ["1-went-stale.png", "2-end.png", "comment.md"]
    for name in ("1-went-stale.png", "2-end.png"):
        img = Image.open(written[name])
        assert img.format == "PNG" and img.width == WIDTH and 300 < img.height < 1400
    md = written["comment.md"].read_text()
    links = [line for line in md.splitlines() if line.startswith("![")]
    assert links == ["![went stale](1-went-stale.png)", "![end](2-end.png)"]
    assert ("| `pre_fix` | AssertionError: parent does not have child key, 1 (in _evict_host_leaf) | 1 | 0 |") in md


def test_compare_shows_the_divergence_side_by_side_and_never_says_clean():
    files = storyboard_files(simulate("scenario_a", "pre_fix"), simulate("scenario_a", "followup_fix"))
    assert sorted(files) == ["1-divergence.png", "2-went-stale.png", "3-end.png", "comment.md"]
    md = files["comment.md"]
    assert "| `followup_fix` | no assertion; no damage | 0 | 0 |" in md
    assert "`_iteratively_delete_tombstone_leaf` line 116, the `cascade_respects_host_refs` guard, is on in " \
           "followup_fix and off in pre_fix" in md
    side = Image.open(io.BytesIO(files["1-divergence.png"]))
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
    assert printed == [str(out / n) for n in ("1-went-stale.png", "2-end.png", "comment.md")]
    assert victim.read_text() == "keep me"
    assert not (out / "comment.md").is_symlink() and (out / "comment.md").read_text().startswith("<!-- simcache")
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
