"""``python -m simcache real SCENARIO --preset unified_0_5_16 --sglang-version 0.5.16``: the unified class.

A ``unified_*`` preset selects SGLang's ``UnifiedRadixCache`` instead of the HiMamba class: the scenario runs on
the unified model (``simcache.unified``) and on the real class of the release the preset models (or of the source
named), and the two results are printed side by side, field by field, as ``simcache real`` prints HiMamba's.
"""
from __future__ import annotations

import argparse
import json

from ...cli_numbers import UsageError
from ...unified.run import run_model
from ...unified.versions import PRESETS, RELEASE_OF
from ..compare import side_by_side
from ..run import FIELDS, diff, linear_ops
from . import load_unified, target_for
from .run import run_unified


def cmd_real_unified(a: argparse.Namespace, memory_limit_mb: float | None = None) -> int:
    """The unified class's ``simcache real``; ``memory_limit_mb`` bounds the real code's run (``run_linear``)."""
    from ...scenario import load

    if a.preset not in PRESETS:
        raise UsageError(f"--preset {a.preset[:60]!r} is not a unified preset; choose one of {', '.join(PRESETS)}")
    if a.gallery:
        raise UsageError("--gallery runs the HiMamba gallery; give a unified scenario file instead")
    version = a.sglang_version or RELEASE_OF[a.preset]
    try:
        target_for(version)
    except KeyError as e:
        raise UsageError(f"{e.args[0]}; pick one of those with --sglang-version") from None
    if a.sglang == "installed":  # never a release in its place, unsaid
        raise UsageError("--sglang installed runs HiMamba's class; for a unified preset give --sglang PATH (a "
                         "checkout or unpacked wheel) or --sglang-version X.Y.Z")
    if a.scenario is None and not a.list_stubs:  # said before any download or load
        raise UsageError("give a SCENARIO (a YAML/JSON scenario file or an OPS.json) to run on the unified class")
    loaded = load_unified(version, path=a.sglang)
    if a.list_stubs:
        print(f"{loaded.source.label}: real modules {', '.join(sorted(loaded.real))}\nstubs:")
        print("\n".join(f"  {s}" for s in loaded.stub_list()))
        return 0
    sc = load(a.scenario)
    linear = linear_ops(sc, a.schedule)
    model = run_model(sc.config, linear, a.preset)
    real = run_unified(sc, loaded, ops=linear, memory_limit_mb=memory_limit_mb)
    if a.json:
        print(json.dumps(dict(scenario=sc.name, preset=a.preset, source=loaded.source.label,
                              differ=diff(model, real), model=model, real={k: real[k] for k in FIELDS}), indent=1))
    else:
        print(side_by_side(f"{sc.name}: the unified model beside SGLang's UnifiedRadixCache", model, real, a.preset,
                           loaded.source.label))
    return 0
