"""Targets: which of SGLang's files ``simcache.real`` loads for one cache class, under which module names.

A *target* is a small declarative description: the real modules to load, dependencies first (each is a file
``<root>/<module path>.py`` of a source checkout or unpacked wheel), which of them may be absent (then stubbed), the
class to build, and the stubs with contents (``stubs.py``); every other ``sglang.*`` import the loaded files make
becomes an inert stub module (``loader.py``). Another cache class (``UnifiedRadixCache``) is another ``Target``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import stubs

MEM_CACHE = "sglang.srt.mem_cache"


@dataclass(frozen=True)
class Target:
    name: str  # short name, for messages ("hi_mamba")
    cls: str  # "module:Class" of the cache class built over the fakes
    modules: tuple[str, ...]  # real modules, in load order (dependencies first)
    optional: frozenset[str] = frozenset()  # of ``modules``: loaded when the source has them, else stubbed
    stubs: Callable[[], dict[str, dict[str, object]]] = field(default=stubs.common)  # module -> names it defines

    def path_of(self, module: str) -> str:
        """The file of ``module`` relative to the source root (``sglang/srt/mem_cache/radix_cache.py``)."""
        return module.replace(".", "/") + ".py"

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(self.path_of(m) for m in self.modules)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(m for m in self.modules if m not in self.optional)


def _mc(*names: str) -> tuple[str, ...]:
    return tuple(f"{MEM_CACHE}.{n}" for n in names)


# SGLang's HiMambaRadixCache: five files at every commit; from 7f67965b on (and in the release wheels) its files also
# import the real hicache_storage (pool names, transfer records), utils (hashing helpers) and events (the KV-event
# mixin), which load unmodified when present.
HI_MAMBA = Target(
    name="hi_mamba",
    cls=f"{MEM_CACHE}.hi_mamba_radix_cache:HiMambaRadixCache",
    modules=_mc("evict_policy", "hicache_storage", "utils", "base_prefix_cache", "events", "radix_cache",
                "mamba_radix_cache", "hi_mamba_radix_cache"),
    optional=frozenset(_mc("hicache_storage", "utils", "events")),
    stubs=stubs.hi_mamba,
)

TARGETS: dict[str, Target] = {HI_MAMBA.name: HI_MAMBA}
