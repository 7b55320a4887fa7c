"""Where SGLang's files come from: a path the user names, a release wheel in the cache folder, or an installed sglang.

Vocabulary
- A *source* (``Source``) is a folder, the *root*, that holds ``sglang/srt/...``: an unpacked wheel, the
  ``python/`` folder of a source checkout, a release's files extracted into the cache folder, or (only when asked
  for by name) the folder an installed ``sglang`` lives in. ``label`` says which, for messages and headers.
- The *cache folder* is ``platformdirs.user_cache_dir("simcache")`` (``$SIMCACHE_CACHE_DIR`` overrides it). Its own
  folder for SGLang's files is ``<cache>/real/`` (``own_dir``), marked by a ``CACHEDIR.TAG`` that simcache writes when
  it makes the folder: release wheels under ``real/wheels/``, their extracted files under ``real/sglang/<version>/``,
  commits read from a git repository under ``real/git/<commit>/``. Nothing is written anywhere else; a folder named
  ``real`` that carries no marker is someone else's and is never written into or removed. ``clear_cache``
  (``simcache real --clear-cache``) removes ``<cache>/real`` only when it carries the marker.

Nothing is imported from a path the user did not name: ``root_of`` looks only at the folder named, its ``python/``, and
a parent only when the name says so (``.../sglang`` or ``.../sglang/srt``); ``installed()`` (``--sglang installed``)
is the only way to the installed package, and it only locates the folder (it imports nothing), on ``sys.path`` without
the current folder. ``fetch.resolve`` picks one of these from the command line's words; ``wheel.release`` fetches a
release.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
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


OWN = "real"  # simcache's folder inside the cache folder
TAG = "CACHEDIR.TAG"
TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This file is a cache directory tag created by simcache.real (SGLang's wheels and files).\n"
            "# For information about cache directory tags see https://bford.info/cachedir/\n")


def _marked(d: Path) -> bool:
    """``d`` is a plain folder holding simcache's marker (a ``CACHEDIR.TAG`` that names simcache.real)."""
    tag = d / TAG
    if d.is_symlink() or not d.is_dir() or tag.is_symlink() or not tag.is_file():
        return False
    try:
        with open(tag, "rb") as f:
            return f.read(4096).decode("utf-8", "replace") == TAG_TEXT
    except OSError:
        return False


def _not_ours(d: Path) -> str:
    what = "a symlink" if d.is_symlink() else "a file" if not d.is_dir() else f"a folder without simcache's {TAG}"
    return (f"{d} is {what}, so it is not simcache's cache folder; simcache neither writes into nor removes it: move "
            f"it away, or point ${CACHE_ENV} at another folder")


def own_dir() -> Path:
    """``<cache>/real``, simcache's folder for SGLang's files: made (with its marker) when missing, refused in one
    sentence when something else by that name is there."""
    base = cache_dir()
    try:
        base.mkdir(parents=True, exist_ok=True)  # the cache folder itself: wherever the user pointed it
        d = base / OWN
        if not d.exists() and not d.is_symlink():  # made whole, marker and all, then renamed into place
            tmp = Path(tempfile.mkdtemp(prefix=".real-", dir=base))
            try:
                (tmp / TAG).write_text(TAG_TEXT)
                tmp.chmod(0o755)
                os.rename(tmp, d)  # another process that made it first wins (its folder is not empty)
            except OSError:
                if not d.exists():
                    raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        raise SourceError(f"cannot make simcache's cache folder {base / OWN} ({e.strerror or e}); point "
                          f"${CACHE_ENV} at a folder you can write") from None
    if not _marked(d):
        raise SourceError(_not_ours(d))
    return d


def clear_cache() -> list[str]:
    """Remove ``<cache>/real`` (the wheels and files ``simcache.real`` keeps) when it carries simcache's marker; one
    sentence when a folder by that name is not simcache's. The lines to print: what was removed, what was left."""
    base = cache_dir()
    d = base / OWN
    if d.exists() or d.is_symlink():
        if not _marked(d):
            raise SourceError(_not_ours(d))
        shutil.rmtree(d)  # links inside are removed, never followed
        lines = [f"removed {d} (simcache's SGLang wheels and files)"]
    else:
        lines = [f"nothing to clear: {d} does not exist"]
    old = [base / sub for sub in ("sglang", "git") if (base / sub).exists()]
    if old:  # an older simcache kept its files there, unmarked: they may be the user's, so only said
        lines.append(f"left as they are: {', '.join(map(str, old))} (no marker of simcache's; an older simcache kept "
                     f"wheels there: remove them yourself if they are its)")
    return lines


def root_of(path: str | os.PathLike) -> Path:
    """The folder holding ``sglang/srt`` for a checkout (``<path>/python``), an unpacked wheel or site-packages
    (``<path>``), or the ``sglang`` or ``sglang/srt`` folder inside either; never a parent the name does not name."""
    text = os.fspath(path)
    if not str(text).strip():
        raise SourceError("--sglang got an empty path; give the folder of a SGLang checkout or unpacked wheel (for "
                          "the current folder, give .)")
    p = Path(text).expanduser()
    if not p.exists():
        raise SourceError(f"--sglang {path}: no such folder; give a SGLang checkout or an unpacked wheel")
    if not p.is_dir():
        raise SourceError(f"--sglang {path} is not a folder; give a SGLang checkout or an unpacked wheel (a .whl "
                          f"file: unzip it first, or use --sglang-version)")
    p = p.resolve()
    cands = [p, p / "python"]
    if p.name == "sglang":  # the package folder itself
        cands.append(p.parent)
    if p.name == "srt" and p.parent.name == "sglang":  # its srt folder
        cands.append(p.parent.parent)
    for cand in cands:
        if (cand / "sglang" / "srt").is_dir():
            return cand
    raise SourceError(f"--sglang {path} holds no sglang/srt folder; give the top of a SGLang checkout (with "
                      f"python/sglang/) or an unpacked wheel (with sglang/)")


def from_path(path: str | os.PathLike) -> Source:
    root = root_of(path)
    return Source(root, str(root), "path")  # the folder actually loaded, whatever word named it


def installed() -> Source:
    """The installed ``sglang`` package's folder (located, not imported), searched on ``sys.path`` without the
    current folder (``python -m`` puts it first, so a ``./sglang`` would otherwise be found)."""
    here = os.path.realpath(os.getcwd())
    saved = sys.path[:]
    try:  # every finder (an editable install's too) looks, but never in the current folder
        sys.path[:] = [p for p in saved if p and os.path.realpath(p) != here]
        spec = importlib.util.find_spec("sglang")
    finally:
        sys.path[:] = saved
    if spec is None or not spec.submodule_search_locations:
        raise SourceError("--sglang installed: no sglang package is installed in this Python; give --sglang PATH "
                          "or --sglang-version X.Y.Z instead")
    pkg = Path(next(iter(spec.submodule_search_locations))).resolve()
    return Source(pkg.parent, f"installed sglang at {pkg}", "installed")
