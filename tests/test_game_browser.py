"""The levels page (``export --game``) in a real headless Chromium: it plays without a kernel or network.

Story: level 2's solution (mem, l3, mem) clicked on the page reaches the assertion, and the win is a success (green,
"You won", the level's two-sentence why), not an error; the wrong first move (l3) gets the dead-end reaction and
the hint; level 3's move inside write_backup stops at its first point and only its own actor stays enabled.
Levels 4 and 5 hold every reachable state: 30 random games each, clicked to their end, never leave the page's map,
every state is drawn (by the bundled Graphviz engine), and what the page says after a random game is what the
notebook's ``SchedulerGame`` says after the same moves. Like test_export_browser.py, it needs /usr/bin/chromium.
Screenshots go to ``test-artifacts/``.
"""
from __future__ import annotations

import random

import pytest
from conftest import prebuilt
from playwright.sync_api import expect
from test_export_browser import browser, open_page  # noqa: F401 -- the module's browser fixture
from views_helpers import ARTIFACTS

from simcache.game import SchedulerGame
from simcache.game_levels import level
from simcache.game_map import game_page

pytestmark = pytest.mark.browser
GREEN = "rgb(22, 163, 74)"


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
    expect(page.locator("#status")).to_have_class("win")
    expect(page.locator("#status")).to_have_css("border-left-color", GREEN)  # a success, not an error
    expect(page.locator("#why")).to_have_text(level(2).why)
    expect(page.locator("#tree svg")).to_have_count(1)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "game_win.png"), full_page=True)
    page.select_option("#level", "1")
    expect(page.locator("#title")).to_contain_text("Level 3: B")
    expect(page.locator("#why")).to_have_text("")
    for actor in ("A", "B", "mem"):
        page.click(f"#actor-{actor}")
    page.check("#inside")
    page.click("#actor-mem")
    expect(page.locator("#status")).to_contain_text("Inside mem's operation, point 1 of")
    expect(page.locator("#actor-C")).to_be_disabled()
    expect(page.locator("#actor-mem")).to_be_enabled()
    page.screenshot(path=str(tmp_path / "game.png"))
    assert page.errors == [] and page.remote == []


@pytest.fixture(scope="module")
def big_page(request, tmp_path_factory):
    """Levels 4 and 5, every state (built once per session, through the cache folder, in the background from the
    start of the session: conftest.py); the page stays under 3.2 MB."""
    for number in (4, 5):
        prebuilt(request.config, number)
    path = game_page(tmp_path_factory.mktemp("game") / "game.html", [4, 5])
    assert path.stat().st_size < 3_200_000
    return path


@pytest.mark.parametrize("index, number", [(0, 4), (1, 5)])
def test_random_games_never_leave_the_page(browser, big_page, index, number):  # noqa: F811
    page = open_page(browser, big_page)
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    page.select_option("#level", str(index))
    expect(page.locator("body")).to_have_attribute("data-level", str(number))
    rng = random.Random(number)
    ends, compared = [], 0
    for game in range(30):
        page.click("#reset")
        expect(page.locator("body")).to_have_attribute("data-turns", "")
        inside = number == 5 and game % 3 == 0  # some games step inside write_backup / evict_host where they can
        page.set_checked("#inside", inside)
        while True:
            enabled = page.locator("#actors button:enabled")
            if enabled.count() == 0:
                break
            if page.locator("#next-point").is_enabled():
                page.click("#next-point")
                continue
            enabled.nth(rng.randrange(enabled.count())).click()
            said = page.locator("#said").inner_text()
            assert "outside" not in said and "part of this level" not in said
            expect(page.locator("#tree svg")).to_have_count(1)
        turns = page.get_attribute("body", "data-turns").split()
        ends.append(page.get_attribute("body", "data-outcome"))
        if game % 6 == 0:  # what the notebook's game says after the same moves
            live = SchedulerGame.from_level(number, widgets=False)
            for a in turns:
                live.pick(a)
            status = page.locator("#status").inner_text()
            assert status == live.message().split(" Why: ")[0], turns
            compared += 1
    assert compared == 5 and set(ends) <= {"win", "crash", "dead", "open"}
    assert len(ends) == 30 and ("dead" in ends or "crash" in ends)  # random play rarely wins: it goes far off
    page.screenshot(path=str(ARTIFACTS / f"game_level{number}_random.png"), full_page=True)
    assert page.errors == [] and page.remote == []


def test_the_solution_of_level_5_wins_with_its_why(browser, big_page):  # noqa: F811
    page = open_page(browser, big_page)
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    page.select_option("#level", "1")
    for actor in "pf R2 pf R4 mem R6 ctl ctl ctl ctl mem R7".split():
        page.click(f"#actor-{actor}")
    expect(page.locator("body")).to_have_attribute("data-outcome", "win")
    expect(page.locator("#status")).to_contain_text("parent does not have child key, 1 (in _delete_tombstone_leaf)")
    expect(page.locator("#why")).to_have_text(level(5).why)
    expect(page.locator("#tree-note")).to_have_text("")  # drawn from this very schedule
    page.screenshot(path=str(ARTIFACTS / "game_level5_win.png"), full_page=True)
    assert page.errors == [] and page.remote == []
