"""What exploration leaves on disk: a replayable schedule, the (shrunk) scenario, a JSON trace, a pytest file.

``write_artefacts(out_dir, scenario, preset, schedule)`` replays the failing case with ``simulate`` (the traced,
full-fidelity path) and writes:
- ``schedule.txt``: the schedule string (``python -m simcache run minimal.yaml --schedule "$(cat schedule.txt)"``);
- ``minimal.yaml``: the scenario with that schedule and its ``expect`` block, loadable by ``scenario.load``;
- ``trace.json``: ``Run.to_json()`` plus ``micro_steps``, every micro-step of the run;
- ``test_minimal_<scenario>.py``: a pytest file that embeds the scenario, replays it and asserts the exact outcome
  (crash, step, status letters, final tree, damage); it runs from anywhere, not only from ``out_dir``.
"""
from __future__ import annotations

import ast
import json
import pprint
import re
from pathlib import Path

import yaml

from ..errors import SimcacheError
from ..scenario import Scenario

_SHORT_N = {"evict", "evict_mamba", "evict_host"}


def op_text(op: dict):
    """An operation as the short string the scenario format reads back (``request 1 2``), or the dict itself."""
    kind, rest = op.get("op"), set(op) - {"op"}
    if kind in ("request", "start", "prefetch") and rest == {"tokens"}:
        return f"{kind} {' '.join(map(str, op['tokens']))}"
    if kind in _SHORT_N and rest == {"n"}:
        return f"{kind} {op['n']}"
    if kind in ("write_ack", "load_ack") and rest <= {"n"}:
        return kind if not rest else f"{kind} {op['n']}"
    if kind == "prefetch_done" and rest == {"n", "mamba_hit"}:
        return f"prefetch_done {op['n']} {'hit' if op['mamba_hit'] else 'miss'}"
    if kind in ("finish", "finish_oldest", "events", "l3_ack") and not rest:
        return kind
    return dict(op)


def short_config(cfg: dict) -> dict:
    """``cfg`` without the settings that equal their defaults (``ops_run.check_config`` puts them back)."""
    from ..ops_run import DEFAULTS

    wt = 1 if cfg.get("policy", DEFAULTS["policy"]) == "write_through" else 2
    return {k: v for k, v in cfg.items()
            if not (k in DEFAULTS and DEFAULTS[k] == v) and not (k == "write_through_threshold" and v == wt)}


def scenario_doc(sc: Scenario, schedule: str | None = None) -> dict:
    """The scenario as file data, operations in their short spelling, with ``schedule`` if given."""
    doc = sc.as_doc()
    doc["config"] = short_config(doc["config"])
    doc["actors"] = {a: [op_text(o) for o in ops] for a, ops in sc.actors.items()}
    if schedule is not None:
        doc["schedule"] = schedule
    if sc.minimal_schedule:
        doc["minimal_schedule"] = sc.minimal_schedule
    return doc


def expect_block(run) -> dict:
    """What ``run`` reported, in the gallery's ``expect`` format (``tests/test_gallery.py``)."""
    j = run.to_json()
    out = dict(outcome=j["outcome"])
    if j["assertion"] is not None:
        out.update(raised_in=j["raised_in"], step=j["step"], message=j["assertion"]["message"])
    out.update(double_frees=[[d["pool"], d["slots"]] for d in j["double_frees"]],
               leaked={pool: p["leaked"] for pool, p in j["pools"].items() if p["leaked"]},
               went_stale=len(j["went_stale"]), cleaned_up=len(j["cleaned_up"]))
    return out


class _Dumper(yaml.SafeDumper):
    """Multi-line text as a ``|`` block, so descriptions read as written."""


def _text(dumper, data: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _text)


def _ident(text: str) -> str:
    """An ASCII identifier fragment from any text (quotes, backslashes, newlines become ``_``)."""
    out = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")[:60] or "scenario"
    return out if out[0].isalpha() else "s_" + out


def _literal(value) -> str:
    """``value`` as Python source that evaluates back to it (checked), so no text of a scenario can become code."""
    src = pprint.pformat(value, width=110, sort_dicts=False)
    if ast.literal_eval(src) != value:  # pragma: no cover - plain data always round-trips
        raise SimcacheError("the scenario holds data that cannot be written into a test file")
    return src


def pytest_source(doc: dict, preset: str, schedule: str, run) -> str:
    """A self-contained pytest module that replays ``doc`` under ``preset`` and asserts ``run``'s outcome."""
    from ..cli import transcript

    r, crash = run.result, run.crash
    expect = dict(outcome=run.outcome, step=r["step"], status=r["status"], tree=r["tree"],
                  double_frees=[[d["pool"], d["slots"]] for d in r["double_frees"]],
                  leaked={p: a["leaked"] for p, a in r["accounting"].items() if a["leaked"]})
    if crash is not None:
        expect.update(type=crash.type, message=crash.message, raised_in=crash.function, stack=list(crash.stack))
    name = _ident(str(doc.get("name", "scenario")))
    # scenario text (names, notes, the transcript) appears only inside repr()-quoted literals, never as code,
    # inside a docstring or a comment
    story = transcript(run).splitlines()
    source = f'''"""Generated by `simcache explore`: the scenario below replayed under PRESET; the outcome is asserted
exactly. TRANSCRIPT is what happened.
"""
from simcache.scenario import from_doc
from simcache.simulate import simulate

SCENARIO = {_literal(doc)}
PRESET = {preset!r}
SCHEDULE = {schedule!r}
EXPECT = {_literal(expect)}
TRANSCRIPT = {_literal(story)}


def test_{name}_{_ident(preset)}_replays_exactly():
    run = simulate(from_doc(SCENARIO), PRESET, schedule=SCHEDULE, snapshots=False)
    r = run.result
    assert run.outcome == EXPECT["outcome"]
    if run.crash is not None:
        c = run.crash
        assert (c.type, c.message, c.function, list(c.stack)) == (
            EXPECT["type"], EXPECT["message"], EXPECT["raised_in"], EXPECT["stack"])
    assert (r["step"], r["status"]) == (EXPECT["step"], EXPECT["status"])
    assert r["tree"] == EXPECT["tree"]
    assert [[d["pool"], d["slots"]] for d in r["double_frees"]] == EXPECT["double_frees"]
    assert {{p: a["leaked"] for p, a in r["accounting"].items() if a["leaked"]}} == EXPECT["leaked"]
'''
    compile(source, "test_minimal.py", "exec")  # a file that would not even parse is never written
    return source


def test_file_name(scenario: Scenario) -> str:
    return f"test_minimal_{_ident(scenario.name.removesuffix('_minimal'))}.py"


def artefact_texts(scenario: Scenario, preset: str, schedule: str,
                   flags: dict | None = None) -> dict[str, tuple[Path, str]]:
    """Replay ``scenario`` under ``preset`` / ``schedule`` with a trace: kind -> (file name, text) of each artefact."""
    from ..simulate import simulate

    run = simulate(scenario, preset, flags, schedule)
    doc = scenario_doc(scenario, schedule)
    if flags:
        doc["flags"] = {**doc.get("flags", {}), **flags}
    doc["preset"] = preset
    doc["expect"] = {preset: expect_block(run)}  # what this schedule does (the scenario's own blocks were for its
    # default schedule)
    trace = run.to_json()
    trace["micro_steps"] = [s.as_dict() for s in run.trace.steps]
    test = test_file_name(scenario)
    return dict(schedule=(Path("schedule.txt"), schedule + "\n"),
                scenario=(Path("minimal.yaml"), yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=110)),
                trace=(Path("trace.json"), json.dumps(trace, indent=1, default=str) + "\n"),
                test=(Path(test), pytest_source(doc, preset, schedule, run)))


def write_artefacts(out_dir: str | Path, scenario: Scenario, preset: str, schedule: str,
                    flags: dict | None = None) -> dict[str, Path]:
    """Replay ``scenario`` under ``preset`` / ``schedule`` and write the four artefacts, all or nothing."""
    from ..safe_io import check_folder, write_folder

    check_folder(out_dir, ["schedule.txt", "minimal.yaml", "trace.json"])
    texts = artefact_texts(scenario, preset, schedule, flags)
    written = write_folder(out_dir, {p.name: text for p, text in texts.values()})
    return {k: written[p.name] for k, (p, _) in texts.items()}
