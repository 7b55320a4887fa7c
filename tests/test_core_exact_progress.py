"""progress.py compared whole: the exact line drawn (bar, counts, extra fields, rate), when it is drawn (the first
update at once, then at most ten a second, the last always), when it is drawn at all, and how it ends."""
from __future__ import annotations

import io
import sys

import pytest

from simcache import progress
from simcache.progress import ProgressBar, progress_for


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def monotonic(self) -> float:
        return self.t


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty, self.flushes = tty, 0

    def isatty(self) -> bool:
        return self.tty

    def flush(self) -> None:
        self.flushes += 1


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress, "time", c)
    return c


def test_a_bar_with_a_total_and_extra_fields(clock):
    out = Stream(tty=False)
    bar = ProgressBar("explore", stream=out, enabled=True, width=10)
    clock.t = 102.0
    bar(dict(runs=250, total=1000, failing=3, found=False))
    assert out.getvalue() == "\rexplore: [##........] 250/1000  failing 3  found False  125/s\033[K"
    assert out.flushes == 1
    bar.close()
    assert out.getvalue().endswith("/s\033[K\n") and out.flushes == 2


def test_without_a_total_the_runs_alone_and_no_extra(clock):
    out = Stream(tty=False)
    bar = ProgressBar("workload", stream=out, enabled=True)
    clock.t = 104.0
    bar(dict(runs=10))
    assert out.getvalue() == "\rworkload: 10 runs    2/s\033[K"
    out.truncate(0), out.seek(0)
    clock.t = 105.0
    bar(dict(runs=12, total=0))  # a zero total draws no bar
    assert out.getvalue() == "\rworkload: 12 runs    2/s\033[K"
    out.truncate(0), out.seek(0)
    clock.t = 106.0
    bar({})
    assert out.getvalue() == "\rworkload: 0 runs    0/s\033[K"


def test_the_bar_fills_by_whole_cells_and_never_past_its_width(clock):
    out = Stream(tty=False)
    bar = ProgressBar("x", stream=out, enabled=True, width=4)
    lines = []
    for done in (0, 1, 2, 3, 4, 6):
        clock.t += 1
        out.truncate(0), out.seek(0)
        bar(dict(runs=done, total=4))
        lines.append(out.getvalue().split("] ")[0][len("\rx: ["):])
    assert lines == ["....", "#...", "##..", "###.", "####", "####"]
    assert ProgressBar("y", stream=out, enabled=True).width == 30


def test_at_most_ten_draws_a_second_but_the_first_and_the_last_always(clock):
    out = Stream(tty=False)
    bar = ProgressBar("p", stream=out, enabled=True, width=2)
    drawn = []

    def step(dt, runs, total=10):
        clock.t += dt
        before = out.getvalue()
        bar(dict(runs=runs, total=total))
        drawn.append(out.getvalue() != before)

    step(0.0, 1)  # the first, at once (0 s after the start)
    step(0.05, 2)  # too soon
    step(0.0999, 3)  # 0.1499 s after the last draw: drawn
    step(0.0999, 4)  # too soon
    step(0.0002, 5)  # 0.1001 s: drawn
    step(0.01, 10)  # the last: drawn however soon
    step(0.01, 11)  # past the total: drawn too
    assert drawn == [True, False, True, False, True, True, True]
    out2 = Stream(tty=False)
    bar2 = ProgressBar("q", stream=out2, enabled=True)
    bar2(dict(runs=1))
    clock.t += 0.05
    bar2(dict(runs=2))  # no total: throttled
    assert out2.getvalue().count("\r") == 1


def test_the_rate_uses_the_time_since_the_start_and_survives_no_time_at_all(clock):
    out = Stream(tty=False)
    bar = ProgressBar("r", stream=out, enabled=True)
    bar(dict(runs=5))
    assert out.getvalue().endswith("  5000000000/s\033[K")  # 5 runs in 1e-9 s at the least


def test_disabled_draws_nothing_and_closes_with_nothing(clock):
    out = Stream(tty=False)
    bar = ProgressBar("d", stream=out)
    assert bar.enabled is False
    bar(dict(runs=1, total=2))
    bar.close()
    assert (out.getvalue(), out.flushes) == ("", 0)
    tty = Stream(tty=True)
    assert ProgressBar("t", stream=tty).enabled is True
    assert ProgressBar("t", stream=tty, enabled=False).enabled is False
    quiet = ProgressBar("n", stream=tty)
    quiet.close()  # enabled but never drawn: no newline
    assert tty.getvalue() == ""


def test_the_default_stream_is_stderr(monkeypatch):
    fake = Stream(tty=True)
    monkeypatch.setattr(sys, "stderr", fake)
    bar = ProgressBar("e")
    assert bar.stream is fake and bar.enabled is True


def test_progress_for_is_a_bar_on_a_terminal_or_when_asked(monkeypatch):
    monkeypatch.setattr(sys, "stderr", Stream(tty=False))
    assert progress_for("a") is None
    asked = progress_for("a", asked=True)
    assert isinstance(asked, ProgressBar) and asked.enabled and asked.label == "a" and asked.stream is sys.stderr
    monkeypatch.setattr(sys, "stderr", Stream(tty=True))
    tty = progress_for("b")
    assert isinstance(tty, ProgressBar) and tty.enabled and tty.label == "b"


def test_an_update_exactly_a_tenth_of_a_second_later_is_drawn(clock):
    out = Stream(tty=False)
    clock.t = 0.0
    bar = ProgressBar("x", stream=out, enabled=True)
    bar(dict(runs=1))
    clock.t = 0.1  # exactly the pace: drawn, not skipped
    bar(dict(runs=2))
    clock.t = 0.15  # sooner than the pace: skipped
    bar(dict(runs=3))
    assert out.getvalue() == "\rx: 1 runs    1000000000/s\033[K\rx: 2 runs    20/s\033[K"
    assert out.flushes == 2
