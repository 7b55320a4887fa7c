"""Notebook 7's calls ("After the rewrite"): what became of the stale-node race in SGLang's ``UnifiedRadixCache``.

- ``designs()``: the structure of the unified cache at each covered version (one class with components, then a
  controller plus a tree core), from ``simcache.real.unified.targets`` (file names only, no SGLang text).
- ``fate(versions)``: the race's shape (the gallery's ``unified_refill``) run on the model of each release and,
  where the release's wheel is in simcache's cache folder or the package index is reachable, on SGLang's own code;
  offline the model stands in, and the table says so in a sentence.
- ``confirm(found, minimal)``: the explorer's failures (the shrunk one, the first of each shape) replayed on SGLang's
  own code, as ``explore --confirm-real`` does; offline, one sentence says why not.
- ``write_back(presets)``: the explorer on the write-back scenario, every failing shape it found.

Every helper returns a small object Jupyter displays (``simcache.render.display``) and plain data for check cells.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from .render.display import HTML
from .simulate import simulate
from .unified.versions import PRESETS, RELEASE_OF

SCENARIO = "unified_refill"
PRESET_OF = {v: p for p, v in RELEASE_OF.items()}  # release -> the preset that models it
LAYOUT_WORDS = {"components": "one class (unified_radix_cache.py) with per-kind components",
                "tree_core": "a controller (unified_radix_cache.py) plus a UnifiedTreeCore (unified_cache/)"}


def _table(head: list[str], rows: list[list[str]], note: str = "") -> HTML:
    th = "".join(f"<th style='text-align:left;padding:2px 10px'>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td style='padding:2px 10px'>{escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    tail = f"<p style='font-size:13px'>{escape(note)}</p>" if note else ""
    return HTML(f"<table style='border-collapse:collapse;font-size:13px'><tr>{th}</tr>{body}</table>{tail}")


@dataclass
class Designs:
    """The layout of each covered version: ``rows`` (version, released, layout, modules)."""
    rows: list[tuple[str, str, str, int]]

    def layout(self, version: str) -> str:
        return next(r[2] for r in self.rows if r[0] == version)

    def __repr__(self) -> str:
        return "\n".join(f"{v} ({d}): {LAYOUT_WORDS[lay]}, {n} files" for v, d, lay, n in self.rows)

    def _repr_html_(self) -> str:
        return _table(["version", "released", "structure", "files of the cache"],
                      [[v, d, LAYOUT_WORDS[lay], n] for v, d, lay, n in self.rows])._repr_html_()


def designs() -> Designs:
    """One row per covered version of ``UnifiedRadixCache`` (the mirror's commit first, then the releases)."""
    from .real.unified.targets import TARGETS

    return Designs([(v, t.released, t.layout, len(t.modules)) for v, t in TARGETS.items()])


@dataclass
class Fate:
    """The race on each release: the model's outcome, the real code's (or why it was not run), and their diff."""
    rows: list[dict] = field(default_factory=list)

    def row(self, version: str) -> dict:
        return next(r for r in self.rows if r["version"] == version)

    @property
    def offline(self) -> list[str]:
        return [r["version"] for r in self.rows if r["real"] is None]

    def __repr__(self) -> str:
        return "\n".join(f"{r['version']}: the model says {r['model']}; SGLang's own code "
                         + (f"says {r['real']}" if r["real"] is not None else f"was not run ({r['why']})")
                         for r in self.rows)

    def _repr_html_(self) -> str:
        rows = [[r["version"], r["preset"], r["model"], r["real"] or "not run",
                 ("agree on every field" if not r["differ"] else f"differ on {', '.join(r['differ'])}")
                 if r["real"] is not None else "—"] for r in self.rows]
        note = "" if not self.offline else (
            f"SGLang's own code was not run for {', '.join(self.offline)}: {self.rows[-1]['why']}. The model stands "
            f"in: it agrees with each release field for field on thousands of fresh sequences "
            f"(tests/test_unified_model.py).")
        return _table(["release", "model", "the model says", "SGLang's own code says", "fields"], rows,
                      note)._repr_html_()


def _said(result: dict) -> str:
    if result["outcome"] == "clean":
        return "clean"
    kind, _, message = result["outcome"].partition(": ")  # a bare ``assert v == node`` has no message: said so
    said = result["outcome"] if message.strip() else f"{kind} (no message)"
    return f"{said} in {result['raised_in']} at op {result['step']}"


def fate(versions=("0.5.16", "0.5.17"), policy: str | None = None) -> Fate:
    """``unified_refill`` on the model of each release and, where it can be loaded, on SGLang's own code."""
    from .real.run import FIELDS, diff
    from .real.source import SourceError
    from .real.unified import load_unified
    from .real.unified.run import run_unified
    from .scenario import from_doc, load

    sc = load(SCENARIO)
    if policy is not None:
        sc = from_doc(dict(sc.as_doc(), config={**sc.config, "policy": policy}, expect={}), name=sc.name)
    out, offline = Fate(), ""
    for v in versions:
        preset = PRESET_OF[v]
        run = simulate(sc, preset, snapshots=False, invariants=False)
        row = dict(version=v, preset=preset, model=_said(run.result), real=None, why=offline, differ=[])
        if offline:  # the index did not answer for one release: the next would wait for it again
            out.rows.append(row)
            continue
        try:
            loaded = load_unified(v)
        except (SourceError, OSError) as e:
            row["why"] = offline = (f"its wheel is not in simcache's cache folder and cannot be fetched "
                                    f"({str(e).split(';')[0]})")
        else:
            real = run_unified(sc, loaded, sc.schedule)
            row.update(real=_said(real), differ=diff({k: run.result[k] for k in FIELDS}, real))
        out.rows.append(row)
    return out


@dataclass
class Confirmed:
    """The explorer's failures replayed on SGLang's own code: ``source`` (the wheel) and ``results``
    (``simcache.real.confirm.Confirmation``), or ``why`` they were not replayed."""
    source: str = ""
    results: list = field(default_factory=list)
    why: str = ""

    @property
    def verdicts(self) -> dict[str, str]:
        return {c.label: c.verdict for c in self.results}

    def __repr__(self) -> str:
        return self.why or "\n".join(c.line().strip() for c in self.results)

    def _repr_html_(self) -> str:
        if self.why:
            return HTML(f"<p style='font-size:13px'>{escape(self.why)}</p>")._repr_html_()
        return _table(["failure", "schedule", "the model says", "SGLang's own code says", "verdict"],
                      [[c.label, c.schedule, c.model, c.real if c.real == "clean" else f"{c.real} at op {c.real_step}",
                        c.verdict] for c in self.results], f"on {self.source}")._repr_html_()


def confirm(found, minimal, version: str = "0.5.16") -> Confirmed:
    """``explore --confirm-real VERSION``: the shrunk failure ``minimal`` and the first failure of each shape
    ``found`` reports, replayed on SGLang's own ``UnifiedRadixCache`` of ``version``."""
    from .real.source import SourceError
    from .real.unified.confirm import confirm_unified
    from .scenario import load

    cases = [("minimal (shrunk)", minimal.scenario, minimal.schedule, minimal.signature)]
    cases += [(f"first failure with {sig}", load(found.scenario), f.schedule, f.signature)
              for sig, f in found.first_by_signature]
    try:
        source, results = confirm_unified(cases, version, found.preset)
    except (SourceError, OSError) as e:
        return Confirmed(why=f"SGLang's own code was not run: the {version} wheel is not in simcache's cache folder "
                             f"and cannot be fetched ({str(e).split(';')[0]}).")
    return Confirmed(source, results)


@dataclass
class Search:
    """The explorer's write-back search: per preset, schedules run, failures, and each failing shape."""
    results: dict

    def failures(self, preset: str) -> dict[str, str]:
        r = self.results[preset]
        return {sig: f.schedule for sig, f in r.first_by_signature}

    def __repr__(self) -> str:  # (no timings: the same text every run)
        return "\n".join(f"{p}: {r.schedules_run} schedules, {r.failing} failing" for p, r in self.results.items())

    def _repr_html_(self) -> str:
        rows = []
        for p, r in self.results.items():
            shapes = "; ".join(f"{sig} ({f.schedule})" for sig, f in r.first_by_signature) or "none"
            rows.append([p, r.schedules_run, r.distinct_states, r.failing, shapes,
                         "whole space" if r.space_covered else ("within the bound" if r.exhausted else "partial")])
        return _table(["preset", "schedules run", "end states", "failing", "failing shapes", "covered"],
                      rows)._repr_html_()


def write_back(presets=tuple(PRESETS), bound: int | None = 2) -> Search:
    """``explore`` of the write-back scenario ``unified_write_back`` under each preset (preemption ``bound``)."""
    from .explore import explore

    return Search({p: explore("unified_write_back", p, bound=bound) for p in presets})
