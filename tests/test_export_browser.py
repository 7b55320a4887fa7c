"""The exported HTML page of scenario C, opened in a real headless Chromium (Debian's, via Playwright).

Story: the page needs no network; its first frame is step 0; "next" moves one micro-step; "went stale" jumps to
the step where node #8 went stale, and the tree's SVG then holds node #8 with the ``went-stale`` class;
"assertion" jumps to the last step; the keyboard arrows step; a side-by-side page marks the first divergence
(operation 9). Screenshots go to ``test-artifacts/``. Without /usr/bin/chromium these tests FAIL (they do not
skip): the browser is part of the project's set-up (see SETUP_NOTES).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from views_helpers import ARTIFACTS, run_c, story

from simcache.export import export_html, frame_steps

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
S = story()
STALE_STEP, CRASH_STEP = S["stale"], S["crash"]


@pytest.fixture(scope="module")
def browser():
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install -y chromium (see SETUP_NOTES.md)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def open_page(browser, path: Path):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.errors, page.remote = [], []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.route("**/*", lambda route: (page.remote.append(route.request.url), route.abort())
               if not route.request.url.startswith("file:") else route.continue_())
    page.goto(path.as_uri())
    return page


def frame_no(page) -> int:
    return int(page.get_attribute("body", "data-frame"))


def step_no(page) -> int:
    return int(page.get_attribute("body", "data-step"))


def test_exported_page_is_self_contained_and_steps(browser, tmp_path):
    path = export_html(run_c(), tmp_path / "c.html")
    html = path.read_text()
    assert html.count("<script") == 2 and "src=" not in html and 'href="http' not in html
    assert len(frame_steps(run_c().trace)) == CRASH_STEP + 1  # short trace: every micro-step is a frame
    assert path.stat().st_size < 3_000_000
    page = open_page(browser, path)
    assert frame_no(page) == 0 and f"step 0/{CRASH_STEP}" in page.inner_text("#run0 .caption")
    page.click("#btn-next")
    assert frame_no(page) == 1
    ops = run_c().trace.ops
    page.click("#btn-next-op")  # to the state after the current operation, then after the next one
    assert step_no(page) == ops[0].last_step
    page.click("#btn-next-op")
    assert step_no(page) == ops[1].last_step
    page.click("#btn-prev-op")
    assert step_no(page) == ops[0].last_step
    page.click("#jump-went-stale")
    assert step_no(page) == STALE_STEP
    stale = page.locator("#run0 .tree g.went-stale")
    assert stale.count() == 1 and stale.get_attribute("id") == "n8"
    assert "WENT STALE" in stale.text_content()
    assert page.locator("#run0 .tree g.focus").count() == 1
    assert f"went stale at step {STALE_STEP}" in page.inner_text("#explanation")
    assert "write_backup()" in page.inner_text("#panels")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "export_went_stale.png"))
    page.keyboard.press("ArrowRight")
    assert step_no(page) == STALE_STEP + 1
    page.keyboard.press("ArrowLeft")
    assert step_no(page) == STALE_STEP
    page.click("#jump-assertion")
    assert step_no(page) == CRASH_STEP and page.locator("#run0 .tree g.assertion").count() == 1
    assert page.is_disabled("#jump-cleaned-up")
    x = page.get_attribute("#run0 .tl-cursor", "x1")
    page.click("#btn-first")
    assert frame_no(page) == 0 and page.get_attribute("#run0 .tl-cursor", "x1") != x
    page.screenshot(path=str(ARTIFACTS / "export_first.png"))
    assert page.errors == [] and page.remote == []


def test_side_by_side_page_marks_the_divergence(browser, tmp_path):
    path = export_html(run_c("pre_fix"), tmp_path / "cmp.html", compare=run_c("described_fix"))
    page = open_page(browser, path)
    assert page.locator("section.run").count() == 2
    assert "First divergence: operation 9" in page.inner_text("#divergence")
    page.click("#jump-went-stale")
    assert page.locator("#run0 .tree g.went-stale").count() == 1
    assert page.locator("#run1 .tree g.went-stale").count() == 1
    page.click("#btn-divergence")
    assert "diverged" in page.get_attribute("#run0", "class")
    page.click("#btn-last")
    assert page.locator("#run1 .tree g.cleaned-up").count() == 1
    page.screenshot(path=str(ARTIFACTS / "export_compare.png"))
    assert page.errors == [] and page.remote == []
