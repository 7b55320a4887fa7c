"""The stale window's GIF (#42 §2 "the storyboard's GIF", the README's first picture): ``simcache.stale_gif``.

Story: in crash_pr node #8 goes stale at operation 5 and stays detached and held until operation 11, where the
tombstone cascade reaches it again; there pre_fix raises the assertion and described_fix's guard cleans it up. The
GIF shows exactly that window, both runs one above the other, each moment named once, every box in place.
"""
from __future__ import annotations

import io
import re

import pytest
from PIL import Image
from views_helpers import overlaps

from simcache import stale_gif
from simcache.errors import ArgumentError
from simcache.render.diverge import divergence_point
from simcache.render.layout import stable
from simcache.simulate import simulate
from simcache.transcript import outcome_words

POS = re.compile(r'^\s*(\w+) \[.*pos="([\d.]+),([\d.]+)!"\];$', re.M)


@pytest.fixture(scope="module")
def runs():
    return simulate("crash_pr", "pre_fix"), simulate("crash_pr", "described_fix")


@pytest.fixture(scope="module")
def frames(runs):
    return stale_gif.stale_window(*runs)


def test_the_window_runs_from_went_stale_through_the_divergence_to_the_assertion_and_the_clean_up(runs, frames):
    a, b = runs
    ta = a.trace
    stale, back, clean = ta.went_stale[0], ta.readmitted[0], b.trace.cleaned_up[0]
    d = divergence_point(a, b)
    crash = len(ta.steps) - 1
    assert d.steps == (crash - 1, crash - 1) and clean.step == crash  # the runs share their steps up to the crash
    op_ends = [o.last_step for o in ta.ops if stale.step < o.last_step < d.steps[0] - 1]
    expected = sorted({stale.step, back.step, *op_ends, d.steps[0] - 1, d.steps[0], crash})
    assert [f.steps for f in frames] == [(s, s) for s in expected] + [(crash, len(b.trace.steps) - 1)]

    first = frames[0]
    assert first.moment == f"#{stale.node} goes stale" and first.ms == stale_gif.KEY_MS
    assert first.lines[0].startswith("Both runs: ") and "goes stale here" in first.lines[0]
    assert first.title == "op 5 · R6: request [1,2,7]"
    at = {f.steps[0]: f for f in frames}
    assert at[back.step].moment == f"detached #{back.node} is re-admitted"
    assert at[d.steps[0]].moment == "the runs part" and [x.split(":")[0] for x in at[d.steps[0]].lines] == \
        ["pre_fix", "described_fix"]
    both = [f for f in frames if f.steps == (crash, crash)][0]
    assert both.moment == f"pre_fix: the assertion · described_fix: the guard cleans #{clean.node} up"
    assert "raises AssertionError" in both.lines[0] and "stale guard cleans up #8" in both.lines[1]
    last = frames[-1]
    assert last.lines == (f"pre_fix: raised at step {crash}: {outcome_words(a)}",
                          f"described_fix: The cache calls dec_lock_ref() on #2. It ends here: {outcome_words(b)}.")
    assert last.moment == "" and last.ms == stale_gif.LAST_MS
    assert [f.ms for f in frames[1:-1]] == [stale_gif.KEY_MS if f.moment else stale_gif.MS for f in frames[1:-1]]
    assert all(f.labels == (f"pre_fix · step {f.steps[0]}", f"described_fix · step {f.steps[1]}") for f in frames)
    assert len(frames) <= stale_gif.MAX_FRAMES


def test_one_run_alone_and_a_run_with_nothing_stale():
    assert stale_gif.stale_window(simulate("scenario_d", "merged_fix")) == []
    with pytest.raises(ValueError, match="no node goes stale"):
        stale_gif.gif([])
    with pytest.raises(ValueError, match="not its frames"):
        stale_gif.gif(["digraph {}"])
    with pytest.raises(ArgumentError, match="stale_window takes a Run"):
        stale_gif.stale_window("crash_pr")
    with pytest.raises(ArgumentError, match="as compare"):
        stale_gif.stale_window(simulate("scenario_a"), compare=3)
    run = simulate("scenario_a", "pre_fix")
    frames = stale_gif.stale_window(run)
    e = run.trace.went_stale[0]
    assert frames[0].steps == (e.step,) and frames[0].moment == f"#{e.node} goes stale"
    assert frames[-1].steps == (len(run.trace.steps) - 1,)
    assert all(len(f.dots) == 1 and not f.lines[0].startswith("Both runs") for f in frames)


def test_boxes_keep_their_place_in_a_stretch_and_between_the_runs_and_never_overlap(frames):
    pinned = stale_gif._stretches([f.dots for f in frames])
    corners = [POS.findall(ds[0])[-1] for ds in pinned]  # _bb1: the stretch's size
    assert len(set(corners)) == 2 and corners[0] == corners[1] != corners[2]  # op 5 (stale, re-admitted) | the rest
    for ds, corner in zip(pinned, corners, strict=True):
        a, b = ({n: (x, y) for n, x, y in POS.findall(d)} for d in ds)
        assert all(a[n] == b[n] for n in a.keys() & b.keys())  # pre_fix above, described_fix below: same places
        assert float(corner[1]) * stale_gif.DPI / 72 * stale_gif.MIN_SCALE <= stale_gif.WIDTH - 16  # legible
    by_stretch: dict[tuple, dict] = {}
    for ds, corner in zip(pinned, corners, strict=True):
        seen = by_stretch.setdefault(corner, {})
        for n, x, y in POS.findall(ds[0]):
            assert seen.setdefault(n, (x, y)) == (x, y), n  # no box moves inside a stretch
    assert not [o for ds in pinned for d in ds for o in overlaps(d)]  # every holders' box beside its node
    # measured (render.layout): the union of the rows-largest labels would put #11's deleting holders' box, wider
    # than it was there, over #10 and #12
    unmeasured = stable([d for f in frames[2:] for d in f.dots], measure=False)
    assert {o for d in unmeasured for o in overlaps(d)} == {("h11", "n10"), ("h11", "n12")}
    # the union of the whole window would not fit: that is why the went-stale frame is a stretch of its own
    assert not stale_gif._fits([d for f in frames for d in f.dots])


def test_the_gif_is_720_pixels_wide_with_one_frame_each_and_their_times(frames):
    data = stale_gif.gif(frames[-3:])
    img = Image.open(io.BytesIO(data))
    assert img.format == "GIF" and img.size[0] == stale_gif.WIDTH == 720 and img.n_frames == 3
    times = []
    for i in range(img.n_frames):
        img.seek(i)
        times.append(img.info["duration"])
    assert times == [f.ms for f in frames[-3:]]
