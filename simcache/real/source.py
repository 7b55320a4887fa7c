"""Where SGLang's files come from: a path the user names, a release wheel in the cache folder, or an installed sglang.

Vocabulary
- A *source* (``Source``) is a folder, the *root*, that holds ``sglang/srt/...``: an unpacked wheel, the
  ``python/`` folder of a source checkout, a release's files extracted into the cache folder, or (only when asked
  for by name) the folder an installed ``sglang`` lives in. ``label`` says which, for messages and headers.
- The *cache folder* is ``platformdirs.user_cache_dir("simcache")`` (``$SIMCACHE_CACHE_DIR`` overrides it): release
  wheels and their extracted files live under ``<cache>/sglang/``, commits read from a git repository under
  ``<cache>/git/``. Nothing is written anywhere else; ``clear_cache`` (``simcache real --clear-cache``) removes it.

Nothing is imported from a path the user did not name: ``installed()`` (``--sglang installed``) is the only way to
the installed package, and it only locates the folder (it imports nothing). ``fetch.resolve`` picks one of these
from the command line's words; ``wheel.release`` fetches a release.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import SimcacheError

CACHE_ENV = "SIMCACHE_CACHE_DIR"


class SourceError(SimcacheError):
    """SGLang's files cannot be found, fetched, verified or loaded; the sentence says what to do."""


@dataclass(frozen=True)
class Source:
    root: Path  # the folder holding sglang/
    label: str  # "sglang 0.5.17 (wheel, sha256 575e38f5...)", "/path/to/checkout", "git 7f67965b"
    kind: str  # "path", "release", "installed", "git"
    version: str | None = None  # the release (kind "release") or the full commit id (kind "git")


def cache_dir() -> Path:
    """The cache folder (``$SIMCACHE_CACHE_DIR``, else the platform's user cache folder for simcache)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser().absolute()
    import platformdirs

    return Path(platformdirs.user_cache_dir("simcache"))


def clear_cache() -> Path:
    """Remove the wheels and files ``simcache.real`` keeps (``<cache>/sglang`` and ``<cache>/git``); the folder."""
    base = cache_dir()
    for sub in ("sglang", "git"):
        target = base / sub
        if target.is_symlink():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
    return base


def root_of(path: str | os.PathLike) -> Path:
    """The folder holding ``sglang/srt`` for a checkout (``<path>/python``), an unpacked wheel or site-packages
    (``<path>``), or a path inside either (``.../sglang`` itself)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise SourceError(f"--sglang {path}: no such folder; give a SGLang checkout or an unpacked wheel")
    if not p.is_dir():
        raise SourceError(f"--sglang {path} is not a folder; give a SGLang checkout or an unpacked wheel (a .whl "
                          f"file: unzip it first, or use --sglang-version)")
    p = p.resolve()
    for cand in (p, p / "python", p.parent, p.parent.parent):
        if (cand / "sglang" / "srt").is_dir():
            return cand
    raise SourceError(f"--sglang {path} holds no sglang/srt folder; give the top of a SGLang checkout (with "
                      f"python/sglang/) or an unpacked wheel (with sglang/)")


def from_path(path: str | os.PathLike) -> Source:
    root = root_of(path)
    return Source(root, str(Path(path).expanduser()), "path")


def installed() -> Source:
    """The installed ``sglang`` package's folder (located, not imported)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SourceError("--sglang installed: no sglang package is installed in this Python; give --sglang PATH "
                          "or --sglang-version X.Y.Z instead")
    pkg = Path(next(iter(spec.submodule_search_locations)))
    return Source(pkg.parent, f"installed sglang at {pkg}", "installed")
