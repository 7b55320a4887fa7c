"""storyboard.py's words: the key moments of a run (one per step, in step order, the first listed winning a shared
step), the files a storyboard holds (at most three pictures), the pull-request comment of one run and of a
comparison (a syrupy snapshot, with what a reviewer must find by hand: the outcome table first, the divergence at
the guard, no caption twice, no false footer), the outcome rows and the refusal of an empty run."""
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
        (len(fixed.trace.steps) - 1, "end",
         "the end: no assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]")]
    quiet = simulate("scenario_d", "merged_fix")
    assert key_moments(quiet) == [(5, "first-violation", "first violation (tier monotonicity): node 7 [1,2] is "
                                                         "evicted but its child node 8 [3] is on device"),
                                  (27, "end", "the end: no assertion; no damage")]


def test_the_outcome_rows(runs):
    _, pr, fixed = runs
    assert _outcome_row(pr) == ("| `pre_fix` | AssertionError: parent does not have child key, 1 (in "
                                "_delete_tombstone_leaf); damage: double free device_kv[0, 1]; leaked host_kv[1, 2] | "
                                "1 | 0 |")
    assert _outcome_row(fixed) == ("| `described_fix` | no assertion; damage: double free device_kv[0, 1]; leaked "
                                   "host_kv[1, 2] | 1 | 1 |")
    flagged = simulate("crash_pr", "pre_fix", flags={"stale_guards": True})
    assert _outcome_row(flagged).startswith("| `pre_fix + stale_guards=true` | ")


def _shape(md: str) -> dict:
    lines = md.splitlines()
    return dict(lines=lines, images=[x for x in lines if x.startswith("![")],
                captions=[x for x in lines if x.startswith("**") and x[2].isdigit()],
                table=next(i for i, x in enumerate(lines) if x.startswith("| preset |")))


def test_the_comment_of_one_run(runs, snapshot):
    files = storyboard_files(runs[0])
    assert sorted(files) == ["1-went-stale.png", "2-end.png", "comment.md"]
    assert all(files[n][:8] == b"\x89PNG\r\n\x1a\n" for n in files if n.endswith(".png"))
    md = files["comment.md"]
    assert md == snapshot  # the whole comment (syrupy; review an intended change with --snapshot-update)
    shape = _shape(md)
    assert shape["lines"][0].startswith("<!--") and shape["lines"][0].endswith("-->")  # never shows once posted
    assert "drag each picture file" in shape["lines"][0] and "rewrites the links" not in md
    assert shape["table"] == 3  # the outcome table first, right under the heading
    assert shape["images"] == ["![went stale](1-went-stale.png)", "![end](2-end.png)"]
    assert len(set(shape["captions"])) == len(shape["captions"]) == 2


def test_the_comment_of_a_comparison(runs, snapshot):
    _, pr, fixed = runs
    files = storyboard_files(pr, fixed)
    assert sorted(files) == ["1-divergence.png", "2-went-stale.png", "3-end.png", "comment.md"]
    md = files["comment.md"]
    assert md == snapshot
    shape = _shape(md)
    assert shape["table"] == 3 and shape["lines"][5:7] == [_outcome_row(pr), _outcome_row(fixed)]
    assert shape["images"] == ["![divergence](1-divergence.png)", "![went stale](2-went-stale.png)",
                               "![end](3-end.png)"]
    assert shape["captions"][0] == ("**1.** the runs part at operation 11, steps 261 / 261: `_delete_tombstone_leaf` "
                                    "line 98, the `stale_guards` guard, is on in described_fix and off in pre_fix")
    assert "clean" not in md.replace("cleaned up", "") and "survived" not in md
    # no caption is said twice: not in two pictures, not in a picture and the table
    body = "\n".join(shape["captions"])
    assert all(row not in body for row in (_outcome_row(pr), _outcome_row(fixed)))
    assert "Replay: `python -m simcache run crash_pr --preset pre_fix` and `python -m simcache run crash_pr " \
           "--preset described_fix`." in md


def test_an_empty_run_has_nothing_to_draw():
    empty = simulate("scenario_b", schedule="")
    for args in ((empty,), (simulate("scenario_b"), empty)):
        with pytest.raises(ConfigError) as e:
            storyboard_files(*args)
        assert str(e.value) == "this run has no micro-steps to draw; give it at least one operation"
