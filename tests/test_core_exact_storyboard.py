"""storyboard.py's words compared whole: the key moments of a run (one per step, in step order, the first listed
winning a shared step), the files a storyboard holds, the pull-request comment of one run and of a comparison
(each picture's caption said once when both runs agree), the outcome rows and the refusal of an empty run."""
from __future__ import annotations

import pytest

from simcache import simulate
from simcache.errors import ConfigError
from simcache.storyboard import _outcome_row, key_moments, storyboard_files

STALE_A = ("node #7 [1,2] went stale: detached by _delete_tombstone_leaf, called from "
           "_iteratively_delete_tombstone_leaf <- _evict_host_leaf <- evict_host while ongoing_backup still held it")
STALE_PR = ("node #8 [1,2] went stale: detached by _delete_tombstone_leaf, called from "
            "_iteratively_delete_tombstone_leaf <- _evict_host_leaf <- evict_host <- ... while _inc_hit_count(), which "
            "resumes after evict_host, write_backup(), which resumes after evict_host, and the insert loop "
            "(_insert_helper's `node`) still held it")


@pytest.fixture(scope="module")
def runs():
    return (simulate("scenario_a", "pre_fix"), simulate("crash_pr", "pre_fix"), simulate("crash_pr", "described_fix"))


def test_key_moments(runs):
    a, pr, fixed = runs
    assert key_moments(a) == [  # the first violation shares step 22 with the stale node: the stale node wins
        (22, "went-stale", STALE_A),
        (31, "readmitted", "node #7 [1,2] re-admitted while detached: re-admitted to evictable_full_host_leaves"),
        (38, "assertion", "the assertion: AssertionError: parent does not have child key, 1 (in _evict_host_leaf)")]
    assert key_moments(fixed) == [
        (49, "first-violation", "first violation (backup continuity): node 9 [9,9] is backed up but its parent node "
                                "8 [1,2] is not"),
        (122, "went-stale", STALE_PR),
        (124, "readmitted", "node #8 [1,2] re-admitted while detached: re-admitted to ongoing_write_through"),
        (262, "cleaned-up", "node #8 [1,2] cleaned up by a guard: stale node in _delete_tombstone_leaf"),
        (len(fixed.trace.steps) - 1, "end", "the end: the cache survived")]
    quiet = simulate("scenario_d", "merged_fix")
    assert key_moments(quiet) == [(5, "first-violation", "first violation (tier monotonicity): node 7 [1,2] is "
                                                         "evicted but its child node 8 [3] is on device"),
                                  (27, "end", "the end: the cache survived")]


def test_the_outcome_rows(runs):
    _, pr, fixed = runs
    assert _outcome_row(pr) == ("| `pre_fix` | `AssertionError: parent does not have child key, 1` in "
                                "`_delete_tombstone_leaf` | 1 | 0 | device_kv: [0, 1] | host_kv: [1, 2] |")
    assert _outcome_row(fixed) == "| `described_fix` | clean | 1 | 1 | device_kv: [0, 1] | host_kv: [1, 2] |"
    assert _outcome_row(simulate("scenario_d", "merged_fix")) == "| `merged_fix` | clean | 0 | 0 | none | none |"


def test_the_comment_of_one_run(runs):
    files = storyboard_files(runs[0])
    assert sorted(files) == ["01-went-stale.png", "02-readmitted.png", "03-assertion.png", "comment.md", "legend.png",
                             "stale-window.gif"]
    assert all(files[n][:8] == b"\x89PNG\r\n\x1a\n" for n in files if n.endswith(".png"))
    assert files["stale-window.gif"][:6] == b"GIF89a"
    assert files["comment.md"] == "\n".join([
        "### simcache: `scenario_a` under `pre_fix`", "",
        "Schedule: `mem l3 mem` (replay: `python -m simcache run scenario_a --preset pre_fix --schedule 'mem l3 "
        "mem'`).", "",
        f"**1.** {STALE_A}", "", "![1. went stale](01-went-stale.png)", "",
        "**2.** node #7 [1,2] re-admitted while detached: re-admitted to evictable_full_host_leaves", "",
        "![2. readmitted](02-readmitted.png)", "",
        "**3.** the assertion: AssertionError: parent does not have child key, 1 (in _evict_host_leaf)", "",
        "![3. assertion](03-assertion.png)", "",
        "**The stale window**, one operation per frame:", "", "![the stale window](stale-window.gif)", "",
        "<details><summary>legend</summary>", "", "![legend](legend.png)", "", "</details>", "",
        "| preset | outcome | went stale | cleaned up | double-freed slots | leaked slots |",
        "|---|---|---|---|---|---|",
        "| `pre_fix` | `AssertionError: parent does not have child key, 1` in `_evict_host_leaf` | 1 | 0 | none "
        "| none |",
        "", "<sub>Drawn by simcache (`simcache export SCENARIO --storyboard DIR`). Drag the images into the comment "
        "box; GitHub uploads them and rewrites the links.</sub>", ""])


def test_the_comment_of_a_comparison(runs):
    _, pr, fixed = runs
    files = storyboard_files(pr, fixed)
    assert sorted(files) == ["01-first-violation.png", "02-went-stale.png", "03-readmitted.png", "04-assertion.png",
                             "05-end.png", "comment.md", "legend.png", "stale-window.gif"]
    lines = files["comment.md"].splitlines()
    assert lines[:3] == ["### simcache: `crash_pr` under `pre_fix` vs `described_fix`", "",
                         "Schedule: `pf R2 pf R4 mem R6 ctl*4 mem R7` (replay: `python -m simcache run crash_pr "
                         "--preset pre_fix --schedule 'pf R2 pf R4 mem R6 ctl*4 mem R7'`; the same with `--preset "
                         "described_fix`)."]
    assert [x for x in lines if x.startswith("**") and x[2].isdigit()] == [
        "**1.** pre_fix and described_fix: first violation (backup continuity): node 9 [9,9] is backed up but its "
        "parent node 8 [1,2] is not",
        f"**2.** pre_fix and described_fix: {STALE_PR}",
        "**3.** pre_fix and described_fix: node #8 [1,2] re-admitted while detached: re-admitted to "
        "ongoing_write_through",
        "**4.** pre_fix: the assertion: AssertionError: parent does not have child key, 1 (in _delete_tombstone_leaf) "
        "| described_fix: node #8 [1,2] cleaned up by a guard: stale node in _delete_tombstone_leaf",
        "**5.** described_fix: the end: the cache survived"]
    assert [x for x in lines if x.startswith("![")][:5] == [
        "![1. first violation](01-first-violation.png)", "![2. went stale](02-went-stale.png)",
        "![3. readmitted](03-readmitted.png)", "![4. assertion](04-assertion.png)", "![5. end](05-end.png)"]
    assert lines[lines.index("|---|---|---|---|---|---|") + 1:][:2] == [_outcome_row(pr), _outcome_row(fixed)]


def test_an_empty_run_has_nothing_to_draw():
    empty = simulate("scenario_b", schedule="")
    for args in ((empty,), (simulate("scenario_b"), empty)):
        with pytest.raises(ConfigError) as e:
            storyboard_files(*args)
        assert str(e.value) == "this run has no micro-steps to draw; give it at least one operation"
