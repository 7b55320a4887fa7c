"""The commands that need none of ``cli``'s option parsers: ``scenarios`` (the gallery) and ``workload`` (crash rates
as host memory pressure rises); moved out of ``cli.py``, which re-exports them."""
from __future__ import annotations

import json

from .cli_numbers import MAX_WORKLOAD_TURNS, UsageError, decimal, whole
from .cli_numbers import jobs as parse_jobs
from .errors import shown
from .transcript import damage_lines
from .versions import PRESET_DESCRIPTIONS
from .workload import WorkloadSpec


def cmd_scenarios(a) -> int:
    from .scenario import gallery, load, unified_gallery

    items = []
    for name in [*gallery(), *unified_gallery()]:  # HiMamba's gallery, then the unified family's
        sc = load(name)
        items.append(dict(name=name, title=sc.title, reference=sc.reference, schedule=sc.schedule,
                          expect={p: e.get("outcome") for p, e in sc.expect.items()},
                          damage={p: damage_lines(e.get("double_frees") or [], e.get("leaked") or {})
                                  for p, e in sc.expect.items()}))
    if a.json:
        print(json.dumps(items, indent=1))
    else:
        width = max(len(i["name"]) for i in items) + 2
        for it in items:
            print(f"{it['name']:<{width}} {it['title']}")
            for p, o in it["expect"].items():  # the outcome, and what a clean-looking run still broke
                hurt = it["damage"].get(p)
                what = "assertion" if o == "assertion" else "no assertion"
                print(f"{'':{width}} {p:<13} {what}" + (f"; damage: {'; '.join(hurt)}" if hurt else ""))
        print("\npresets: " + "; ".join(f"{p} = {d}" for p, d in PRESET_DESCRIPTIONS.items()))
        print("unified presets (SGLang's UnifiedRadixCache): unified_0_5_16 = release 0.5.16, before #31902; "
              "unified_0_5_17 = release 0.5.17, #31902 drops a refill under a node never backed up")
    return 0


def cmd_workload(a) -> int:
    from .progress import progress_for
    from .versions import PRESETS as known
    from .workload import crash_rates, table

    bad = [p for p in a.presets if p not in known]
    if bad:
        raise UsageError(f"unknown preset(s) {', '.join(shown(p, 40) for p in bad[:5])}; choose from "
                         f"{', '.join(known)}")
    if len(set(a.presets)) != len(a.presets):
        raise UsageError("--presets names a preset twice; name each once")
    streams, requests = whole("streams", a.streams), whole("requests", a.requests)
    seed, jobs = whole("seed", a.seed), parse_jobs(a.jobs)
    pressures = [decimal("pressures", p) for p in a.pressures]
    if len(pressures) > 100:
        raise UsageError("--pressures takes at most 100 values")
    turns = streams * requests * len(a.presets) * len(pressures)
    if turns > MAX_WORKLOAD_TURNS:
        raise UsageError(f"this workload has {turns:,} chat turns (streams x requests x presets x pressures); keep "
                         f"it under {MAX_WORKLOAD_TURNS:,}")
    bar = progress_for("workload", a.progress)
    try:
        rows = crash_rates(a.presets, pressures, streams, seed, jobs, WorkloadSpec(requests=requests), bar)
    finally:
        if bar is not None:
            bar.close()
    print(json.dumps(rows, indent=1) if a.json else table(rows))
    if a.signatures and not a.json:
        for r in rows:
            for sig, n in r["signatures"].items():
                print(f"{r['preset']:>14} p={r['pressure']:<5g} {n:4d}  {sig}")
    return 0
