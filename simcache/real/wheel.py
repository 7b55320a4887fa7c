"""A release's files from its wheel on the package index: found, downloaded once, verified, extracted into the cache.

- The index is PyPI's JSON simple API (``$SIMCACHE_INDEX_URL``, default ``https://pypi.org/simple/``, asked with
  ``Accept: application/vnd.pypi.simple.v1+json``): it lists every file of ``sglang`` with its sha256 and size.
- Any wheel of the version will do (the cache files are plain Python); cp311 manylinux x86_64 is preferred.
- The download is refused before it starts when the index says it is over ``MAX_WHEEL`` bytes, stops if it grows
  past what the index said, and is checked against the index's sha256 (and against ``PINNED``, the hashes this
  project has seen) before it is kept: ``<cache>/real/wheels/<file>`` (a wheel an older simcache kept in
  ``<cache>/sglang/wheels/`` is copied over when its sha256 matches, never moved or trusted otherwise).
- Only the files asked for are extracted, into ``<cache>/real/sglang/<version>/sglang/...``, each written atomically,
  through folders that are checked not to be symlinks; ``files.json`` keeps their sha256, checked at each use (one
  that cannot be read as such is ignored: the files are extracted again).

The standard library's ``urllib`` does the HTTP: one GET for the index and one for the wheel need no dependency.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from .cachefs import safe_dir, sha256_file, write_atomic
from .source import Source, SourceError, cache_dir, own_dir

INDEX_ENV = "SIMCACHE_INDEX_URL"
DEFAULT_INDEX = "https://pypi.org/simple/"
ACCEPT = "application/vnd.pypi.simple.v1+json"
MAX_INDEX = 50_000_000  # bytes of index JSON (sglang's is about 0.2 MB)
MAX_WHEEL = 300_000_000  # bytes: sglang's wheels are 22-39 MB
MAX_MEMBER = 10_000_000  # bytes of one extracted file
TIMEOUT_S = 60
PINNED = {  # wheel file -> sha256, as the index published it when this project pinned it
    "sglang-0.5.17-cp311-cp311-manylinux_2_34_x86_64.whl":
        "575e38f5683624ded3b4bb267f637a098e5ed37d13a1d1ff5ea09bd781a04d16",
    # the releases simcache.real.unified covers (#39)
    **{f"sglang-{v}-cp311-cp311-manylinux_2_34_x86_64.whl": h for v, h in (
        ("0.5.13", "9d26266ab7e99165098f9e173f4a5a0ef6a0b64a6f30ef0b5ee859eead37e75a"),
        ("0.5.13.post1", "1c1653ecf2893c7d7b1cf0c3e1cc9b7550ebad95c809de2f44bcc91b7a1e1fe3"),
        ("0.5.14", "4fe16056b45c8aca00f5f90ceb174dc3a62a3f5dccf159c791370795cd00fc99"),
        ("0.5.15", "21492759b4b99e117bd81610f633422f3fdae2896c2cde6931eab886deccc44f"),
        ("0.5.16", "d5f345a18953dd35df568ac56bdcb7f5ee910ab39efea4469b714556d1070713"),
        ("0.5.18", "e97b585dd2d5db2802599feba47c84cce972f5e1231a6816fef996200207b5cf"),
    )},
}
Say = Callable[[str], None]


def _stderr(text: str) -> None:
    print(f"simcache: {text}", file=sys.stderr, flush=True)


def _get(url: str, limit: int, accept: str | None = None):
    req = urllib.request.Request(url, headers={"User-Agent": "simcache", **({"Accept": accept} if accept else {})})
    try:
        return urllib.request.urlopen(req, timeout=TIMEOUT_S)  # noqa: S310 -- https (or the test's local index)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise SourceError(f"the package index has no sglang at {url} (HTTP 404)") from None
        raise SourceError(f"the package index answered HTTP {e.code} for {url}; try again later") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        why = getattr(e, "reason", None) or e
        raise SourceError(f"cannot reach the package index at {url} ({why}); check the network, or give "
                          f"--sglang PATH to a local checkout") from None


def index(name: str = "sglang") -> dict:
    """The index's JSON for ``name``: ``{"files": [{"filename", "url", "hashes", "size", ...}], "versions": [...]}``."""
    base = os.environ.get(INDEX_ENV) or DEFAULT_INDEX
    url = base.rstrip("/") + f"/{name}/"
    with _get(url, MAX_INDEX, ACCEPT) as r:
        data = r.read(MAX_INDEX + 1)
    if len(data) > MAX_INDEX:
        raise SourceError(f"the package index's answer for {name} is over {MAX_INDEX // 1_000_000} MB; refusing it")
    try:
        doc = json.loads(data)
    except ValueError:
        raise SourceError(f"the package index at {url} did not answer in the JSON simple API; set ${INDEX_ENV} to "
                          f"an index that does (like https://pypi.org/simple/)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise SourceError(f"the package index at {url} gave no file list for {name}")
    return doc


def _rank(filename: str) -> tuple[int, int]:
    return (0 if "-cp311-" in filename else 1, 0 if "manylinux" in filename and "x86_64" in filename else 1)


_HEX64 = frozenset("0123456789abcdef")


def _usable(f) -> bool:
    """An index entry of a wheel with the types the JSON simple API gives: file name, url, a 64-hex sha256, a size."""
    if not isinstance(f, dict) or not all(isinstance(f.get(k), str) for k in ("filename", "url")):
        return False
    sha = f.get("hashes", {}).get("sha256") if isinstance(f.get("hashes"), dict) else None
    size = f.get("size")
    return (f["filename"].endswith(".whl") and isinstance(sha, str) and len(sha) == 64 and set(sha.lower()) <= _HEX64
            and (size is None or type(size) is int))


def _release_order(version: str) -> tuple:
    """A sort key that puts ``0.5.9`` before ``0.5.18`` (the index lists versions as text, so its last is not the
    newest): the leading numbers of each dotted part, then the text for ties (``0.5.13`` before ``0.5.13.post1``)."""
    parts = []
    for part in version.split("."):
        digits = part[:len(part) - len(part.lstrip("0123456789"))]
        parts.append(int(digits[:18]) if digits else -1)  # an index is not trusted: no 5,000-digit int
    return (tuple(parts), version)


def pick(doc: dict, version: str) -> dict:
    """The wheel of ``version`` to fetch (cp311 manylinux x86_64 first, else any), or one sentence why none."""
    wheels = [f for f in doc["files"] if _usable(f) and f["filename"].split("-")[1:2] == [version]]
    if not wheels:
        listed = doc.get("versions")
        versions = [v for v in listed if isinstance(v, str)] if isinstance(listed, list) else []
        if version not in versions:
            latest = f" (the newest is {max(versions, key=_release_order)})" if versions else ""
            raise SourceError(f"sglang has no release {version} on the package index{latest}; give a released "
                              f"version like 0.5.17")
        raise SourceError(f"sglang {version} has no wheel with a sha256 on the package index; give --sglang PATH "
                          f"to an unpacked copy instead")
    wheels.sort(key=lambda f: (bool(f.get("yanked")), *_rank(f["filename"]), f["filename"]))
    return wheels[0]


def download(entry: dict, base: Path, say: Say) -> Path:
    """The wheel ``entry`` names, in ``<simcache's folder base>/wheels/``: reused when its sha256 matches (or copied
    from an older simcache's ``<cache>/sglang/wheels/`` when that one's does), else fetched and verified."""
    name, want = entry["filename"], entry["hashes"]["sha256"].lower()
    if "/" in name or "\\" in name or name.startswith(".") or not name.isprintable():
        raise SourceError(f"the package index named a wheel {name[:60]!r}; refusing a file name with a path or a "
                          f"control character in it")
    pinned = PINNED.get(name)
    if pinned and pinned != want:
        raise SourceError(f"the package index's sha256 for {name} is {want[:12]}..., not the {pinned[:12]}... this "
                          f"project pinned; refusing it")
    folder = safe_dir(base, Path("wheels"))
    path = folder / name
    if path.is_file() and not path.is_symlink() and sha256_file(path) == want:
        return path
    if _copy_kept(cache_dir() / "sglang" / "wheels" / name, want, path):
        return path
    size = entry.get("size")
    if isinstance(size, int) and size > MAX_WHEEL:
        raise SourceError(f"{name} is {size / 1e6:.0f} MB, over the {MAX_WHEEL // 1_000_000} MB this tool fetches")
    limit = size if isinstance(size, int) and size > 0 else MAX_WHEEL
    say(f"downloading {name} ({limit / 1e6:.1f} MB) into {folder}")
    tmp = folder / f".{name}.{secrets.token_hex(6)}.part"
    h, got = hashlib.sha256(), 0
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as f, _get(entry["url"], limit) as r:
            while chunk := r.read(1 << 20):
                got += len(chunk)
                if got > limit:
                    raise SourceError(f"the download of {name} grew past the {limit:,} bytes the index announced; "
                                      f"refusing it")
                h.update(chunk)
                f.write(chunk)
        if h.hexdigest() != want:
            raise SourceError(f"the downloaded {name} has sha256 {h.hexdigest()[:12]}..., not the index's "
                              f"{want[:12]}...; nothing was kept, try again")
        os.replace(tmp, path)
    except (OSError, ValueError, urllib.error.URLError) as e:  # ValueError: a NUL in a name, a bad URL
        raise SourceError(f"the download of {name} failed ({getattr(e, 'reason', None) or e}); try again") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _copy_kept(old: Path, want: str, path: Path) -> bool:
    """Copy a wheel an older simcache kept (unmarked, so only read) when its sha256 is the index's; True if done."""
    try:
        if old.is_symlink() or not old.is_file() or sha256_file(old) != want:
            return False
        write_atomic(path, old.read_bytes(), path.parent.parent)
    except OSError:
        return False
    return sha256_file(path) == want


def extract(wheel: Path, members: tuple[str, ...], dest: Path, base: Path) -> dict[str, str]:
    """Write each of ``members`` the wheel has into ``dest`` (under ``base``); their sha256 by name."""
    out = {}
    try:
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
            for m in members:
                if m not in names:
                    continue
                info = z.getinfo(m)
                if info.file_size > MAX_MEMBER:
                    raise SourceError(f"{m} in {wheel.name} is over {MAX_MEMBER // 1_000_000} MB; refusing it")
                data = z.read(m)
                write_atomic(dest / m, data, base)
                out[m] = hashlib.sha256(data).hexdigest()
    except (zipfile.BadZipFile, OSError) as e:
        raise SourceError(f"cannot read {wheel.name} ({e}); clear the cache with `python -m simcache real "
                          f"--clear-cache` and try again") from None
    return out


def release(version: str, files: tuple[str, ...], say: Say = _stderr) -> Source:
    """``files`` of sglang ``version``, from the cache folder or its wheel (fetched once, verified, extracted)."""
    base = own_dir()
    dest = safe_dir(base, Path("sglang", version))  # a planted symlink is refused, never followed
    manifest = _manifest(dest / "files.json")
    have, absent = manifest.get("files", {}), manifest.get("absent", [])
    wanted = [f for f in files if f not in absent]
    fresh = all(f in have and _intact(dest, f, have[f]) for f in wanted)
    if not fresh or not manifest.get("wheel"):
        entry = pick(index(), version)
        wheel = download(entry, base, say)
        got = extract(wheel, tuple(files), dest, base)
        have = {**have, **got}
        gone = (set(absent) | set(files)) - set(have)
        manifest = dict(wheel=entry["filename"], sha256=entry["hashes"]["sha256"], files=have, absent=sorted(gone))
        write_atomic(dest / "files.json", json.dumps(manifest, indent=1).encode(), base)
    return Source(dest, f"sglang {version} ({manifest['wheel']}, sha256 {manifest['sha256'][:12]}...)", "release",
                  version)


def _manifest(path: Path) -> dict:
    """``files.json`` when it is one (the wheel's name and sha256, each file's sha256, the files it lacks); else
    ``{}``: a missing, unreadable or malformed one means "extract again"."""
    if not path.is_file() or path.is_symlink():
        return {}
    try:
        doc = json.loads(path.read_bytes()[:MAX_MEMBER])
    except (OSError, ValueError):
        return {}
    ok = (isinstance(doc, dict) and isinstance(doc.get("wheel"), str) and isinstance(doc.get("sha256"), str)
          and isinstance(doc.get("files"), dict) and isinstance(doc.get("absent"), list)
          and all(isinstance(k, str) and isinstance(v, str) for k, v in doc["files"].items())
          and all(isinstance(x, str) for x in doc["absent"]))
    return doc if ok else {}


def _intact(dest: Path, rel: str, sha: str) -> bool:
    """``dest/rel`` is a plain file, reached through plain folders, with the sha256 files.json keeps."""
    path, d = dest / rel, dest
    for part in Path(rel).parent.parts:
        d = d / part
        if d.is_symlink() or not d.is_dir():
            return False
    return path.is_file() and not path.is_symlink() and sha256_file(path) == sha
