"""The notebooks as GitHub shows them (issue #40 §6): notebooks/ keeps no outputs, and each notebook's first cell links
to a copy with its outputs in docs/notebooks/, written by ``tools/render_notebooks.py``.

Story: every notebook of the series starts with a link to its rendered copy, and the copy exists; each copy holds
exactly its notebook's cells (after its own header cell), so a notebook edited and not rendered again fails here
with the command that fixes it; every code cell that shows something in the copy shows it without a widget view, a
memory address or a progress bar; rendering notebook 1 again gives its committed copy byte for byte (the outputs are
deterministic); and notebooks/ itself holds no outputs, so running the notebooks (nbmake, which writes nothing
back) leaves the tree as it was.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE, RENDERED = ROOT / "notebooks", ROOT / "docs" / "notebooks"
SERIES = sorted(p.name for p in SOURCE.glob("0[1-7]_*.ipynb"))
FIX = "run .venv/bin/python tools/render_notebooks.py {prefix} and commit docs/notebooks/{name}"

sys.path.insert(0, str(ROOT / "tools"))
import render_notebooks  # noqa: E402


def cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


def test_the_series_is_seven_notebooks_without_outputs():
    assert len(SERIES) == 7
    for p in SOURCE.glob("*.ipynb"):
        nb = nbformat.read(p, as_version=4)
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells
                   if c.cell_type == "code"), f"{p.name} holds outputs; clear them (they belong in docs/notebooks)"


@pytest.mark.parametrize("name", SERIES)
def test_each_notebook_links_to_its_rendered_copy_which_holds_its_cells(name):
    nb = nbformat.read(SOURCE / name, as_version=4)
    link = nb.cells[0]
    assert link.get("id") == render_notebooks.LINK and link.cell_type == "markdown"
    assert f"[The same notebook with its outputs](../docs/notebooks/{name})" in link.source
    copy_path = RENDERED / name
    fix = FIX.format(prefix=name[:2], name=name)
    assert copy_path.exists(), f"docs/notebooks/{name} is missing: {fix}"
    copy = nbformat.read(copy_path, as_version=4)
    assert copy.cells[0].source == render_notebooks.header(name)
    assert cells(copy)[1:] == cells(nb)[1:], f"docs/notebooks/{name} is not this notebook any more: {fix}"
    shown = 0
    for n, c in enumerate((c for c in copy.cells if c.cell_type == "code"), 1):
        assert c.execution_count == n
        for out in c.outputs:
            assert not (out.output_type == "stream" and out.name == "stderr")
            data = out.get("data", {})
            assert render_notebooks.WIDGET_VIEW not in data
            assert not re.search(r" at 0x[0-9a-f]+>", str(data.get("text/plain", "")))
            shown += any(k in data for k in ("text/html", "image/png", "image/svg+xml"))
    assert shown >= 5, f"docs/notebooks/{name} shows too few pictures ({shown})"
    assert set(copy.metadata) == {"kernelspec", "language_info"}


def test_rendering_notebook_1_again_gives_its_committed_copy(tmp_path):
    name = SERIES[0]
    again = render_notebooks.render(SOURCE / name, tmp_path)
    assert again.read_text() == (RENDERED / name).read_text(), FIX.format(prefix=name[:2], name=name)


def test_the_notebook_run_writes_nothing_back():
    """The tests run notebooks/ with nbmake, which executes a copy in memory; nothing passes --overwrite."""
    assert "--overwrite" not in (ROOT / "scripts" / "test.sh").read_text()
    assert "--overwrite" not in (ROOT / "pyproject.toml").read_text()
