"""Writing into the cache folder: plain folders only (a planted symlink is refused, never followed), files written
atomically through a fresh temporary file, hashes of what is there."""
from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from .source import SourceError


def safe_dir(base: Path, rel: Path) -> Path:
    """``base/rel`` as a real folder, each part created or checked: a planted symlink is refused, never followed."""
    base.mkdir(parents=True, exist_ok=True)  # the cache folder itself: wherever the user pointed it
    d = base
    for part in rel.parts:
        d = d / part
        if d.is_symlink() or (d.exists() and not d.is_dir()):
            raise SourceError(f"{d} in the cache folder is not a plain folder (a symlink or a file); remove it "
                              f"with `python -m simcache real --clear-cache`")
        if not d.exists():
            d.mkdir(mode=0o755)
    return d


def write_atomic(target: Path, data: bytes, base: Path) -> None:
    """Write ``data`` to ``target`` (inside ``base``, a folder of the cache) through a fresh temporary file."""
    rel = target.relative_to(base)
    folder = safe_dir(base, rel.parent)
    if target.is_symlink():
        target.unlink()  # a planted link is replaced, never written through
    tmp = folder / f".{target.name}.{secrets.token_hex(6)}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
