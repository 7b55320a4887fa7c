"""Embedded JSON cannot break the exported page (#43 item 3), and `scenarios --json` names no file a clone lacks
(#40 §6).

Story: a tour whose texts hold ``<!--`` and, later, ``<script`` used to send the HTML parser into a state where the
data block swallowed the rest of the page. Every ``<``, ``>``, ``&``, U+2028 and U+2029 in the block is now a JSON
escape: the page keeps every element after the block, and the tour shows the hostile text as text.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simcache.cli import main
from simcache.export import export_html, json_in_html

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = 'a <!-- b <script>alert(1)</script> c </script><p id="pwned">x</p> & \u2028 \u2029 >'

TOUR = dict(title=f"hostile {HOSTILE}", scenario="scenario_a", preset="followup_fix", intro=HOSTILE, stops=[dict(
    title=HOSTILE, at={"op_end": 0}, ask=HOSTILE, explain=HOSTILE, choices=[
        dict(text=f"ongoing_backup {HOSTILE}", claim={"holds": {"node": "1,2", "holder": "ongoing_backup"}},
             correct=True),
        dict(text="nobody", claim={"holds": {"node": "1,2", "holder": "nothing"}})])])


def test_json_in_html_escapes_every_character_that_could_end_or_bend_the_block():
    text = json_in_html({"t": HOSTILE, "n": [1, 2]})
    assert not re.search("[<>&\u2028\u2029]", text)
    assert json.loads(text) == {"t": HOSTILE, "n": [1, 2]}
    assert "\\u003c!--" in text and "\\u003c/script\\u003e" in text and "\\u0026" in text


@pytest.mark.browser
def test_a_hostile_tour_text_does_not_swallow_the_page(tmp_path):
    from playwright.sync_api import sync_playwright

    tour = tmp_path / "hostile.yaml"
    tour.write_text(json.dumps(TOUR))  # JSON is YAML
    page_path = export_html(__import__("simcache").simulate("scenario_a", "followup_fix"), tmp_path / "p.html",
                            tour=str(tour))
    html = page_path.read_text()
    block = html.split('id="simcache-data">', 1)[1].split("</script>", 1)[0]
    assert not re.search("[<>&]", block)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run"]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=flags)
        page = b.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-ready]", timeout=60000)
        assert errors == []
        assert page.locator("#pwned").count() == 0  # nothing in the data became markup
        for sel in ("#controls", "#layout", "#tour-q", "#panels"):  # everything after the block is there
            assert page.locator(sel).count() == 1, sel
        assert HOSTILE.split("\u2028")[0].strip() in page.locator("#tour-q").inner_text()
        b.close()


def test_scenarios_json_names_no_file_a_clone_lacks(capsys):
    assert main(["scenarios", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    text = json.dumps(items)
    assert "sglang_reference" not in text and "(e." not in text
    for it in items:
        for path in re.findall(r"[\w./-]+\.(?:md|json|yaml|py)\b", it["reference"]):
            assert (ROOT / path).exists(), (it["name"], path)
