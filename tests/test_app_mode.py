"""App mode (issue 17, part 5): ``bash scripts/run.sh --app`` serves the walkthrough with Voila, without code.

Story: the help text names the three modes; the app starts on a free port and serves notebook 1 as a page that
holds its text and outputs but none of its code. Skips (saying so) only where Voila is not installed in .venv.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from waits import KERNEL_S, SERVER_START_S, budget_s

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
        assert "Voil" in home
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
