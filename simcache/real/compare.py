"""The model beside the real code: which preset models a source, loads kept per process, and the side-by-side text.

- ``model_preset(source)``: a release or a mirror commit by ``versions.preset_for_real`` (the release table), a
  user's checkout by the newest real preset (``--preset`` overrides each).
- ``loaded_for(spec, version)``: one load per source, file contents and process (several releases and commits live
  side by side; an edited file of a checkout is loaded again).
- ``side_by_side(name, model, real, ...)``: every field of the two results, the differing ones marked ``*``.
"""
from __future__ import annotations

import hashlib
import os

from .. import versions
from ..errors import ConfigError
from .fetch import VERSION, resolve
from .loader import Loaded, load
from .run import FIELDS, diff
from .source import Source, SourceError
from .targets import HI_MAMBA, Target

_LOADS: dict[tuple, Loaded] = {}


def model_preset(source: Source, asked: str | None = None) -> str:
    """The preset that models ``source`` (``asked`` wins): the release table for a release or a mirror commit, the
    newest real preset for anything else (a reviewer's checkout)."""
    if asked is not None:
        versions.preset(asked)  # one sentence if unknown
        return asked
    if source.version is not None:
        try:
            return versions.preset_for_real(source.version)
        except ConfigError:
            if source.kind == "release":
                raise SourceError(f"no preset models sglang {source.version}; give --preset NAME to compare with one "
                                  f"({', '.join(versions.REAL_PRESETS)})") from None
    return versions.REAL_PRESETS[-1]


def parse_word(word: str) -> tuple[str | None, str | None]:
    """``--against-real`` / ``--confirm-real``'s one word -> (spec, version): ``installed``, a release version
    (``0.5.17``) or a path (anything with a ``/``, or an existing folder)."""
    if word == "installed":
        return "installed", None
    if VERSION.fullmatch(word) and not os.path.isdir(word):
        return None, word
    return word, None


def loaded_for(spec: str | None, version: str | None, target: Target = HI_MAMBA) -> Loaded:
    """The load of ``target`` from the source the words name, made once per process, source and file contents (the
    source is resolved each time and its files hashed: a changed cache folder, index or file is seen)."""
    source = resolve(spec, version, target.files)
    key = (target.name, str(source.root), source.label, _contents(source.root, target.files))
    if key not in _LOADS:
        _LOADS[key] = load(source, target)
    return _LOADS[key]


def _contents(root, files: tuple[str, ...]) -> tuple[str | None, ...]:
    """The sha256 of each of ``files`` under ``root`` (None where it is missing or unreadable)."""
    out = []
    for rel in files:
        try:
            out.append(hashlib.sha256((root / rel).read_bytes()).hexdigest())
        except OSError:
            out.append(None)
    return tuple(out)


def _text(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, dict):
        return ", ".join(f"{k}={{{_text(x)}}}" if isinstance(x, dict) else f"{k}={_text(x)}" for k, x in v.items())
    if isinstance(v, list):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    return str(v)


def side_by_side(title: str, model: dict, real: dict, preset: str, label: str) -> str:
    """Each field on one line per side (``model`` / ``real``), the differing fields marked ``*``; lists of lines
    (trees) printed one item per line when they differ."""
    differ = set(diff(model, real))
    lines = [title, f"  model: preset {preset}", f"  real:  {label} (loading its files ran their code)", ""]
    width = max(map(len, FIELDS))
    for k in FIELDS:
        mark = "*" if k in differ else " "
        m, r = model.get(k), real.get(k)
        if k in differ and isinstance(m, list) and isinstance(r, list) and k in ("tree", "tree_slots", "stale_final"):
            lines.append(f"{mark} {k:<{width}}  model:")
            lines += [f"    {' ' * width}  {x}" for x in m] or [f"    {' ' * width}  (empty)"]
            lines.append(f"  {' ' * width}  real:")
            lines += [f"    {' ' * width}  {x}" for x in r] or [f"    {' ' * width}  (empty)"]
        elif k in differ:
            lines.append(f"{mark} {k:<{width}}  model: {_text(m)}")
            lines.append(f"  {' ' * width}  real:  {_text(r)}")
        else:
            lines.append(f"{mark} {k:<{width}}  {_text(m)}")
    lines.append("")
    lines.append(f"{len(differ)} of {len(FIELDS)} fields differ (marked *)" if differ else
                 f"the model and the real code agree on all {len(FIELDS)} fields")
    return "\n".join(lines)


def real_outcome_line(real: dict, model: dict, label: str, narrowed: str | None = None) -> str:
    """One header line: what the real code did, and whether the model agrees (``--against-real``); a run narrowed
    by ``--ops`` says so, and its outcome is the window's."""
    clean = "clean in this window" if narrowed else "clean"
    what = clean if real["outcome"] == "clean" else f"{real['outcome']} in {real['raised_in']} at op {real['step']}"
    differ = diff(model, real)
    agree = "the model agrees on every field" if not differ else f"the model differs on {', '.join(differ)}"
    where = f", narrowed to {narrowed}" if narrowed else ""
    return f"real code, {label}{where}: {what}; {agree}"


def same_run(run) -> dict:
    """``run_real``'s (or ``run_unified``'s) keywords for the real code's run of the model's ``run``: its schedule's
    operations, up to the end of an ``--ops A:B`` window (the model runs those before A untraced and none from B, so
    the two are the same run), under ``run``'s memory limit."""
    from .run import linear_ops

    ops = linear_ops(run.scenario, run.schedule)
    window = getattr(run, "window", None)
    if window is not None:
        ops = ops[: window[1]]
    return dict(ops=ops, memory_limit_mb=getattr(getattr(run, "trace", None), "memory_limit_mb", None))


def against_real(run, word: str) -> tuple[str, dict]:
    """``--against-real``: the real code's run of ``run``'s scenario and schedule (``same_run``: a run narrowed by
    ``--ops`` is narrowed there too) -> (header line, the real result with ``differ``: the fields where the model's
    differs)."""
    from .run import run_real

    loaded = loaded_for(*parse_word(word))
    real = run_real(run.scenario, loaded, run.schedule, **same_run(run))
    model = {k: run.result[k] for k in FIELDS}
    line = real_outcome_line(real, model, loaded.source.label, getattr(run, "narrowed", None))
    return line, dict(real, differ=diff(model, real))
