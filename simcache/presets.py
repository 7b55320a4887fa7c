"""Presets of both model families, by name: the HiMamba cache's (``simcache.versions``) and the unified cache's
(``simcache.unified.versions``).

A preset's name says which cache a run builds: ``pre_fix`` ... ``release_0_5_17`` build ``HiMambaRadixCache``,
``unified_0_5_16`` and ``unified_0_5_17`` build ``UnifiedRadixCache`` (issue #39). Everything that takes a preset
from a user (a scenario's ``preset`` and ``expect``, ``--preset``, ``simulate``, the explorer) looks it up here.
"""
from __future__ import annotations

from dataclasses import fields, replace

from .errors import ConfigError, shown
from .unified.versions import PRESETS as UNIFIED_PRESETS
from .unified.versions import UnifiedFlags
from .versions import PRESETS as HI_PRESETS
from .versions import Flags

HIMAMBA, UNIFIED = "himamba", "unified"
ALL_PRESETS: tuple[str, ...] = (*HI_PRESETS, *UNIFIED_PRESETS)


def family_of(name: str) -> str:
    """``"unified"`` for a unified preset, ``"himamba"`` for any other name (unknown ones included)."""
    return UNIFIED if name in UNIFIED_PRESETS else HIMAMBA


def is_unified(flags) -> bool:
    return isinstance(flags, UnifiedFlags)


def known(name) -> bool:
    return isinstance(name, str) and (name in HI_PRESETS or name in UNIFIED_PRESETS)


def preset_flags(name: str) -> Flags | UnifiedFlags:
    """The flags of a preset of either family; an unknown name is one sentence listing them all."""
    if not known(name):
        raise ConfigError(f"unknown preset {shown(name)}; choose one of {', '.join(ALL_PRESETS)}")
    return UNIFIED_PRESETS[name] if name in UNIFIED_PRESETS else HI_PRESETS[name]


def flag_names(flags) -> tuple[str, ...]:
    return tuple(f.name for f in fields(type(flags)))


def with_flags(flags: Flags | UnifiedFlags, changes: dict) -> Flags | UnifiedFlags:
    """``flags`` with ``changes`` applied (``Flags.with_`` for HiMamba; the same checks for a unified preset)."""
    if not changes:
        return flags
    if not is_unified(flags):
        return flags.with_(**changes)
    names = flag_names(flags)
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise ConfigError(f"unknown flag(s) {', '.join(shown(u, 40) for u in unknown[:5])} for a unified preset; "
                          f"known flags: {', '.join(names)}")
    for k, v in changes.items():
        if not isinstance(v, bool):
            raise ConfigError(f"flag {k} must be true or false, not {shown(v)}")
    return replace(flags, **changes)
