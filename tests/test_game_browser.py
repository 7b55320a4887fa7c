"""The levels page (``export --game``) in a real headless Chromium: it plays without a kernel or network.

Story: level 2's solution (mem, l3, mem) clicked on the page reaches the assertion; the wrong first move (l3) gets
the dead-end reaction and the hint; level 3's move inside write_backup stops at its first point and only its own
actor stays enabled. Like test_export_browser.py, it needs /usr/bin/chromium.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import expect
from test_export_browser import browser, open_page  # noqa: F401 -- the module's browser fixture

from simcache.game_map import game_page

pytestmark = pytest.mark.browser


def test_the_levels_page_plays_offline(browser, tmp_path):  # noqa: F811
    path = game_page(tmp_path / "game.html", [2, 3])
    page = open_page(browser, path)
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(page.locator("#title")).to_have_text("Level 2: A: a tombstone kept alive by a host reference")
    page.click("#actor-l3")
    expect(page.locator("#said")).to_have_text("From here no order of the remaining moves reaches the assertion: "
                                               "undo, or ask for a hint.")
    for _ in range(3):
        page.click("#hint")
    expect(page.locator("#hint-text")).to_have_text("Hint: No order of the remaining moves reaches the assertion "
                                                    "from here: undo.")
    page.click("#undo")
    for actor in ("mem", "l3", "mem"):
        page.click(f"#actor-{actor}")
    expect(page.locator("#status")).to_contain_text("You made the cache reach the assertion: AssertionError: parent "
                                                    "does not have child key, 1")
    expect(page.locator("#tree svg")).to_have_count(1)
    page.select_option("#level", "1")
    expect(page.locator("#title")).to_contain_text("Level 3: B")
    for actor in ("A", "B", "mem"):
        page.click(f"#actor-{actor}")
    page.check("#inside")
    page.click("#actor-mem")
    expect(page.locator("#status")).to_contain_text("Inside mem's operation, point 1 of")
    expect(page.locator("#actor-C")).to_be_disabled()
    expect(page.locator("#actor-mem")).to_be_enabled()
    page.screenshot(path=str(tmp_path / "game.png"))
    assert page.errors == [] and page.remote == []
