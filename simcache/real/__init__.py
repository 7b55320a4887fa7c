"""``simcache.real``: SGLang's own cache files, unmodified, run on CPU over simcache's fakes, beside the model.

Loading a file runs its code: the files come only from a path the user names (``--sglang PATH``), a release wheel
fetched into the cache folder and checked against the index's sha256 (``--sglang-version X.Y.Z``), or an installed
``sglang`` when asked for by name (``--sglang installed``). Nothing of SGLang's is in this repository.

- ``source``, ``fetch``, ``wheel``, ``cachefs``: where the files come from (``resolve``, ``from_git``, ``cache_dir``,
  ``clear_cache``), a release's wheel from the package index, verified and extracted;
- ``targets``: which files, module names and stubs make one cache class (``HI_MAMBA``);
- ``loader``: a fake ``sglang`` package per load, isolated from ``sys.modules`` (``load``, ``Loaded.active``);
- ``stubs``, ``fakes``, ``fake_controller``: what the real files run over;
- ``env``, ``driver``, ``run``: the real cache built, driven by the operations, read back (``run_real``, ``diff``).
"""
from __future__ import annotations

from .fetch import from_git, resolve
from .loader import Loaded, load
from .run import FIELDS, diff, run_real
from .source import Source, SourceError, cache_dir, clear_cache
from .targets import HI_MAMBA, TARGETS, Target

__all__ = ["FIELDS", "HI_MAMBA", "TARGETS", "Loaded", "Source", "SourceError", "Target", "cache_dir", "clear_cache",
           "diff", "from_git", "load", "load_target", "resolve", "run_real"]


def load_target(spec: str | None = None, version: str | None = None, target: Target = HI_MAMBA) -> Loaded:
    """Resolve the source the user named (``spec``: a path or ``"installed"``; or ``version``) and load ``target``
    from it."""
    return load(resolve(spec, version, target.files), target)
