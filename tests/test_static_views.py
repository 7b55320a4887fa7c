"""Without a kernel (GitHub, nbviewer, ``nbconvert --to html``) widgets are blank (issue #13, defect 5).

Story: a notebook showing the player (crash_pr, pre_fix vs described_fix) and the be-the-scheduler game is executed
by a real kernel and converted to HTML by nbconvert, as nbviewer does. The page must show, without any widget
JavaScript, the player's current frame and its key moments and the game's board, as images with captions; in a
live kernel the widget's own CSS hides that snapshot (``.sc-static{display:none}``).
"""
from __future__ import annotations

import re

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

CELLS = [
    "from simcache import simulate\nfrom simcache.player import Player, SchedulerGame",
    "Player(simulate('crash_pr', 'pre_fix'), compare=simulate('crash_pr', 'described_fix'))",
    "SchedulerGame('hidden_needle')",
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    html, _ = HTMLExporter().from_notebook_node(nb)
    return nb, html


def test_nbconvert_html_shows_the_players_frames_and_the_games_board(converted):
    nb, html = converted
    outputs = nb.cells[1].outputs
    kinds = [list(o.get("data", {})) for o in outputs]
    assert any("application/vnd.jupyter.widget-view+json" in k for k in kinds)  # the live widget
    assert any("text/html" in k and "application/vnd.jupyter.widget-view+json" not in k for k in kinds)
    assert "Static snapshot of the player" in html and "Be the scheduler" in html
    imgs = re.findall(r'<img alt="tree drawing"[^>]*src="data:image/svg\+xml;base64,', html)
    assert len(imgs) >= 9  # the player: 2 runs x (cursor + moments + end); the game: its board
    for caption in ("pre_fix: AssertionError", "described_fix: no assertion; damage: ", "went stale", "cleaned up",
                    "assertion", "last step"):
        assert caption in html
    static = [o["data"]["text/html"] for c in nb.cells[1:] for o in c.outputs if "text/html" in o.get("data", {})
              and "application/vnd.jupyter.widget-view+json" not in o["data"]]
    assert len(static) == 2 and all('class="sc-static"' in s and "<script" not in s for s in static)
