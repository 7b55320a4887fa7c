"""The source the user asked for (``--sglang PATH``, ``--sglang installed``, ``--sglang-version X.Y.Z``), and a
commit's files from a git repository (the mirror of SGLang's history), kept in the cache folder and checked against
the commit's blob ids at each use."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from .cachefs import safe_dir, write_atomic
from .source import Source, SourceError, from_path, installed, own_dir

VERSION = re.compile(r"[0-9]+(\.[0-9]+){1,3}([.-]?(post|rc|a|b|dev)[0-9]*)?")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def from_git(git_dir: str | os.PathLike, commit: str, files: tuple[str, ...]) -> Source:
    """``files`` (paths under ``python/``, e.g. ``sglang/srt/mem_cache/radix_cache.py``) at ``commit`` of the git
    repository ``git_dir`` (bare or not), kept in ``<cache>/real/git/<commit>/``. Each use checks every kept file
    against the commit's blob id (git's sha1 of ``blob <size>\0<bytes>``) and writes it again when it differs; a
    symlink on the way is refused, never followed; a file the commit does not have is never left there."""
    if not _COMMIT.fullmatch(commit):
        raise SourceError(f"{commit!r} is not a commit id; give 7 to 40 hex digits")
    full = _git(git_dir, "rev-parse", "--verify", f"{commit}^{{commit}}").strip()
    base = own_dir()
    dest = safe_dir(base, Path("git", full))  # a planted symlink is refused, never followed
    blobs = _blob_ids(git_dir, full, files)
    for rel in files:
        target = dest / rel
        safe_dir(dest, Path(rel).parent)  # each folder on the way a plain one
        if rel not in blobs:  # an optional file this commit does not have: nothing may stand in for it
            if target.is_symlink() or target.is_file():
                target.unlink()
            continue
        if not target.is_symlink() and target.is_file() and blob_id(target.read_bytes()) == blobs[rel]:
            continue
        data = _git(git_dir, "cat-file", "blob", blobs[rel], binary=True)
        write_atomic(target, data, base)  # a planted link is replaced, never written through
    return Source(dest, f"git {full[:9]}", "git", full)


def blob_id(data: bytes) -> str:
    """Git's id of a blob holding ``data``: the sha1 of ``blob <len>\0`` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 -- git's object id, not security


def _blob_ids(git_dir, full: str, files: tuple[str, ...]) -> dict[str, str]:
    """{file: blob id} for each of ``files`` the commit has (one ``git ls-tree``)."""
    out = _git(git_dir, "ls-tree", "-z", full, "--", *(f"python/{rel}" for rel in files), binary=True)
    ids = {}
    for entry in out.split(b"\0"):
        head, _, path = entry.partition(b"\t")
        parts = head.split()
        if len(parts) == 3 and parts[1] == b"blob":
            ids[path.decode("utf-8", "replace").removeprefix("python/")] = parts[2].decode()
    return ids


def _git(git_dir, *args: str, binary: bool = False):
    try:
        out = subprocess.run(["git", f"--git-dir={os.fspath(git_dir)}", *args], capture_output=True, check=True,
                             timeout=60)
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        said = getattr(e, "stderr", None)
        why = " ".join(said.decode("utf-8", "replace").split()) if isinstance(said, bytes) and said.strip() else \
            str(e)
        raise SourceError(f"git {' '.join(args[:2])} failed in {os.fspath(git_dir)}: {why[:300]}") from None
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
