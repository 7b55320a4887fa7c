"""A tour on an exported page, in a real headless Chromium (issue #40 §5): it teaches, and gives nothing away.

Story: crash_pr's tour on its page. The choices come in the tour's shuffled order, the same on every build (the
seed is in the tour file), and the right one is not always in one place. While stop 1's question is open, neither
``step ▶``, ``last``, the End key, the slider nor a click on the timeline's last operation goes past the frame
before it; the jump buttons are hidden and the timeline shows no moment past it; the header does not name the
outcome. A wrong pick is locked and gets its hint, and the learner tries again; the right one reveals the stop and
opens "next stop". Giving up ("show the answer") reveals without scoring. At the end the score is the stops right
at the first try and the whole run is open. Screenshots go to ``test-artifacts/`` (and are looked at).
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from test_export_browser import at_step, browser, open_page  # noqa: F401 -- browser is a fixture
from views_helpers import ARTIFACTS

from simcache import simulate
from simcache.export import export_html
from simcache.tour import TourModel

pytestmark = pytest.mark.browser


def shown_choices(page) -> list[str]:
    return page.locator("#tour-choices button").all_inner_texts()


def test_the_tour_shuffles_hints_retries_scores_and_hides_the_outcome(browser, tmp_path):  # noqa: F811
    run = simulate("crash_pr", "pre_fix")
    model = TourModel("crash_pr", run)
    page = open_page(browser, export_html(run, tmp_path / "tour.html", tour="crash_pr"))
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    at_step(page, model.steps[0] - 1)
    first = shown_choices(page)
    assert first == [f"{'ABC'[i]}. {c.text}" for i, c in enumerate(model.choices)]
    assert first[1].startswith("B. backup continuity")  # the right answer is not A here
    # the same tour, built again: the same order
    again = open_page(browser, export_html(run, tmp_path / "again.html", tour="crash_pr"))
    expect(again.locator("body")).to_have_attribute("data-ready", "1")
    assert shown_choices(again) == first
    again.close()

    # nothing past the open question: step, last, End, the slider, the timeline's last block
    before = str(model.steps[0] - 1)
    for act in (lambda: page.click("#btn-next"), lambda: page.click("#btn-last"),
                lambda: page.keyboard.press("End"), lambda: page.keyboard.press("ArrowDown"),
                lambda: page.locator("#slider").fill("200"),
                lambda: page.locator("#run0 .timeline g.tl-op").last.click(force=True)):
        act()
        expect(page.locator("body")).to_have_attribute("data-step", before)
    assert not page.locator(".jumps").is_visible()
    header = page.locator("body > p").all_inner_texts()
    assert any("the outcome is for the tour to reveal" in p for p in header)
    assert not any("AssertionError" in p or "assertion" in p for p in header)
    expect(page.locator("#run0 .timeline svg > text").first).to_have_text("pre_fix")
    expect(page.locator("#run0 .timeline g.tl-moment:visible")).to_have_count(0)  # the violation is the answer
    expect(page.locator("#tour-next")).to_be_disabled()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "tour_question.png"))

    # a wrong pick: its hint, locked, another try; the frame stays before the stop
    page.locator("#tour-choices button").nth(0).click()
    expect(page.locator("#tour-feedback")).to_have_text(f"Not quite. Hint: {model.choices[0].hint} Try again.")
    expect(page.locator("#tour-choices button").nth(0)).to_be_disabled()
    expect(page.locator("#tour-choices button").nth(1)).to_be_enabled()
    at_step(page, model.steps[0] - 1)
    page.screenshot(path=str(ARTIFACTS / "tour_hint.png"))
    page.locator("#tour-choices button").nth(1).click()
    at_step(page, model.steps[0])
    expect(page.locator("#tour-feedback")).to_have_text(re.compile(r"^Right, at try 2: “backup continuity"))
    expect(page.locator("#tour-score")).to_have_text("Score: 0 of 1 answered right at the first try (8 stops in all).")
    expect(page.locator("#run0 .timeline g.tl-moment:visible")).to_have_count(1)  # now the violation shows
    page.click("#btn-next")  # free to look, up to the frame before stop 2
    at_step(page, model.steps[0] + 1)
    page.click("#btn-last")
    at_step(page, model.steps[1] - 1)

    # the rest: right at the first try, except stop 3 (given up)
    positions = []
    for i in range(1, len(model.tour.stops)):
        page.click("#tour-next")
        expect(page.locator("#tour-q")).to_contain_text(f"Stop {i + 1} of 8")
        at_step(page, model.steps[i] - 1)
        model.go(i - 1)
        model.give_up()
        model.go(i)
        positions.append(model.answer_position)
        if i == 2:
            expect(page.locator("#tour-q")).to_contain_text("evict_host returns. Which node does write_backup resume "
                                                            "with?")
            page.click("#tour-giveup")
            expect(page.locator("#tour-feedback")).to_contain_text("The answer is “#8, the node the cascade has just")
        else:
            page.locator("#tour-choices button").nth(model.answer_position).click()
            expect(page.locator("#tour-feedback")).to_contain_text("Right. ")
        at_step(page, model.steps[i])
    assert len(set(positions)) == 3  # A, B and C all hold right answers somewhere
    expect(page.locator("#tour-score")).to_have_text("Score: 6 of 8 answered right at the first try (8 stops in all). "
                                                     "The tour is over: the whole run is open.")
    assert page.locator(".jumps").is_visible()
    page.click("#btn-first")
    at_step(page, 0)
    page.click("#btn-last")
    at_step(page, len(run.trace.steps) - 1)
    page.click("#tour-prev")  # an answered stop stays answered
    expect(page.locator("#tour-feedback")).to_contain_text("Right. ")
    expect(page.locator("#tour-choices button:enabled")).to_have_count(0)
    page.screenshot(path=str(ARTIFACTS / "tour_done.png"))
    assert page.errors == [] and page.remote == []
