"""Shared fixtures of the views' tests: scenario C (the oracle's ops, and one actor per request), simulated once."""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from simcache.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "views"
ARTIFACTS = ROOT / "test-artifacts"


def scenario_doc(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@cache
def run_c(preset: str = "pre_fix"):
    """Scenario C as the oracle's op list (one actor, ``main``) under ``preset``."""
    return simulate(scenario_doc("scenario_C_ops"), preset)


@cache
def run_c_actors(preset: str = "pre_fix"):
    return simulate(scenario_doc("scenario_C_actors"), preset)


def story(preset: str = "pre_fix") -> dict:
    """The micro-steps the views' tests look at, found in the trace (never hard-coded, the core may add steps)."""
    t = run_c(preset).trace
    stale = t.went_stale[0].step if t.went_stale else None
    crash = next((s.index for s in t.steps if s.kind == "assertion"), None)
    child = next((s.index for s in t.steps if s.kind == "attach" and s.detail.get("parent") == 8
                  and stale is not None and s.index > stale), None)
    first_attach = next(s.index for s in t.steps if s.kind == "attach")
    return dict(stale=stale, crash=crash, last=len(t.steps) - 1, child=child, first_attach=first_attach,
                readmitted=t.readmitted[0].step if t.readmitted else None,
                first_violation=min(v.step for v in t.violations), late=t.ops[8].first_step)


def overlaps(dot: str) -> list[tuple[str, str]]:
    """The pairs of boxes (tree nodes, holders' boxes, folds) that overlap in a pinned DOT as neato draws it."""
    import graphviz

    from simcache.render.layout import _NODE

    boxes = []
    for o in json.loads(graphviz.pipe("neato", "json", dot.encode()))["objects"]:
        if _NODE.match(f'  {o["name"]} [x];') and "pos" in o:
            x, y = map(float, o["pos"].split(","))
            w, h = float(o["width"]) * 36, float(o["height"]) * 36
            boxes.append((o["name"], (x - w, y - h, x + w, y + h)))
    boxes.sort()
    return [(n, m) for i, (n, p) in enumerate(boxes) for m, q in boxes[i + 1:]
            if not (p[2] <= q[0] or q[2] <= p[0] or p[3] <= q[1] or q[3] <= p[1])]
