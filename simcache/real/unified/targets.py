"""Targets: which of SGLang's files make up ``UnifiedRadixCache`` at each covered version (``simcache.real``'s
``Target``, one per version).

Vocabulary
- *layout* ``components``: one class (``unified_radix_cache.py``) holding the tree, plus per-kind components in
  ``mem_cache/unified_cache_components/`` (the mirror's ``7f67965b4``, releases 0.5.13 to 0.5.16).
- *layout* ``tree_core``: a controller (``unified_radix_cache.py``) that does the I/O, plus a ``UnifiedTreeCore``
  (``mem_cache/unified_cache/``) that owns the tree, the leaf sets and the LRUs; nodes are addressed by id
  (0.5.17 on; from 0.5.23 the default core is compiled, and ``CacheInitParams.tree_core_backend`` forces Python).
- *late host alloc*: from 0.5.16 a prefetch reserves host KV only when its L3 hit count arrives (the cache's
  storage-hit drain), not when it is issued.
- A *package* module is a folder's ``__init__.py``; the modules are listed dependencies first, as
  ``simcache.real.loader.load`` runs them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..targets import MEM_CACHE, Target
from . import stubs

MIRROR_COMMIT = "7f67965b4dbbbedbce470af5ead78ff0af0f00da"  # ziruiliu/sglang_exp, 2026-06-22
CLASS = f"{MEM_CACHE}.unified_radix_cache:UnifiedRadixCache"


@dataclass(frozen=True)
class UnifiedTarget(Target):
    layout: str = "components"  # "components" | "tree_core"
    late_host_alloc: bool = False
    packages: frozenset[str] = frozenset()  # of ``modules``: folders, loaded from their __init__.py
    released: str = ""  # the release date (or the commit's date)
    base_module: str = ""  # the components' base module (ComponentType, the access clock)

    def path_of(self, module: str) -> str:
        base = module.replace(".", "/")
        return base + "/__init__.py" if module in self.packages else base + ".py"

    @property
    def is_tree_core(self) -> bool:
        return self.layout == "tree_core"


def _mc(*names: str) -> tuple[str, ...]:
    return tuple(f"{MEM_CACHE}.{n}" if not n.startswith("sglang.") else n for n in names)


_BASE = ("base_prefix_cache", "evict_policy", "utils", "events", "hicache_storage", "cache_init_params", "radix_cache")
_SESSION = "sglang.srt.session.streaming_session"
_COMPONENTS = _mc(*_BASE, "unified_cache_components.tree_component", "unified_cache_components.full_component",
                  "unified_cache_components.mamba_component", "unified_cache_components.swa_component",
                  "unified_cache_components", _SESSION, "unified_radix_cache")
_TREE_CORE = _mc(*_BASE, "unified_cache", "unified_cache.component_type", "unified_cache.cache_action",
                 "unified_cache.components.tree_component", "unified_cache.components.full_component",
                 "unified_cache.components.mamba_component", "unified_cache.components.swa_component",
                 "unified_cache.components", "unified_cache.session_ref_tracker", "unified_cache.tree_core_registry",
                 "unified_cache.unified_tree_core_interface", "unified_cache.unified_tree_core", _SESSION,
                 "unified_radix_cache")


def _components(name: str, late: bool, released: str) -> UnifiedTarget:
    return UnifiedTarget(name=name, cls=CLASS, modules=_COMPONENTS, stubs=stubs.unified, layout="components",
                         late_host_alloc=late, packages=frozenset(_mc("unified_cache_components")),
                         released=released, base_module=f"{MEM_CACHE}.unified_cache_components.tree_component")


def _tree_core(name: str, released: str) -> UnifiedTarget:
    return UnifiedTarget(name=name, cls=CLASS, modules=_TREE_CORE, stubs=stubs.unified, layout="tree_core",
                         late_host_alloc=True, packages=frozenset(_mc("unified_cache", "unified_cache.components")),
                         released=released, base_module=f"{MEM_CACHE}.unified_cache.components.tree_component")


# version (or the mirror commit's first 9 digits) -> its target; the dates are the releases' upload dates
TARGETS: dict[str, UnifiedTarget] = {t.name: t for t in (
    _components(MIRROR_COMMIT[:9], False, "2026-06-22"),
    _components("0.5.13", False, "2026-06-11"),
    _components("0.5.13.post1", False, "2026-06-15"),
    _components("0.5.14", False, "2026-06-26"),
    _components("0.5.15", False, "2026-07-10"),
    _components("0.5.16", True, "2026-07-25"),
    _tree_core("0.5.17", "2026-08-08"),
    _tree_core("0.5.18", "2026-08-21"),
)}
RELEASES = tuple(v for v in TARGETS if v[0].isdigit() and "." in v)


def target_for(version: str) -> UnifiedTarget:
    """The target of a release (``0.5.17``) or of the mirror's commit (7 or more of its leading hex digits)."""
    if version in TARGETS:
        return TARGETS[version]
    if len(version) >= 7 and MIRROR_COMMIT.startswith(version):
        return TARGETS[MIRROR_COMMIT[:9]]
    known = ", ".join(TARGETS)
    raise KeyError(f"no unified target for {version!r}; covered: {known}")
