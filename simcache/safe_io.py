"""Reading and writing files safely: only the paths the user names, all or nothing, bounded.

Rules this module keeps (every file simcache reads or writes goes through it)
- **Reading** opens without blocking (a FIFO never hangs), refuses anything but a regular file (a folder, a FIFO,
  ``/dev/zero``), checks the size *before* reading and never reads more than the limit.
- **Writing a file** (``write_file``): ``-`` is standard output. A character device or a FIFO (``/dev/null``,
  ``/dev/stdout``, a named pipe) is written as a stream, never replaced. A regular file (or a missing one) is
  replaced atomically: a fresh temporary file is created beside it with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a planted
  ``.part`` file or symlink is never followed or reused), written, flushed, and renamed over the target. A symlink
  is followed to the file it names (that file is replaced, the link kept); a dangling symlink, a folder, a block
  device or a socket is refused. A failure removes the temporary file; a failing clean-up is ignored, so the user
  sees one sentence.
- **Writing a folder** (``write_folder``): everything is checked first; the files are written into a fresh private
  temporary folder, then moved into place together; if any move fails the folder is put back as it was.
"""
from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .errors import FileError, OutputError, UnreadableFile

MAX_READ = 10_000_000  # bytes: a scenario file is a few KB; 10 MB is generous


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def said(path: str | os.PathLike, limit: int = 80) -> str:
    """``path`` as said back in a sentence: cut in the middle of a long name so the sentence stays readable."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:40]}...{text[-20:]} ({len(text):,} characters)"


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def _fix(e: OSError, default: str, place: str = "path") -> str:
    """How to fix a write error: the disk's, the permissions' or ``default``."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"free some space or choose another {place}"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"choose a {place} you can write to"
    if e.errno == errno.ENAMETOOLONG:
        return "give a shorter name"
    return default


def probe(path: str | os.PathLike, what: str, follow: bool = True) -> os.stat_result | None:
    """``path``'s stat (``lstat`` with ``follow=False``), None when nothing is there; any other failure (a name over
    255 bytes, a symlink loop, a folder it may not search) is one sentence naming ``what``, never a traceback."""
    try:
        return os.stat(path) if follow else os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        fix = "give a shorter name" if e.errno == errno.ENAMETOOLONG else "choose another path"
        raise FileError(f"cannot use {what} {said(path)}: {_why(e)}; {fix}") from None
    except ValueError:  # a NUL byte in the name
        raise FileError(f"{what} {str(path)!r} holds a NUL byte; give a plain path") from None


def read_bytes(path: str | os.PathLike, limit: int = MAX_READ, what: str = "scenario file") -> bytes:
    """The bytes of the regular file ``path``, refused with one sentence if it is anything else or over ``limit``."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENOENT and os.path.islink(p):
            raise UnreadableFile(f"{what} {p} is a symlink to a missing file; point it at a file or give another "
                            f"path") from None
        raise UnreadableFile(f"cannot read {what} {p}: {_why(e)}; check the path") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"{what} {p} is {_kind(st.st_mode)}, not a file; give a YAML or JSON file")
        if st.st_size > limit:
            raise UnreadableFile(f"{p.name} is larger than {limit // 1_000_000} MB; keep a {what} under "
                            f"{limit // 1_000_000} MB")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while we read
                raise UnreadableFile(f"{p.name} is larger than {limit // 1_000_000} MB; keep a {what} under "
                                f"{limit // 1_000_000} MB")
    except OSError as e:
        raise UnreadableFile(f"cannot read {what} {p}: {_why(e)}; check the path") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _data(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view[: 1 << 20])
        view = view[n:]


def _remove_quietly(path: str | os.PathLike) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # the first error is the one the user needs; a failed clean-up must not hide it


def _temp_beside(target: Path, data: bytes, mode: int = 0o666) -> Path:
    """A new file beside ``target`` holding ``data``; created exclusively, never through a symlink."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = target.with_name(f".{target.name[:80]}.{secrets.token_hex(6)}.part")
        try:
            fd = os.open(tmp, flags, mode)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 random names taken
        raise OSError(errno.EEXIST, "could not create a temporary file")
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _remove_quietly(tmp)
        raise
    return tmp


def _stream(target: Path, data: bytes) -> None:
    fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _resolve(path: str | os.PathLike, what: str) -> tuple[Path, os.stat_result | None]:
    """(the file to write, its lstat or None when missing); refuses what ``write_file`` never writes."""
    target = Path(path)
    if not str(path) or not target.name:
        raise FileError(f"{what} must name a file, not {str(path)!r}; e.g. {what} run.html")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise FileError(f"cannot write {said(target)}: {_why(e)}; {_fix(e, 'choose another path')}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        real = Path(os.path.realpath(target))
        try:
            st = os.stat(real)
        except FileNotFoundError:
            raise FileError(f"{target} is a symlink to {real}, which does not exist; remove the link or give "
                            f"another path") from None
        except OSError as e:
            raise FileError(f"cannot write {target}: {_why(e)}; choose another path") from None
        target = real
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise FileError(f"{what} must name a file, not the folder {str(path)!r}; e.g. {what} run.html")
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise FileError(f"{path} is {_kind(st.st_mode)}; {what} writes only a regular file, standard output (-), "
                        f"a pipe or a character device")
    return target, st


def check_file(path: str | os.PathLike, what: str = "-o") -> None:
    """Refuse, before any work, a path ``write_file`` would refuse or whose folder is missing or read-only."""
    if str(path) == "-":
        return
    target, st = _resolve(path, what)
    if st is not None and not stat.S_ISREG(st.st_mode):
        return  # a device or a pipe: opened when written
    folder = target.parent
    where = probe(folder, what)
    if where is None or not stat.S_ISDIR(where.st_mode):
        raise FileError(f"cannot write {path}: its folder {folder} does not exist; check that its folder exists "
                        f"and is writable")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FileError(f"cannot write {path}: Permission denied in {folder}; check that its folder exists and is "
                        f"writable")


def write_file(path: str | os.PathLike, content: str | bytes, what: str = "-o") -> Path:
    """Write ``content`` to ``path`` as the module doc says; returns the path written. ``-`` is standard output."""
    data = _data(content)
    if str(path) == "-":
        try:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        except (OSError, ValueError, AttributeError) as e:
            why = getattr(e, "strerror", None) or str(e).rstrip(".")
            fix = _fix(e, "run it with standard output open") if isinstance(e, OSError) else \
                "run it with standard output open"
            if fix.startswith("free some space"):
                fix = "free some space"
            raise OutputError(f"cannot write to standard output: {why}; {fix}, or write to a file with {what} FILE",
                              getattr(e, "errno", None)) from None
        return Path("-")
    target, st = _resolve(path, what)
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            _stream(target, data)  # /dev/null, /dev/stdout, a pipe: write into it, never replace it
            return Path(path)
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666
        tmp = _temp_beside(target, data, mode)
        try:
            if st is not None:
                os.chmod(tmp, mode)  # keep the replaced file's permissions
            os.replace(tmp, target)
        except BaseException:
            _remove_quietly(tmp)
            raise
    except OSError as e:
        raise FileError(f"cannot write {path}: {_why(e)}; "
                        f"{_fix(e, 'check that its folder exists and is writable')}") from None
    return Path(path)


def check_folder(path: str | os.PathLike, names: list[str], what: str = "--out") -> Path:
    """Refuse, before any work, an output folder that cannot take ``names``; creates nothing."""
    if not str(path):
        raise FileError(f"{what} needs a folder name, like {what} build/explore")
    out = Path(path)
    st, lst = probe(out, what), probe(out, what, follow=False)
    if st is None and lst is not None:
        raise FileError(f"{what} {out} is a symlink to a missing folder; remove the link or choose another folder")
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            kind = _kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else "a file"
            raise FileError(f"{what} {out} is {kind}, not a folder; choose another folder")
        for name in names:
            inner = probe(out / name, what, follow=False)
            if inner is not None and stat.S_ISDIR(inner.st_mode):
                raise FileError(f"{out} holds a folder named {name} where a file goes; choose another {what}")
        if not os.access(out, os.W_OK | os.X_OK):
            raise FileError(f"cannot write into {what} {out}: Permission denied; choose another folder")
        return out
    parent = out.parent
    while (pst := probe(parent, what)) is None:
        if probe(parent, what, follow=False) is not None:
            raise FileError(f"{what} {out} lies under a dangling symlink {parent}; choose another folder")
        parent = parent.parent
    if not stat.S_ISDIR(pst.st_mode):
        raise FileError(f"cannot create {what} {out}: {parent} is a file; choose another folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FileError(f"cannot create {what} {out}: Permission denied in {parent}; choose another folder")
    return out


def write_folder(path: str | os.PathLike, files: Mapping[str, str | bytes], what: str = "--out") -> dict[str, Path]:
    """Write ``files`` (name -> content) into the folder ``path``, all or nothing; returns name -> path."""
    names = list(files)
    for name in names:
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            raise FileError(f"cannot write a file named {name!r}")
    out = check_folder(path, names, what)
    try:
        if out.exists():
            _replace_into(out, files)
        else:
            made = [p for p in out.parents if not p.exists()]  # missing parents, deepest first
            tmp = None
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=f".{out.name[:80]}.", suffix=".part", dir=out.parent))
                for name, content in files.items():
                    _new_file(tmp / name, _data(content))
                os.chmod(tmp, 0o777 & ~_umask())
                os.rename(tmp, out)  # the whole folder appears at once
            except BaseException:
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                for p in made:
                    try:
                        p.rmdir()
                    except OSError:
                        pass
                raise
    except OSError as e:
        fix = _fix(e, "choose another folder", "folder")
        raise FileError(f"cannot write into {what} {out}: {_why(e)}; {fix}") from None
    return {name: out / name for name in names}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _new_file(p: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(p, flags, 0o666)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_into(out: Path, files: Mapping[str, str | bytes]) -> None:
    """Move new files into the existing folder ``out``; on any failure put back what was there."""
    tmp = Path(tempfile.mkdtemp(prefix=".simcache-", suffix=".part", dir=out))
    new, old = tmp / "new", tmp / "old"
    moved: list[str] = []  # names whose new file is in place
    kept: list[str] = []  # names whose old file was moved aside
    try:
        new.mkdir()
        old.mkdir()
        for name, content in files.items():
            _new_file(new / name, _data(content))
        for name in files:
            if os.path.lexists(out / name):  # a file or a symlink: moved aside, never followed
                os.rename(out / name, old / name)
                kept.append(name)
            os.rename(new / name, out / name)
            moved.append(name)
    except BaseException:
        for name in moved:
            _remove_quietly(out / name)
        for name in kept:
            try:
                os.rename(old / name, out / name)
            except OSError:
                pass
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
