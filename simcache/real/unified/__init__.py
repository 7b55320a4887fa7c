"""``simcache.real.unified``: SGLang's own ``UnifiedRadixCache``, unmodified, on CPU over simcache's fakes (#39).

- ``targets``: the files of each covered version (``TARGETS``, ``target_for``), as ``simcache.real`` targets;
- ``stubs``, ``fakes``: what the unified files run over beyond ``simcache.real``'s own;
- ``driver``: the cache built as SGLang's factory builds it, driven through its public methods (``RealUnified``);
- ``race``: the prefetch-refill race of issue #39 as steps (``run_race``).

``load_unified`` resolves a source the way ``simcache real`` does (a path, a release, or a commit of a git mirror)
and loads the target of that version.
"""
from __future__ import annotations

import os

from ..fetch import from_git, resolve
from ..loader import Loaded, load
from .targets import MIRROR_COMMIT, RELEASES, TARGETS, UnifiedTarget, target_for

__all__ = ["MIRROR_COMMIT", "RELEASES", "TARGETS", "UnifiedTarget", "load_unified", "target_for"]


def load_unified(version: str, path: str | os.PathLike | None = None,
                 git_dir: str | os.PathLike | None = None) -> Loaded:
    """The unified target of ``version`` (a release, or the mirror's commit), loaded from ``path`` (a checkout or an
    unpacked wheel), from ``git_dir`` (a mirror of SGLang's history, for a commit), or from the release's wheel."""
    target = target_for(version)
    if path is not None:
        source = resolve(os.fspath(path), None, target.files)
    elif git_dir is not None:
        source = from_git(git_dir, MIRROR_COMMIT if MIRROR_COMMIT.startswith(version) else version, target.files)
    else:
        source = resolve(None, version, target.files)
    return load(source, target)
