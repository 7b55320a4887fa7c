"""One screen per moment, in a real headless Chromium (Debian's, via Playwright) at 1440x900 (#40 §1-§4).

Story: crash_pr's page under pre_fix at "went stale": the caption (one sentence), the tree, the running frame's
code with its ▶ line and the holder ledger's first row are all on the first screen, the legend folded; three
frames' locals point at the detached #8 with arrows, as Python Tutor draws frames to heap objects; the ▶ line is
in its pane at every frame, no source line cut. Side by side with described_fix, "first divergence" lands on the
step where the guard decides, both code panes show it (on in one run, off in the other), and "assertion ↷" after
the left run ended does not crawl. A long page says which micro-steps it left out and gives the ``--ops`` command.
A large tree opens in the focus view, with a switch to show every node.
Screenshots go to ``test-artifacts/``.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import expect
from views_helpers import ARTIFACTS
from waits import UI_S, budget_ms

import simcache.export as export
from simcache.export import export_html
from simcache.simulate import simulate

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
W, H = 1440, 900


@pytest.fixture(scope="module")
def browser():
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install -y chromium (see SETUP_NOTES.md)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("pages")
    pre, fixed = simulate("crash_pr", "pre_fix"), simulate("crash_pr", "described_fix")
    return dict(one=export_html(pre, d / "one.html"), cmp=export_html(pre, d / "cmp.html", compare=fixed))


def open_page(browser, path: Path):
    page = browser.new_page(viewport={"width": W, "height": H})
    page.set_default_timeout(budget_ms(UI_S))
    expect.set_options(timeout=budget_ms(UI_S))
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready]")
    return page


def box(page, selector: str) -> dict:
    return page.locator(selector).first.bounding_box()


def on_screen(page, selector: str) -> bool:
    """The element's box lies inside the 1440x900 window (the page not scrolled)."""
    b = box(page, selector)
    return b is not None and b["y"] >= 0 and b["x"] >= 0 and b["y"] + b["height"] <= H + 0.5 and \
        b["x"] + b["width"] <= W + 0.5


CUR_IN_PANE = """(sel) => {
  const pane = document.querySelector(sel), cur = pane.querySelector('.sc-guard') || pane.querySelector('.sc-cur');
  if (!cur) return 'none';
  const p = pane.getBoundingClientRect(), c = cur.getBoundingClientRect();
  const cut = [...pane.querySelectorAll('pre.sc-src')].some(pre => pre.scrollWidth > pre.clientWidth + 1);
  return (c.top >= p.top - 0.5 && c.bottom <= p.bottom + 0.5 && c.bottom <= window.innerHeight) ? (cut ? 'cut' : 'ok')
    : 'out ' + [c.top, c.bottom, p.top, p.bottom].map(Math.round).join(',');
}"""


def test_one_screen_per_moment_at_1440x900(browser, pages):
    page = open_page(browser, pages["one"])
    page.click("#jump-went-stale")
    expect(page.locator("body")).to_have_attribute("data-step", "122")
    assert page.evaluate("window.scrollY") == 0
    for sel in ("#run0 .caption", "#run0 .tree svg", "#code .sc-cur", "#holders tr:nth-child(2)", "#pos"):
        assert on_screen(page, sel), sel
    expect(page.locator("#run0 .caption")).to_have_text(re.compile(r"^Op 5 \(R6: request \[1,2,7\]\): #8 \[1,2\] is "
                                                                    r"detached from the root"))
    expect(page.locator("#pos")).to_have_text("step 122 of 262")
    assert page.evaluate(CUR_IN_PANE, "#code") == "ok"
    assert page.locator("details.legend").get_attribute("open") is None  # the legend folds
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "one_screen_went_stale.png"))
    assert page.errors == []


def test_frames_point_at_the_detached_node_with_arrows(browser, pages):
    page = open_page(browser, pages["one"])
    page.click("#jump-went-stale")
    expect(page.locator("body")).to_have_attribute("data-step", "122")
    # the re-entrancy: _insert_helper, _inc_hit_count and write_backup each hold #8 as it leaves the tree
    holders = {page.evaluate("(a) => a.closest('details').dataset.function", a.element_handle())
               for a in page.locator('#code summary a.sc-node[data-node="8"]').all()}
    assert {"_insert_helper", "_inc_hit_count", "write_backup"} <= holders
    arrows = page.locator('#arrows path.a-red[data-node="8"]')
    assert arrows.count() >= 3
    n8 = box(page, '#run0 .tree g[id="n8"]')
    for a in arrows.all():  # each arrow ends on #8's box
        end = [float(x) for x in a.get_attribute("d").split()[-2:]]
        assert n8["x"] - 1 <= end[0] <= n8["x"] + n8["width"] + 1
        assert n8["y"] - 1 <= end[1] <= n8["y"] + n8["height"] + 1
    assert page.errors == []


def test_the_marked_line_is_in_view_at_every_frame_and_never_cut(browser, pages):
    page = open_page(browser, pages["one"])
    n = int(page.get_attribute("#slider", "max")) + 1
    bad = []
    for i in list(range(0, n, 7)) + [n - 1]:
        page.evaluate("(i) => { const s = document.getElementById('slider'); s.value = String(i); "
                      "s.dispatchEvent(new Event('input')); }", i)
        expect(page.locator("body")).to_have_attribute("data-frame", str(i))
        got = page.evaluate(CUR_IN_PANE, "#code")
        if got not in ("ok", "none"):
            bad.append((i, got))
        # the ▶ never stands on the recorder's own line
        text = page.locator("#code .sc-cur").first.text_content() if page.locator("#code .sc-cur").count() else ""
        assert "recorder.event" not in text and "self.observer(" not in text, (i, text)
    assert bad == []


def test_compare_shows_both_runs_code_with_the_guard_at_the_divergent_step(browser, pages):
    page = open_page(browser, pages["cmp"])
    page.click("#btn-divergence")
    expect(page.locator("body")).to_have_attribute("data-step", "261")
    expect(page.locator("#divergence")).to_contain_text("_delete_tombstone_leaf line 98, the stale_guards guard")
    for j in (0, 1):
        assert page.locator(f"#run{j} .code .sc-guard").count() == 1
        assert page.evaluate(CUR_IN_PANE, f"#run{j} .code") == "ok", j
        assert on_screen(page, f"#run{j} .code .sc-guard") and on_screen(page, f"#run{j} .tree svg")
    assert "sc-on" not in page.get_attribute("#run0 .code .sc-guard", "class")  # off in pre_fix
    assert "sc-on" in page.get_attribute("#run1 .code .sc-guard", "class")  # on in described_fix
    expect(page.locator("#run1 .code .sc-guard")).to_contain_text("self._stale_guard(node")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare_divergence.png"))
    assert page.errors == []


def test_assertion_jump_does_not_crawl_after_the_left_run_ended(browser, pages):
    page = open_page(browser, pages["cmp"])
    page.click("#jump-assertion")
    frame = page.get_attribute("body", "data-frame")
    assert page.locator("#run0 .tree g.assertion").count() == 1
    for _ in range(3):  # one assertion in the comparison: every further click comes back to it (wraps), never +1
        page.click("#jump-assertion")
        page.wait_for_timeout(50)
        assert page.get_attribute("body", "data-frame") == frame
    assert page.errors == []


@contextmanager
def patched(**values):
    old = {k: getattr(export, k) for k in values}
    for k, v in values.items():
        setattr(export, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(export, k, v)


def test_a_long_page_says_what_it_left_out_and_how_to_get_it(browser, tmp_path):
    with patched(MICRO_LIMIT=50):  # crash_pr's 263 micro-steps count as long: operation ends and moments only
        path = export_html(simulate("crash_pr", "pre_fix"), tmp_path / "long.html")
    page = open_page(browser, path)
    page.click("#jump-went-stale")
    expect(page.locator("#dropped")).to_contain_text("This page holds")
    cmd = page.text_content("#ops-cmd")
    assert re.fullmatch(r"python -m simcache export crash_pr --preset pre_fix --ops 5:\d+ -o window\.html", cmd), cmd
    assert page.errors == []


def test_a_large_tree_opens_in_the_focus_view_with_a_switch_to_show_all(browser, tmp_path):
    ops = [{"op": "request", "tokens": [100 + i, 200 + i]} for i in range(30)]
    doc = {"config": {"policy": "write_through", "device_kv": 200, "host_kv": 200, "device_mamba": 40,
                      "host_mamba": 40}, "ops": ops}
    path = export_html(simulate(doc, "pre_fix"), tmp_path / "big.html")
    page = open_page(browser, path)
    page.click("#btn-last")
    folded = page.locator("#run0 .tree g.fold")
    assert folded.count() >= 1 and "folded" in folded.first.text_content()
    shown = page.locator("#run0 .tree g.node-box").count()
    page.check("#show-all")
    expect(page.locator("#run0 .tree g.fold")).to_have_count(0)
    assert page.locator("#run0 .tree g.node-box").count() > shown
    assert page.errors == []


def test_the_tree_does_not_jump_at_the_key_step(browser, pages):
    """crash_pr 121 -> 122: #8 leaves the tree and its holders' box appears; no box moves (centres compared)."""
    page = open_page(browser, pages["one"])
    centres = []
    for step in (121, 122):
        page.evaluate("(i) => { const s = document.getElementById('slider'); s.value = String(i); "
                      "s.dispatchEvent(new Event('input')); }", step)
        expect(page.locator("body")).to_have_attribute("data-step", str(step))
        centres.append(page.evaluate("""() => Object.fromEntries(['n2', 'n8', 'n10', 'n9'].map(n => {
            const r = document.querySelector('#run0 .tree g[id="' + n + '"]').getBoundingClientRect();
            return [n, [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]]; }))"""))
    assert centres[0] == centres[1]
    assert page.errors == []
