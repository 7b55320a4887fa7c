"""``simcache.unified``: SGLang's ``UnifiedRadixCache`` (the default cache for hybrid Mamba models with HiCache
since #27759), modelled beside the HiMamba cache and sharing with it the driver, the operation vocabulary, the
pools, the controller and the node fields the views read (issue #39).

- ``cache.UnifiedRadixCache``: the tree, the Full and Mamba components (``components``), their leaf sets and LRU
  lists, the host tier and L3 storage (``tree``, ``evict``, ``hicache``, ``storage``);
- ``versions``: the presets ``unified_0_5_16`` and ``unified_0_5_17``;
- ``run``: the scheduler side (``UnifiedDriver``) and ``run_model``, whose result has ``simcache.real``'s fields;
- ``compare``: random sequences and their field-by-field comparison with SGLang's real code.
"""
from __future__ import annotations

from .cache import UnifiedRadixCache
from .run import run_model
from .versions import PRESETS, RELEASE_OF, UnifiedFlags

__all__ = ["PRESETS", "RELEASE_OF", "UnifiedFlags", "UnifiedRadixCache", "run_model"]
