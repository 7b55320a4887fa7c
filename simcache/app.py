"""App mode's landing page: ``bash scripts/run.sh --app`` serves the notebooks with Voilà, and its first page is
this one, the series described (not Voilà's raw list of files).

``write_template(folder)`` writes a Voilà template named ``simcache`` (it extends Voilà's ``lab`` template and
replaces only its tree page) into ``folder/voila/templates/simcache``; ``run.sh`` puts ``folder`` on
``JUPYTER_PATH`` and starts ``voila notebooks/ --template=simcache``. Each notebook is listed with its number and
title (its first heading), what it shows (``ABOUT``; a notebook not described there gets the first sentence of its
own "The problem." paragraph) and a link that opens it as an app. The page is written from the notebooks each time
the app starts, so a new notebook appears without an edit here.

``python -m simcache.app FOLDER`` writes it (``run.sh`` calls this).
"""
from __future__ import annotations

import json
import re
import sys
from html import escape
from pathlib import Path

ABOUT = {
    1: "Watch a tiny cache grow, split, match and evict: pages, the LRU order, locks, and the tombstone cascade "
       "that deletes more than was asked for.",
    2: "Add the host tier and Mamba states: backups, load-back, tombstones and the two leaf sets, and an eviction "
       "that runs inside an insert.",
    3: "Replay the PR's crash micro-step by micro-step: the node that goes stale, who still holds it, and a guided "
       "tour that asks you to predict each step before it shows it.",
    4: "The fix as the PR described it and as its review amended it, run on the same schedule: what the guards catch "
       "and the damage they leave behind.",
    5: "What was actually merged, why the user's traceback came back, and the follow-up fix, on the gallery's "
       "scenarios A to D.",
    6: "Search the schedules as the explorer does, shrink a failure to seven operations, then be the scheduler "
       "yourself, level by level.",
    7: "After the rewrite: the same race in SGLang's UnifiedRadixCache, in the player and a tour, found by the "
       "explorer on its own, confirmed on SGLang's own code, and what 0.5.17's fix leaves under write-back.",
}
_HEADING = re.compile(r"^#\s*(\d+)\s*[·.:-]\s*(.+)$", re.M)


def _plain(markdown: str) -> str:
    return re.sub(r"[*`_]", "", " ".join(markdown.split()))


def describe(path: Path) -> dict:
    """``{file, number, title, about}`` of one notebook, from its first markdown cell with a numbered heading
    (``# 3 · The crash``), or its file name."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        texts = ["".join(c.get("source", "")) for c in cells if c.get("cell_type") == "markdown"]
        first = next((t for t in texts if _HEADING.search(t)), texts[0] if texts else "")
    except (OSError, ValueError, AttributeError, TypeError):
        first = ""
    m = _HEADING.search(first)
    number = int(m.group(1)) if m else None
    title = _plain(m.group(2)) if m else path.stem.replace("_", " ")
    about = ABOUT.get(number or -1)
    if about is None:
        problem = re.search(r"\*\*The problem\.\*\*\s*(.+?[.!?])(\s|$)", first, re.S)
        about = _plain(problem.group(1)) if problem else ""
    return dict(file=path.name, number=number, title=title, about=about)


def landing_body(folder: Path) -> str:
    """The landing page's HTML body (Jinja: ``base_url`` is Voilà's) for the notebooks in ``folder``."""
    items = []
    for nb in sorted(folder.glob("*.ipynb")):
        d = describe(nb)
        num = f'<span class="sc-num">{d["number"]}</span>' if d["number"] is not None else ""
        items.append(f'<li class="sc-notebook"><a href="{{{{ base_url }}}}voila/render/{escape(d["file"])}">{num}'
                     f'<span class="sc-title">{escape(d["title"])}</span></a>'
                     f'<p class="sc-about">{escape(d["about"])}</p></li>')
    return ('<main class="sc-landing"><h1>simcache: a stale node in SGLang\'s hierarchical cache</h1>'
            "<p class=\"sc-intro\">A guided series on a real crash in SGLang's HiMambaRadixCache: a node deleted by "
            "an eviction that ran inside the insert still using it, held on to, and deleted again operations later. "
            "Each notebook opens as an app: its text, pictures and live widgets (players, tours, the game), no "
            "code. Start with 1, or jump to 3 for the crash itself.</p>"
            f'<ol class="sc-notebooks">{"".join(items)}</ol>'
            '<p class="sc-foot">Without a server: <code>python -m simcache export --game -o game.html</code> writes '
            "the be-the-scheduler levels as one page that plays offline.</p></main>")


CSS = """
.sc-landing{max-width:860px;margin:40px auto;font-family:var(--jp-ui-font-family,Helvetica,Arial,sans-serif);
  color:var(--jp-ui-font-color1,#111)}
.sc-landing h1{font-size:26px;margin:0 0 8px}.sc-intro{font-size:16px;line-height:1.45;color:#374151}
.sc-notebooks{list-style:none;padding:0;margin:20px 0}
.sc-notebook{border:1px solid #d1d5db;border-radius:8px;padding:12px 16px;margin:10px 0;background:#fff}
.sc-notebook:hover{border-color:#2563eb;background:#f8fafc}
.sc-notebook a{text-decoration:none;color:#1e3a8a;font-size:18px;font-weight:bold}
.sc-num{display:inline-block;min-width:28px;height:28px;line-height:28px;text-align:center;border-radius:14px;
  background:#1e3a8a;color:#fff;margin-right:10px;font-size:15px}
.sc-about{margin:6px 0 0 38px;font-size:15px;line-height:1.4;color:#374151}
.sc-foot{color:#6b7280;font-size:14px}
"""


def write_template(folder: str | Path, notebooks: str | Path = "notebooks") -> Path:
    """Write the ``simcache`` Voilà template (landing page for ``notebooks``) under ``folder``; returns its path."""
    out = Path(folder) / "voila" / "templates" / "simcache"
    out.mkdir(parents=True, exist_ok=True)
    (out / "conf.json").write_text(json.dumps({"base_template": "lab"}) + "\n")
    page = ('{% extends "page.html" %}\n{% block title %}simcache: the notebooks{% endblock %}\n'
            "{% block stylesheets %}{{ super() }}<style>" + CSS + "</style>{% endblock %}\n"
            "{% block body %}" + landing_body(Path(notebooks)) + "{% endblock %}\n")
    for name in ("tree.html", "tree-lab.html"):  # Voilà's two tree pages (classic and lab): the same landing
        (out / name).write_text(page)
    return out


if __name__ == "__main__":  # pragma: no cover - run.sh's step
    args = sys.argv[1:]
    if len(args) not in (1, 2):
        print("usage: python -m simcache.app FOLDER [NOTEBOOKS]", file=sys.stderr)
        sys.exit(2)
    print(write_template(*args))
