"""The source the user asked for (``--sglang PATH``, ``--sglang installed``, ``--sglang-version X.Y.Z``), and a
commit's files from a git repository (the mirror of SGLang's history), extracted into the cache folder."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .cachefs import safe_dir, write_atomic
from .source import Source, SourceError, cache_dir, from_path, installed

VERSION = re.compile(r"[0-9]+(\.[0-9]+){1,3}([.-]?(post|rc|a|b|dev)[0-9]*)?")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def from_git(git_dir: str | os.PathLike, commit: str, files: tuple[str, ...]) -> Source:
    """``files`` (paths under ``python/``, e.g. ``sglang/srt/mem_cache/radix_cache.py``) at ``commit`` of the git
    repository ``git_dir`` (bare or not), extracted once into ``<cache>/git/<commit>/``."""
    if not _COMMIT.fullmatch(commit):
        raise SourceError(f"{commit!r} is not a commit id; give 7 to 40 hex digits")
    full = _git(git_dir, "rev-parse", "--verify", f"{commit}^{{commit}}").strip()
    dest = safe_dir(cache_dir(), Path("git", full))  # a planted symlink is refused, never followed
    for rel in files:
        target = dest / rel
        if target.is_file():
            continue
        try:
            data = _git(git_dir, "show", f"{full}:python/{rel}", binary=True)
        except SourceError:
            continue  # an optional file the commit does not have; the loader says if a required one is missing
        write_atomic(target, data, cache_dir())
    return Source(dest, f"git {full[:9]}", "git", full)


def _git(git_dir, *args: str, binary: bool = False):
    try:
        out = subprocess.run(["git", f"--git-dir={os.fspath(git_dir)}", *args], capture_output=True, check=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise SourceError(f"git {' '.join(args[:2])} failed in {git_dir}: {getattr(e, 'stderr', b'') or e}") \
            from None
    return out.stdout if binary else out.stdout.decode()


def resolve(spec: str | None = None, version: str | None = None, files: tuple[str, ...] = ()) -> Source:
    """The source the user asked for: ``spec`` = a path or ``"installed"`` (``--sglang``), or ``version`` = a
    release (``--sglang-version``; its wheel is fetched into the cache folder, ``files`` extracted)."""
    if (spec is None) == (version is None):
        raise SourceError("give exactly one of --sglang PATH (or --sglang installed) and --sglang-version X.Y.Z")
    if version is not None:
        if not VERSION.fullmatch(version):
            raise SourceError(f"--sglang-version {version[:40]!r} is not a version number; give one like 0.5.17")
        from .wheel import release

        return release(version, files)
    if spec == "installed":
        return installed()
    return from_path(spec)
