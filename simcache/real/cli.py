"""``python -m simcache real``: a scenario (or the whole gallery) on SGLang's own cache code, beside the model."""
from __future__ import annotations

import argparse
import json

from .source import clear_cache

DESCRIPTION = (
    "Run a scenario, an operation file (OPS.json) or the whole gallery on SGLang's own cache code, unmodified, on "
    "CPU over simcache's fake pools and controller, and print its result beside the model's, field by field. "
    "LOADING SGLANG'S FILES RUNS THEIR CODE: they come only from the path you name (--sglang PATH, a checkout or an "
    "unpacked wheel; --sglang installed for the installed package) or from a release's wheel that simcache fetches "
    "from the package index without its dependencies, checks against the index's sha256 and keeps in the cache "
    "folder (--sglang-version X.Y.Z).")
EPILOG = ("The cache folder is $SIMCACHE_CACHE_DIR, else the user cache folder (platformdirs; ~/.cache/simcache on "
          "Linux); SGLang's wheels and files go in its real/ folder, marked by a CACHEDIR.TAG. `simcache real "
          "--clear-cache` removes that folder (only when it carries the marker) and prints what it removed. Nothing "
          "of SGLang's is in simcache's repository.")


def add_parser(sub) -> None:
    p = sub.add_parser("real", help="run a scenario on SGLang's own cache code beside the model (runs their code)",
                       description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("scenario", nargs="?", help="a gallery name, a YAML/JSON scenario file or an OPS.json")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--sglang", metavar="PATH", help="a SGLang checkout or unpacked wheel (its files are run), or "
                                                      "'installed' for the installed sglang package")
    src.add_argument("--sglang-version", metavar="X.Y.Z", help="a release: its wheel is fetched into the cache "
                                                                "folder once, verified by sha256, and its files run")
    p.add_argument("--preset", help="the model's preset to compare with (default: the one that models the source; "
                                    "for a checkout the newest); a unified_* preset runs SGLang's UnifiedRadixCache, "
                                    "as a unified scenario does by default (the release's preset, else its own)")
    p.add_argument("--schedule", help="actor turns, e.g. 'R1 R2*2 ctl*' (default: the scenario's)")
    p.add_argument("--gallery", action="store_true", help="run every gallery scenario and print one line each")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--list-stubs", action="store_true", help="list the sglang.* modules and names that are stubs")
    p.add_argument("--clear-cache", action="store_true", help="remove the wheels and files kept in the cache folder")
    p.add_argument("--memory-limit", metavar="MB", help="stop, with a message, a run (the model's or the real code's) "
                   "that adds more than this many megabytes of memory (default $SIMCACHE_MEMORY_LIMIT_MB or 4096)")
    p.set_defaults(fn=cmd_real)


def _usage(message: str):
    from ..cli_numbers import UsageError

    return UsageError(message)


def compare_one(scenario, loaded, preset: str | None, schedule: str | None,
                memory_limit_mb: float | None = None) -> tuple[str, dict, dict]:
    """(preset, model result, real result) of one scenario, each side under the memory limit; the model's cache is
    let go before the real code runs, so the two never hold memory at once."""
    import gc

    from ..simulate import simulate
    from .compare import model_preset
    from .run import FIELDS, run_real

    name = model_preset(loaded.source, preset)
    run = simulate(scenario, name, schedule=schedule, snapshots=False, invariants=False,
                   memory_limit_mb=memory_limit_mb)
    model, sched, limit = {k: run.result[k] for k in FIELDS}, run.schedule, run.trace.memory_limit_mb
    del run
    gc.collect()
    return name, model, run_real(scenario, loaded, sched, memory_limit_mb=limit)


def cmd_real(a: argparse.Namespace) -> int:
    from ..scenario import gallery, load
    from .compare import loaded_for, side_by_side
    from .run import diff

    if a.clear_cache:
        if a.scenario or a.gallery or a.list_stubs:
            raise _usage("--clear-cache runs alone; give it without a scenario, --gallery or --list-stubs")
        print("\n".join(clear_cache()))
        return 0
    if a.sglang is None and a.sglang_version is None:
        raise _usage("say which SGLang code to run: --sglang PATH (or --sglang installed) or --sglang-version X.Y.Z")
    limit = None
    if a.memory_limit is not None:
        from ..trace.memory import parse_memory_limit

        limit = parse_memory_limit(a.memory_limit, "--memory-limit")
    if a.preset is None and a.scenario is not None and not a.gallery and not a.list_stubs:
        a.preset = _unified_preset(a.scenario, a.sglang_version)
    if a.preset and a.preset.startswith("unified_"):  # SGLang's UnifiedRadixCache (#39)
        from .unified.cli import cmd_real_unified

        return cmd_real_unified(a, limit)
    if not a.list_stubs and not a.gallery and a.scenario is None:  # said before any download or load
        raise _usage("give a SCENARIO (a gallery name or a file) or --gallery")
    if a.gallery and a.scenario is not None:
        raise _usage("give a SCENARIO (a gallery name or a file) or --gallery, not both")
    loaded = loaded_for(a.sglang, a.sglang_version)
    if a.list_stubs:
        stubs = loaded.stub_list()
        if a.json:
            print(json.dumps(dict(source=loaded.source.label, real=sorted(loaded.real), stubs=stubs), indent=1))
        else:
            print(f"{loaded.source.label}: real modules {', '.join(sorted(loaded.real))}\nstubs:")
            print("\n".join(f"  {s}" for s in stubs))
        return 0
    if a.gallery:
        if a.schedule:
            raise _usage("--schedule applies to one scenario; the gallery runs each with its own")
        return _gallery(loaded, a, [load(n) for n in gallery()], limit)
    sc = load(a.scenario)
    preset, model, real = compare_one(sc, loaded, a.preset, a.schedule, limit)
    if a.json:
        print(json.dumps(dict(scenario=sc.name, preset=preset, source=loaded.source.label, differ=diff(model, real),
                              model=model, real=real), indent=1))
    else:
        print(side_by_side(f"{sc.name}: the model beside the real code", model, real, preset, loaded.source.label))
    return 0


def _unified_preset(scenario: str, version: str | None) -> str | None:
    """For a scenario of the unified family given without --preset: the unified preset of the release asked for
    (``--sglang-version``), else the scenario's own; None for a HiMamba scenario (the release table decides)."""
    from ..presets import family_of
    from ..scenario import load
    from ..unified.versions import RELEASE_OF

    own = load(scenario).preset
    if not isinstance(own, str) or family_of(own) != "unified":
        return None
    return next((p for p, v in RELEASE_OF.items() if v == version), own)


def _gallery(loaded, a, scenarios, limit: float | None) -> int:
    from .run import diff

    rows = []
    for sc in scenarios:
        preset, model, real = compare_one(sc, loaded, a.preset, None, limit)
        rows.append(dict(scenario=sc.name, preset=preset, model=_short(model), real=_short(real),
                         differ=diff(model, real)))
    if a.json:
        print(json.dumps(dict(source=loaded.source.label, scenarios=rows), indent=1))
        return 0
    print(f"the gallery on {loaded.source.label} (loading its files ran their code)")
    w = max(len(r["scenario"]) for r in rows)
    for r in rows:
        agree = "agree" if not r["differ"] else f"DIFFER on {', '.join(r['differ'])}"
        same = r["model"] == r["real"]
        print(f"  {r['scenario']:<{w}}  model {r['preset']}: {r['model']}"
              + ("" if same else f"\n  {'':<{w}}  real: {r['real']}") + f"  [{agree}]")
    return 0


def _short(r: dict) -> str:
    return "clean" if r["outcome"] == "clean" else f"{r['outcome']} in {r['raised_in']} at op {r['step']}"
