"""Render the notebooks with their outputs into docs/notebooks/, so GitHub shows their pictures.

The notebooks in notebooks/ are committed without outputs (nbmake runs them in the tests and writes nothing back).
This tool executes each one (in notebooks/, as JupyterLab would) and writes a copy with its outputs to
docs/notebooks/<same name>, made deterministic: widget views are dropped (GitHub cannot run them; every widget of
simcache displays a static HTML copy beside itself, which stays), stderr streams (progress bars) are dropped,
execution counts run 1, 2, 3..., default reprs lose their memory address, and run-specific metadata (timings,
widget state, kernel versions) is removed. A first markdown cell says what the copy is and links back (the
notebook's own link cell, ``LINK``, is left out of the copy). Each notebook's own first cell links to its copy.
``tests/test_rendered_notebooks.py`` checks that every copy has its notebook's cells exactly (edit a notebook, render
it again) and that rendering notebook 1 again gives its committed copy byte for byte.

    .venv/bin/python tools/render_notebooks.py            # every notebook
    .venv/bin/python tools/render_notebooks.py 03 05      # the notebooks whose names start so
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOURCE, RENDERED = ROOT / "notebooks", ROOT / "docs" / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")
LINK = "rendered-link"  # the id of each notebook's first cell, which links to its rendered copy


def header(name: str) -> str:
    return (f"*This is [`notebooks/{name}`](../../notebooks/{name}) with its outputs, rendered by "
            "`python tools/render_notebooks.py` so that GitHub shows its pictures. The widgets (players, tours, "
            "the game) need a kernel: run the notebook itself (`bash scripts/run.sh`, or `--app` for the app) to play "
            "them; here each one shows its static copy.*")


def normalize(nb, name: str):
    """The executed notebook ``nb`` made deterministic, with the header cell first (see the module doc)."""
    count = 0
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k not in ("execution", "collapsed", "scrolled")}
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count
        kept = []
        for out in cell.outputs:
            if out.output_type == "stream" and out.name == "stderr":
                continue
            if out.output_type in ("display_data", "execute_result"):
                out.data.pop(WIDGET_VIEW, None)
                if set(out.data) <= {"text/plain"} and str(out.data.get("text/plain", "")).startswith(
                        ("VBox(", "HBox(", "Output(")):
                    continue  # a widget's plain-text stand-in: the static copy beside it says more
                if "text/plain" in out.data:  # a default repr names a memory address: not the same twice
                    out.data["text/plain"] = _ADDRESS.sub(">", str(out.data["text/plain"]))
                out.metadata = {}
                if out.output_type == "execute_result":
                    out.execution_count = count
            kept.append(out)
        cell.outputs = kept
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in ("kernelspec",)}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [c for c in nb.cells if c.get("id") != LINK]  # the notebook's link to this copy: not in the copy
    first = nbformat.v4.new_markdown_cell(header(name))
    first.id = "rendered-copy"
    nb.cells.insert(0, first)
    return nb


def render(path: Path, out_dir: Path = RENDERED, timeout: int = 1800) -> Path:
    """Execute the notebook at ``path`` and write its deterministic copy to ``out_dir``; returns the copy's path."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / path.name
    nbformat.write(normalize(nb, path.name), target)
    return target


def main(argv: list[str]) -> int:
    names = sorted(SOURCE.glob("*.ipynb"))
    if argv:
        names = [p for p in names if any(p.name.startswith(a) for a in argv)]
        if not names:
            print(f"no notebook in {SOURCE} starts with {', '.join(argv)}", file=sys.stderr)
            return 2
    for p in names:
        print(f"[render] {p.name}", file=sys.stderr, flush=True)
        print(render(p))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
