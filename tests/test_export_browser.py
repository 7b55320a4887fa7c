"""The exported HTML page of scenario C, opened in a real headless Chromium (Debian's, via Playwright).

Story: the page needs no network; its first frame is step 0; "next" moves one micro-step; "went stale" jumps to
the step where node #8 went stale, and the tree's SVG then holds node #8 with the ``went-stale`` class;
"assertion" jumps to the last step; the keyboard arrows step; a side-by-side page marks the first divergence
(operation 9). Screenshots go to ``test-artifacts/``. Without /usr/bin/chromium these tests FAIL (they do not
skip): the browser is part of the project's set-up (see SETUP_NOTES).

After every click or key press the test waits for the condition it expects (Playwright's ``expect``, re-checked
until it holds) with a budget scaled for a loaded machine (``waits.py``), never reading the page right after
the event: on a busy 2-core machine the page may update a moment later.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from views_helpers import ARTIFACTS, run_c, story
from waits import UI_S, budget_ms

from simcache.export import export_html, frame_steps, page_data

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
    page.set_default_timeout(budget_ms(UI_S))
    expect.set_options(timeout=budget_ms(UI_S))
    page.errors, page.remote = [], []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.route("**/*", lambda route: (page.remote.append(route.request.url), route.abort())
               if not route.request.url.startswith("file:") else route.continue_())
    page.goto(path.as_uri())
    return page


def at_frame(page, n: int) -> None:
    expect(page.locator("body")).to_have_attribute("data-frame", str(n))


def at_step(page, n: int) -> None:
    expect(page.locator("body")).to_have_attribute("data-step", str(n))


def test_exported_page_is_self_contained_and_steps(browser, tmp_path):
    path = export_html(run_c(), tmp_path / "c.html")
    html = path.read_text()
    assert html.count("<script") == 2 and "src=" not in html and 'href="http' not in html
    assert len(frame_steps(run_c().trace)) == CRASH_STEP + 1  # short trace: every micro-step is a frame
    assert path.stat().st_size < 3_000_000
    page = open_page(browser, path)
    at_frame(page, 0)
    expect(page.locator("#pos")).to_have_text(f"step 0 of {CRASH_STEP}")  # one counter
    expect(page.locator("#run0 .caption")).to_have_text(re.compile(r"^Op 0 \(.*\): The operation begins\.$"))
    page.click("#btn-next")
    at_frame(page, 1)
    ops = run_c().trace.ops
    page.click("#btn-next-op")  # to the state after the current operation, then after the next one
    at_step(page, ops[0].last_step)
    page.click("#btn-next-op")
    at_step(page, ops[1].last_step)
    page.click("#btn-prev-op")
    at_step(page, ops[0].last_step)
    page.click("#jump-went-stale")
    at_step(page, STALE_STEP)
    stale = page.locator("#run0 .tree g.went-stale")
    expect(stale).to_have_count(1)
    assert stale.get_attribute("id") == "n8"
    assert "WENT STALE" in stale.text_content()
    expect(page.locator("#run0 .tree g.focus")).to_have_count(1)
    expect(page.locator("#explanation")).to_contain_text(f"went stale at step {STALE_STEP}")
    expect(page.locator("#holders")).to_contain_text("write_backup(): node")  # the ledger, beside the code
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "export_went_stale.png"))
    page.keyboard.press("ArrowRight")
    at_step(page, STALE_STEP + 1)
    page.keyboard.press("ArrowLeft")
    at_step(page, STALE_STEP)
    page.click("#jump-assertion")
    at_step(page, CRASH_STEP)
    expect(page.locator("#run0 .tree g.assertion")).to_have_count(1)
    expect(page.locator("#jump-cleaned-up")).to_be_disabled()
    x = page.get_attribute("#run0 .tl-cursor", "x1")
    page.click("#btn-first")
    at_frame(page, 0)
    expect(page.locator("#run0 .tl-cursor")).not_to_have_attribute("x1", x)
    page.screenshot(path=str(ARTIFACTS / "export_first.png"))
    assert page.errors == [] and page.remote == []


def test_side_by_side_page_marks_the_divergence(browser, tmp_path):
    path = export_html(run_c("pre_fix"), tmp_path / "cmp.html", compare=run_c("described_fix"))
    page = open_page(browser, path)
    expect(page.locator("section.run")).to_have_count(2)
    expect(page.locator("#divergence")).to_contain_text("First divergence: operation 9")
    page.click("#jump-went-stale")
    expect(page.locator("#run0 .tree g.went-stale")).to_have_count(1)
    expect(page.locator("#run1 .tree g.went-stale")).to_have_count(1)
    page.click("#btn-divergence")
    expect(page.locator("#run0")).to_have_class(re.compile(r"\bdiverged\b"))
    # the divergent step itself (where the guard decides), inside the divergent operation, not its last frame
    data = page_data(run_c("pre_fix"), compare=run_c("described_fix"))
    frames = data["runs"][0]["frames"]
    at = data["divergence_frame"]
    assert frames[at]["op"] == 9 and frames[at + 1]["op"] == 9 and frames[at]["step"] == 203
    expect(page.locator("#slider")).to_have_value(str(at))
    page.click("#btn-last")
    expect(page.locator("#run1 .tree g.cleaned-up")).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "export_compare.png"))
    assert page.errors == [] and page.remote == []


def test_clicking_the_timeline_goes_to_that_operation_or_moment(browser, tmp_path):
    """One listener per lane answers every block's click (a long run's lane has thousands of them)."""
    path = export_html(run_c(), tmp_path / "c.html")
    page = open_page(browser, path)
    at_frame(page, 0)
    ops = run_c().trace.ops
    expect(page.locator('#run0 g.tl-op[data-op="5"]')).to_have_css("cursor", "pointer")
    page.locator('#run0 g.tl-op[data-op="5"]').click()
    at_step(page, ops[5].first_step)
    page.locator("#run0 g.tl-moment.tl-went-stale").first.click()
    at_step(page, STALE_STEP)
    expect(page.locator("#run0 .tree g.went-stale")).to_have_count(1)
    page.locator("#run0 .timeline text").first.click()  # not a block: the frame stays
    at_step(page, STALE_STEP)
    assert page.errors == [] and page.remote == []


def test_a_packed_page_shows_the_same_frames_with_or_without_uint8array_frombase64(browser, tmp_path, monkeypatch):
    """A long run's page (here scenario C forced past ``DOT_LIMIT``) decodes its block with
    ``Uint8Array.fromBase64`` where the browser has it, byte by byte where not; both show the same frames."""
    import simcache.export as export

    monkeypatch.setattr(export, "DOT_LIMIT", 0)
    path = export_html(run_c(), tmp_path / "packed.html")
    assert 'data-encoding="gzip-base64"' in path.read_text()
    seen = []
    for older in (False, True):
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(budget_ms(UI_S))
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))  # noqa: B023
        if older:
            page.add_init_script("delete Uint8Array.fromBase64;")
        page.goto(path.as_uri())
        at_frame(page, 0)
        assert page.evaluate("() => typeof Uint8Array.fromBase64") == ("undefined" if older else "function")
        page.click("#jump-went-stale")
        at_step(page, STALE_STEP)
        expect(page.locator("#run0 .tree g.went-stale")).to_have_count(1)
        seen.append((page.inner_html("#run0 .tree"), page.inner_html("#holders"), page.inner_html("#code"),
                     page.inner_html("#stack"), page.text_content("#run0 .caption")))
        assert errors == []
        page.close()
    assert seen[0] == seen[1] and "WENT STALE" in seen[0][0] and "write_backup()" in seen[0][1]
