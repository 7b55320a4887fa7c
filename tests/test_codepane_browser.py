"""The code pane and the tour in an exported page, in a real headless Chromium (issue #17).

Story: crash_pr under pre_fix exported with its tour. The page opens on stop 1's question with the frame just before
the first violation; stop 2 ("It goes stale") shows step 121 until answered; a wrong answer locks that choice and
gives its hint, the right one marks itself green, explains, and reveals step 122, where #8 goes stale. There the code
pane's open frame is ``_delete_tombstone_leaf`` with the pop highlighted, nine frames on the stack, each with its
SGLang location at e9d6b9eb; pointing at the ``#8`` link outlines node #8 in the tree (CSS ``:has``, no script),
and only node #8. Screenshots go to ``test-artifacts/``.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect
from test_export_browser import CHROMIUM, at_step, browser, open_page  # noqa: F401 -- browser is a fixture
from views_helpers import ARTIFACTS

from simcache import simulate
from simcache.export import export_html
from simcache.render.moments import moments
from simcache.tour import TourModel

pytestmark = pytest.mark.browser
FILTER = "(el) => getComputedStyle(el).filter"


def test_code_pane_and_tour_stop_in_the_export(browser, tmp_path):  # noqa: F811
    assert Path(CHROMIUM).exists()
    run = simulate("crash_pr", "pre_fix")
    stops = TourModel("crash_pr", run).steps
    stale = moments(run.trace)["went-stale"][0]
    assert stops[1] == stale
    page = open_page(browser, export_html(run, tmp_path / "tour.html", tour="crash_pr"))
    at_step(page, stops[0] - 1)
    expect(page.locator("#tour-q")).to_contain_text("Stop 1 of 8: The first broken invariant")
    expect(page.locator("#tour-next")).to_be_disabled()  # answer first
    page.locator("#tour-choices button", has_text="backup continuity").click()
    at_step(page, stops[0])
    page.click("#tour-next")
    at_step(page, stale - 1)  # the question first, over the frame before the stop
    expect(page.locator("#tour-q")).to_contain_text("Who still holds #8?")
    expect(page.locator("#tour-feedback")).to_have_text("Choose an answer to reveal the frame.")
    page.locator("#tour-choices button", has_text="nothing: it is gone").click()  # wrong: a hint, another try
    expect(page.locator("body")).to_have_attribute("data-tour-answered", "wrong")
    expect(page.locator("#tour-feedback")).to_have_text(
        "Not quite. Hint: Deleting a node from its parent's children does not change what the callers on the stack "
        "hold. Try again.")
    at_step(page, stale - 1)
    page.locator("#tour-choices button", has_text="write_backup(), _inc_hit_count()").click()
    at_step(page, stale)
    expect(page.locator("#tour-feedback")).to_contain_text("Right, at try 2: “write_backup()")
    expect(page.locator("#tour-choices button.right")).to_have_count(1)
    expect(page.locator("#tour-choices button.wrong")).to_have_count(1)
    assert page.locator("#tour-choices button:enabled").count() == 0
    expect(page.locator("#run0 .caption")).to_contain_text("goes stale here")

    code = page.locator("#code")
    expect(code.locator("details.sc-cframe")).to_have_count(9)
    top = code.locator("details[open]")
    expect(top).to_have_count(1)
    assert top.get_attribute("data-function") == "_delete_tombstone_leaf"
    expect(top.locator(".sc-cur")).to_contain_text("parent = self._pop_from_parent(node)")
    expect(top.locator("summary")).to_contain_text("mirrors hi_mamba_radix_cache.py:599 @ e9d6b9eb")
    expect(top.locator(".sc-fixtag").first).to_contain_text("fix: stale_guards (off in pre_fix)")
    node8, node9 = page.locator('#run0 svg g[id="n8"]'), page.locator('#run0 svg g[id="n9"]')
    assert "245, 158, 11" not in node8.evaluate(FILTER)  # #8 is the step's focus (blue), not outlined
    top.locator('a.sc-node[data-node="8"]').hover()
    expect(node8).to_have_css("filter", "drop-shadow(rgb(245, 158, 11) 0px 0px 6px)")
    assert node9.evaluate(FILTER) == "none"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "export_tour_codepane.png"))
    page.mouse.move(0, 0)
    expect(node8).not_to_have_css("filter", "drop-shadow(rgb(245, 158, 11) 0px 0px 6px)")
    page.click("#tour-next")
    at_step(page, stops[2] - 1)  # the re-entrancy: evict_host returns into write_backup
    page.locator("#tour-choices button", has_text="the node the cascade has just detached").click()
    at_step(page, stops[2])
    expect(page.locator("#tour-feedback")).to_contain_text("Right. write_backup called evict_host")
    expect(page.locator("#tour-score")).to_have_text("Score: 2 of 3 answered right at the first try (8 stops in all).")
    assert page.errors == [] and page.remote == []
