"""App mode (issue 17, part 5): ``bash scripts/run.sh --app`` serves the walkthrough with Voila, without code.

Story: the help text names the three modes; the app starts on a free port and serves notebook 1 as a page that
holds its text and outputs but none of its code; its first page describes the notebooks (issue #40 §5: not a raw
file list), and the game's level menu works in the app (Chromium). Skips (saying so) only where Voila is not
installed in .venv.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from waits import KERNEL_S, SERVER_START_S, UI_S, budget_ms, budget_s

ROOT = Path(__file__).resolve().parent.parent
VOILA = ROOT / ".venv" / "bin" / "voila"


def test_run_sh_help_names_the_modes():
    out = subprocess.run(["bash", "scripts/run.sh", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.startswith("usage: bash scripts/run.sh [--no-setup] [--app | --html | --help] [args...]")
    for mode in ("(no mode)   open the notebooks in JupyterLab", "--app       serve the walkthrough as a web app",
                 "--html      render the walkthrough", "--no-setup  (before the mode) skip scripts/setup.sh"):
        assert mode in out.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 -- a local server this test started
        return r.status, r.read().decode("utf-8", "replace")


@pytest.mark.skipif(not VOILA.exists(), reason="Voila is not installed in .venv (bash scripts/setup.sh installs it)")
def test_app_mode_serves_a_notebook_without_its_code(tmp_path):
    port = _free_port()
    log = (tmp_path / "voila.log").open("w")
    proc = subprocess.Popen(["bash", "scripts/run.sh", "--no-setup", "--app", "--no-browser", "--port", str(port),
                             "--Voila.ip=127.0.0.1"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline, status = time.monotonic() + budget_s(SERVER_START_S), None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status, home = _get(f"http://127.0.0.1:{port}/", 5)
                break
            except OSError:
                time.sleep(0.5)
        assert status == 200, f"Voila did not answer on port {port}: {(tmp_path / 'voila.log').read_text()[-2000:]}"
        assert "Voil" in home and home.count('class="sc-notebook"') == len(list((ROOT / "notebooks").glob("*.ipynb")))
        status, page = _get(f"http://127.0.0.1:{port}/voila/render/01_radix_tree.ipynb", budget_s(KERNEL_S))
        assert status == 200
        assert "The radix tree: pages, splits, matching, LRU and eviction" in page  # the notebook's text
        assert page.count('class="jp-OutputArea jp-Cell-outputArea"') >= 10  # its outputs
        assert "from simcache" not in page and "import " not in page  # and none of its code
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the session this test started: run.sh exec'd into voila
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _serve(folder: Path, tmp_path: Path, port: int) -> subprocess.Popen:
    """Voila on ``folder`` with the app's template (as run.sh --app starts it), its own log, its own session."""
    from simcache.app import write_template

    write_template(tmp_path / "voila-data", folder)
    env = dict(os.environ, JUPYTER_PATH=str(tmp_path / "voila-data"))
    log = (tmp_path / "voila.log").open("w")
    return subprocess.Popen([str(VOILA), str(folder), "--strip_sources=True", "--template=simcache", "--no-browser",
                             f"--port={port}", "--Voila.ip=127.0.0.1"], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait_up(proc, port: int, tmp_path: Path) -> str:
    deadline = time.monotonic() + budget_s(SERVER_START_S)
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return _get(f"http://127.0.0.1:{port}/", 5)[1]
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"Voila did not answer on port {port}: {(tmp_path / 'voila.log').read_text()[-2000:]}")


@pytest.mark.browser
@pytest.mark.skipif(not VOILA.exists(), reason="Voila is not installed in .venv (bash scripts/setup.sh installs it)")
def test_the_app_opens_on_the_notebooks_described_and_the_game_has_a_level_menu(tmp_path):
    """The landing page lists the notebooks with what each shows (not a raw file list), in a real Chromium; a
    notebook holding the game's level picker, served as an app, changes level from its menu with no code cell."""
    from playwright.sync_api import expect, sync_playwright
    from test_notebooks_browser import CHROMIUM, FLAGS
    from views_helpers import ARTIFACTS

    from simcache.app import ABOUT

    folder = tmp_path / "notebooks"
    folder.mkdir()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):  # the real notebooks' descriptions, and one to play
        (folder / nb.name).write_text(nb.read_text())
    game = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "id": "picker",
                       "source": ["from simcache.game import LevelPicker\n", "LevelPicker(start=4)"]}],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
    (folder / "99_levels.ipynb").write_text(json.dumps(game))
    port = _free_port()
    proc = _serve(folder, tmp_path, port)
    try:
        home = _wait_up(proc, port, tmp_path)
        n = len(list(folder.glob("*.ipynb")))
        assert "Select items to open" not in home and home.count('class="sc-notebook"') == n
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/")
            items = page.locator("li.sc-notebook")
            expect(items).to_have_count(n)
            expect(items.nth(2)).to_contain_text("3The crash, step by step" + ABOUT[3])
            expect(items.nth(5).locator("a")).to_have_attribute(
                "href", "/voila/render/06_explore_and_be_the_scheduler.ipynb")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "app_landing.png"), full_page=True)
            page.goto(f"http://127.0.0.1:{port}/voila/render/99_levels.ipynb", timeout=budget_ms(KERNEL_S))
            title = page.locator("h3", has_text="Level ")
            expect(title).to_have_text(re.compile(r"^Level 4: C"), timeout=budget_ms(KERNEL_S))
            page.locator("select").first.select_option(label="Level 2: A: a tombstone kept alive by a host "
                                                             "reference")
            expect(page.locator("h3", has_text="Level ")).to_have_text(re.compile(r"^Level 2: A"),
                                                                      timeout=budget_ms(UI_S))
            page.get_by_role("button", name=re.compile(r"^mem: ")).click()
            expect(page.locator("body")).to_contain_text("Schedule so far: 'mem'", timeout=budget_ms(UI_S))
            page.screenshot(path=str(ARTIFACTS / "app_level_menu.png"), full_page=True)
            browser.close()
    finally:
        _stop(proc)
