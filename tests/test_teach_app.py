"""App mode and notebook 6 (issue #40 §5, §6), without a server: the level picker swaps games with no cell to run,
the landing page describes every notebook from the notebooks themselves, and notebook 6's rate plot keeps its y
label inside the picture.

Story: ``LevelPicker(start=4)`` shows level 4; choosing level 2 in its menu (as a click would) shows a fresh game of
level 2 and the menu follows ``pick``; a bad level is one sentence. The Voilà template ``write_template`` writes
lists the seven notebooks with their number, title (from each notebook's heading) and what it shows, each a link to
its app page, in both of Voilà's tree pages; a notebook not described in ``app.ABOUT`` is listed with the first
sentence of its own problem statement. The rate-vs-pressure figure's y label fits in the figure.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcache import app
from simcache.errors import ScenarioError
from simcache.game import LEVELS, LevelPicker, SchedulerGame

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def test_the_level_picker_swaps_games_without_a_cell_to_run():
    picker = LevelPicker(start=4)
    assert isinstance(picker.game, SchedulerGame) and picker.game.level.number == 4
    assert picker.menu.options == tuple((f"Level {lv.number}: {lv.title}", lv.number) for lv in LEVELS)
    assert picker.menu.value == 4 and picker.widget.children == (picker.menu, picker.game.widget)
    picker.game.pick("pf")
    picker.menu.value = 2  # the menu, as a click changes it
    assert picker.game.level.number == 2 and picker.game.turns == []
    assert picker.widget.children == (picker.menu, picker.game.widget)
    four = picker.pick(4)
    assert four is picker.game and picker.menu.value == 4 and four.turns == []
    assert picker.pick(4) is four  # the same level again: the same game
    with pytest.raises(ScenarioError) as e:
        picker.pick(9)
    assert str(e.value) == "there is no level 9; the levels are 1 to 5" and picker.game is four
    assert "Level 4: C: the insert loop" in LevelPicker(start=4).game.static_html()


def test_the_landing_page_describes_every_notebook(tmp_path):
    out = app.write_template(tmp_path, NOTEBOOKS)
    assert out == tmp_path / "voila" / "templates" / "simcache"
    assert json.loads((out / "conf.json").read_text()) == {"base_template": "lab"}
    page = (out / "tree-lab.html").read_text()
    assert (out / "tree.html").read_text() == page
    assert page.startswith('{% extends "page.html" %}\n{% block title %}simcache: the notebooks{% endblock %}')
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert len(names) >= 6
    for name in names:
        d = app.describe(NOTEBOOKS / name)
        assert d["file"] == name and d["title"] and d["about"]
        assert (f'<li class="sc-notebook"><a href="{{{{ base_url }}}}voila/render/{name}">'
                f'<span class="sc-num">{d["number"]}</span><span class="sc-title">') in page
    three = app.describe(NOTEBOOKS / "03_the_crash.ipynb")
    assert three == dict(file="03_the_crash.ipynb", number=3, title="The crash, step by step", about=app.ABOUT[3])
    assert page.count('class="sc-notebook"') == len(names)
    assert "Select items to open" not in page  # Voilà's raw list of files is gone


def test_a_notebook_without_a_description_gets_its_own_first_sentence(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["# 9 · After the `rewrite`\n", "\n",
                                                          "**The problem.** A new cache came. It kept the race?"]}]}
    (tmp_path / "09_after.ipynb").write_text(json.dumps(nb))
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert app.describe(tmp_path / "09_after.ipynb") == dict(file="09_after.ipynb", number=9, title="After the rewrite",
                                                             about="A new cache came.")
    assert app.describe(tmp_path / "broken.ipynb") == dict(file="broken.ipynb", number=None, title="broken", about="")
    body = app.landing_body(tmp_path)
    assert '<span class="sc-title">broken</span></a><p class="sc-about"></p>' in body


def test_notebook_6s_rate_plot_keeps_its_y_label_inside_the_figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from simcache.render.plots import crash_rate_vs_pressure

    rows = [dict(preset=p, pressure=x, race_rate=r, crash_rate=r, damage_rate=r) for p in ("pre_fix", "followup_fix")
            for x, r in ((1, 0.0), (4, 0.1), (16, 0.3))]
    for field in ("race_rate", "crash_rate", "damage_rate"):
        fig = crash_rate_vs_pressure(rows, field=field)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        box = fig.axes[0].yaxis.label.get_window_extent(canvas.get_renderer())
        w, h = canvas.get_width_height()
        assert 0 <= box.x0 and box.x1 <= w and 0 <= box.y0 and box.y1 <= h, (field, box)
