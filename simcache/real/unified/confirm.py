"""``explore --confirm-real`` on a unified preset: each failure the explorer reports, replayed on SGLang's own
``UnifiedRadixCache`` (``run.run_unified``), and judged as ``simcache.real.confirm`` judges HiMamba's: *confirmed*
when the real code raises the same exception in the same function on the same schedule, else *not reproduced*,
printed with what the real code did instead.

The word names the source as for HiMamba (a release such as ``0.5.16``, or a path); a path is read with the layout
of the release the preset models (``simcache.unified.RELEASE_OF``).
"""
from __future__ import annotations

from ...scenario import Scenario
from ..compare import loaded_for, parse_word
from ..confirm import Confirmation, replay
from ..loader import Loaded
from .run import run_unified
from .targets import target_for


def loaded_unified(word: str, preset: str) -> Loaded:
    """The unified target the word names, loaded once per process and source."""
    from ...errors import ConfigError
    from ...unified.versions import RELEASE_OF

    spec, version = parse_word(word)
    if spec == "installed":
        raise ConfigError("--confirm-real installed is for HiMamba presets; for a unified preset give a release "
                          "(e.g. 0.5.16) or the path of a checkout")
    try:
        target = target_for(version or RELEASE_OF[preset])
    except KeyError as e:
        raise ConfigError(str(e.args[0])) from None
    return loaded_for(spec, version, target)


def confirm_unified(cases: list[tuple[str, Scenario, str, str]], word: str, preset: str
                    ) -> tuple[str, list[Confirmation]]:
    """``simcache.real.confirm.confirm`` for a unified preset."""
    return replay(cases, loaded_unified(word, preset), run_unified)


def against_real_unified(run, word: str) -> tuple[str, dict]:
    """``run --against-real`` on a unified preset: the real code's run of the same scenario and schedule -> (the
    header line, the real result with ``differ``: the fields where the model's differs)."""
    from ..compare import real_outcome_line, same_run
    from ..run import FIELDS, diff

    loaded = loaded_unified(word, run.preset)
    real = run_unified(run.scenario, loaded, run.schedule, **same_run(run))  # an --ops window too (review1 #7)
    model = {k: run.result[k] for k in FIELDS}
    line = real_outcome_line(real, model, loaded.source.label, getattr(run, "narrowed", None))
    return line, dict(real, differ=diff(model, real))
