"""``safe_io`` exactly: every refusal's whole sentence, the flags and modes each file is opened with, the names and
places of temporary files and folders, the bytes read and written, and the clean-up after a failure.

A read-only folder cannot be made for a process running as root (CI runs as root), so ``os.access`` is answered by
hand where a test needs a folder the user cannot write; everything else is a real file, link, FIFO or socket."""
from __future__ import annotations

import errno
import os
import re
import socket
import stat
import tempfile

import pytest

from simcache import safe_io
from simcache.errors import FileError, UnreadableFile
from simcache.safe_io import (
    _data,
    _fix,
    _kind,
    _why,
    check_file,
    check_folder,
    read_bytes,
    write_file,
    write_folder,
)

RW, W_X = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, os.W_OK | os.X_OK


def refused(cls, fn, *args, **kw) -> str:
    with pytest.raises(cls) as e:
        fn(*args, **kw)
    return str(e.value)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def opened(monkeypatch):
    """Every ``os.open`` safe_io makes: (file name, flags, mode or None)."""
    calls, real = [], os.open

    def spy(path, flags, mode=None, **kw):
        calls.append((os.path.basename(path), flags, mode))
        return real(path, flags, 0o777 if mode is None else mode, **kw)

    monkeypatch.setattr(safe_io.os, "open", spy)
    return calls


@pytest.fixture
def short_socket():
    """A UNIX socket file (its path must be short, so not under ``tmp_path``)."""
    folder = tempfile.mkdtemp(prefix="sk", dir="/tmp")
    path = os.path.join(folder, "s")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    try:
        yield path
    finally:
        s.close()
        os.unlink(path)
        os.rmdir(folder)


# --- the small helpers ------------------------------------------------------------------------------------------------

def test_kinds_of_file_are_named_in_words():
    assert [_kind(m) for m in (stat.S_IFDIR, stat.S_IFIFO, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFSOCK, stat.S_IFLNK,
                               stat.S_IFREG)] == [
        "a folder", "a named pipe (FIFO)", "a character device", "a block device", "a socket", "a symlink",
        "not a regular file"]


def test_a_write_error_s_fix_names_the_disk_the_permissions_or_the_default():
    assert [_fix(OSError(n, "x"), "D", "folder") for n in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)] == \
        ["free some space or choose another folder"] * 3
    assert [_fix(OSError(n, "x"), "D") for n in (errno.EACCES, errno.EPERM, errno.EROFS)] == \
        ["choose a path you can write to"] * 3
    assert _fix(OSError(errno.EIO, "x"), "D") == "D" and _fix(OSError("no errno"), "D") == "D"
    assert (_why(OSError(errno.EIO, "Input/output error")), _why(OSError("plain text"))) == (
        "Input/output error", "plain text")
    assert (_data("é"), _data(b"\xff\x00")) == (b"\xc3\xa9", b"\xff\x00")


# --- reading ----------------------------------------------------------------------------------------------------------

def test_reading_opens_without_blocking_or_leaking_its_descriptor_and_returns_every_byte(tmp_path, opened):
    f = tmp_path / "big.yaml"
    data = os.urandom(3 * (1 << 20) + 5)  # more than one read's chunk
    f.write_bytes(data)
    assert read_bytes(f) == data
    assert opened == [("big.yaml", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, None)]


def test_reading_refusals_are_whole_sentences(tmp_path, short_socket):
    missing, link, plain = tmp_path / "missing.yaml", tmp_path / "link.yaml", tmp_path / "plain"
    link.symlink_to(tmp_path / "nowhere.yaml")
    plain.write_text("x")
    assert refused(UnreadableFile, read_bytes, missing) == \
        f"cannot read scenario file {missing}: No such file or directory; check the path"
    assert refused(UnreadableFile, read_bytes, link, what="tour file") == \
        f"tour file {link} is a symlink to a missing file; point it at a file or give another path"
    assert refused(UnreadableFile, read_bytes, plain / "x.yaml") == \
        f"cannot read scenario file {plain / 'x.yaml'}: Not a directory; check the path"
    assert refused(UnreadableFile, read_bytes, short_socket) == \
        f"cannot read scenario file {short_socket}: No such device or address; check the path"
    assert refused(UnreadableFile, read_bytes, tmp_path) == \
        f"scenario file {tmp_path} is a folder, not a file; give a YAML or JSON file"


def test_a_file_over_the_limit_is_refused_in_whole_megabytes(tmp_path):
    f = tmp_path / "huge.json"
    f.write_bytes(b"x" * 3_000_001)
    assert refused(UnreadableFile, read_bytes, f, limit=3_000_000, what="ops file") == \
        "huge.json is larger than 3 MB; keep a ops file under 3 MB"
    assert refused(UnreadableFile, read_bytes, f, limit=2_500_000) == \
        "huge.json is larger than 2 MB; keep a scenario file under 2 MB"  # whole megabytes, rounded down
    f.write_bytes(b"x" * 2_500_000)  # exactly the limit: read
    assert read_bytes(f, limit=2_500_000) == b"x" * 2_500_000


def test_a_file_that_grows_while_read_is_cut_at_the_limit_plus_one_byte(tmp_path, monkeypatch):
    """The size checked first said small (the file grew after ``fstat``): the loop itself stops, asking for no more
    than one byte past the limit in all."""
    f = tmp_path / "grows.yaml"
    f.write_bytes(b"y" * 4_000_000)
    real_fstat, real_read, asked = os.fstat, os.read, []

    def small_fstat(fd):
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))

    monkeypatch.setattr(safe_io.os, "fstat", small_fstat)
    monkeypatch.setattr(safe_io.os, "read", lambda fd, n: asked.append(n) or real_read(fd, n))
    assert refused(UnreadableFile, read_bytes, f, limit=3_000_000) == \
        "grows.yaml is larger than 3 MB; keep a scenario file under 3 MB"
    assert asked == [1 << 20, 1 << 20, 3_000_001 - 2 * (1 << 20)]


def test_an_error_while_reading_is_one_sentence(tmp_path, monkeypatch):
    f = tmp_path / "a.yaml"
    f.write_text("x")

    def broken(fd, n):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(safe_io.os, "read", broken)
    assert refused(UnreadableFile, read_bytes, f) == \
        f"cannot read scenario file {f}: Input/output error; check the path"


# --- writing one file -------------------------------------------------------------------------------------------------

def test_a_new_file_is_written_through_an_exclusive_hidden_temporary_file_with_the_umask_s_mode(
        tmp_path, opened, umask_022):
    out = tmp_path / "run.html"
    assert write_file(out, b"\xff data") == out and out.read_bytes() == b"\xff data"
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    [(name, flags, mode)] = opened
    assert re.fullmatch(r"\.run\.html\.[0-9a-f]{12}\.part", name) and (flags, mode) == (RW, 0o666)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.html"]


def test_a_replaced_file_keeps_its_permissions(tmp_path, umask_022):
    out = tmp_path / "run.html"
    out.write_text("old")
    out.chmod(0o600)
    write_file(out, "new")
    assert (out.read_text(), stat.S_IMODE(out.stat().st_mode)) == ("new", 0o600)


def test_a_long_name_s_temporary_file_keeps_80_characters_of_it(tmp_path, opened):
    out = tmp_path / ("n" * 200 + ".svg")
    write_file(out, "x")
    assert re.fullmatch(r"\.n{80}\.[0-9a-f]{12}\.part", opened[0][0])


def test_a_taken_temporary_name_is_skipped_and_a_planted_link_there_untouched(tmp_path, monkeypatch):
    out, victim = tmp_path / "run.html", tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / ".run.html.aaaaaaaaaaaa.part").symlink_to(victim)
    names = iter(["aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(safe_io.secrets, "token_hex", lambda n: next(names) if n == 6 else pytest.fail(str(n)))
    write_file(out, "new")
    assert (out.read_text(), victim.read_text()) == ("new", "keep")
    assert os.readlink(tmp_path / ".run.html.aaaaaaaaaaaa.part") == str(victim)


def test_after_100_taken_temporary_names_the_write_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "run.html"
    (tmp_path / ".run.html.aaaaaaaaaaaa.part").write_text("planted")
    calls = []
    monkeypatch.setattr(safe_io.secrets, "token_hex", lambda n: calls.append(n) or "aaaaaaaaaaaa")
    assert refused(FileError, write_file, out, "x") == \
        f"cannot write {out}: could not create a temporary file; check that its folder exists and is writable"
    assert calls == [6] * 100 and not out.exists()


def test_a_failed_rename_leaves_no_temporary_file_and_says_why(tmp_path, monkeypatch):
    out = tmp_path / "run.html"

    def broken(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(safe_io.os, "replace", broken)
    assert refused(FileError, write_file, out, "x") == \
        f"cannot write {out}: Input/output error; check that its folder exists and is writable"
    assert list(tmp_path.iterdir()) == []


def test_a_pipe_is_opened_as_a_stream_never_as_a_terminal(tmp_path, opened):
    # a FIFO of the test's own (never a system device: a mutant that replaced one would break the machine)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert write_file(fifo, "x") == fifo and os.read(reader, 10) == b"x"
    finally:
        os.close(reader)
    assert opened[1:] == [("pipe", os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC, None)]  # after the reader's open
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_writing_refusals_are_whole_sentences(tmp_path, short_socket):
    plain, loop = tmp_path / "plain", tmp_path / "loop"
    plain.write_text("x")
    loop.symlink_to(loop)
    assert refused(FileError, write_file, "", "x", what="--svg") == \
        "--svg must name a file, not ''; e.g. --svg run.html"
    for bare in (".", "/"):  # a path with no file name at all
        assert refused(FileError, write_file, bare, "x") == f"-o must name a file, not {bare!r}; e.g. -o run.html"
    assert refused(FileError, write_file, tmp_path, "x") == \
        f"-o must name a file, not the folder {str(tmp_path)!r}; e.g. -o run.html"
    assert refused(FileError, write_file, plain / "x.html", "x") == \
        f"cannot write {plain / 'x.html'}: Not a directory; choose another path"
    assert refused(FileError, write_file, loop, "x") == \
        f"cannot write {loop}: Too many levels of symbolic links; choose another path"
    assert refused(FileError, write_file, short_socket, "x") == \
        f"{short_socket} is a socket; -o writes only a regular file, standard output (-), a pipe or a character device"


class _Out:
    def __init__(self, error):
        self.buffer = self
        self.error = error

    def flush(self):
        pass

    def write(self, data):
        raise self.error


def test_standard_output_that_fails_is_one_sentence(monkeypatch):
    from simcache.errors import OutputError

    monkeypatch.setattr(safe_io.sys, "stdout", _Out(OSError(errno.EPIPE, "Broken pipe")))
    assert refused(OutputError, write_file, "-", "x") == ("cannot write to standard output: Broken pipe; run it with "
                                                          "standard output open, or write to a file with -o FILE")
    monkeypatch.setattr(safe_io.sys, "stdout", _Out(OSError(errno.ENOSPC, "No space left on device")))
    assert refused(OutputError, write_file, "-", "x") == ("cannot write to standard output: No space left on device; "
                                                          "free some space, or write to a file with -o FILE")
    monkeypatch.setattr(safe_io.sys, "stdout", _Out(ValueError("I/O operation on closed file.")))
    assert refused(OutputError, write_file, "-", "x") == ("cannot write to standard output: I/O operation on closed "
                                                          "file; run it with standard output open, or write to a file "
                                                          "with -o FILE")


# --- checking before the work -----------------------------------------------------------------------------------------

def test_check_file_refusals_are_whole_sentences(tmp_path, monkeypatch):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    check_file("-")
    check_file(fifo)
    check_file(tmp_path / "new.html")
    assert refused(FileError, check_file, "", what="--png") == "--png must name a file, not ''; e.g. --png run.html"
    missing = tmp_path / "no" / "x.html"
    assert refused(FileError, check_file, missing) == (
        f"cannot write {missing}: its folder {missing.parent} does not exist; check that its folder exists and is "
        f"writable")
    (tmp_path / "old.html").write_text("x")
    real = os.access
    monkeypatch.setattr(safe_io.os, "access", lambda p, m: m != W_X and real(p, m))  # a read-only folder
    for name in ("new.html", "old.html"):
        assert refused(FileError, check_file, tmp_path / name) == (
            f"cannot write {tmp_path / name}: Permission denied in {tmp_path}; check that its folder exists and is "
            f"writable")
    check_file(fifo)  # a pipe or device is opened when written, its folder never asked
    check_file("-")  # standard output needs no folder
    assert refused(FileError, check_file, tmp_path) == \
        f"-o must name a file, not the folder {str(tmp_path)!r}; e.g. -o run.html"


def test_check_folder_refusals_are_whole_sentences(tmp_path, monkeypatch):
    f, fifo, dangling = tmp_path / "f", tmp_path / "fifo", tmp_path / "dangling"
    f.write_text("x")
    os.mkfifo(fifo)
    dangling.symlink_to(tmp_path / "gone")
    assert check_folder(tmp_path / "new", ["a"]) == tmp_path / "new"
    assert refused(FileError, check_folder, "", ["a"], what="--dir") == \
        "--dir needs a folder name, like --dir build/explore"
    assert refused(FileError, check_folder, f, ["a"]) == f"--out {f} is a file, not a folder; choose another folder"
    assert refused(FileError, check_folder, fifo, ["a"]) == \
        f"--out {fifo} is a named pipe (FIFO), not a folder; choose another folder"
    assert refused(FileError, check_folder, dangling, ["a"]) == \
        f"--out {dangling} is a symlink to a missing folder; remove the link or choose another folder"
    assert refused(FileError, check_folder, dangling / "x" / "y", ["a"]) == \
        f"--out {dangling / 'x' / 'y'} lies under a dangling symlink {dangling}; choose another folder"
    assert refused(FileError, check_folder, f / "x", ["a"]) == \
        f"cannot create --out {f / 'x'}: {f} is a file; choose another folder"
    real = os.access
    monkeypatch.setattr(safe_io.os, "access", lambda p, m: m != W_X and real(p, m))
    assert refused(FileError, check_folder, tmp_path, ["a"]) == \
        f"cannot write into --out {tmp_path}: Permission denied; choose another folder"
    assert refused(FileError, check_folder, tmp_path / "new", ["a"]) == \
        f"cannot create --out {tmp_path / 'new'}: Permission denied in {tmp_path}; choose another folder"


# --- writing a folder -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\0b"])
def test_a_file_name_that_is_not_one_plain_name_is_refused(tmp_path, name):
    assert refused(FileError, write_folder, tmp_path / "out", {"ok": "x", name: "y"}) == \
        f"cannot write a file named {name!r}"
    assert not (tmp_path / "out").exists()


def test_a_new_folder_and_its_missing_parents_appear_with_the_umask_s_modes(tmp_path, opened, umask_022):
    out = tmp_path / "a" / "b" / "out"
    assert write_folder(out, {"x.txt": "é", "y.bin": b"\x00"}) == {"x.txt": out / "x.txt", "y.bin": out / "y.bin"}
    assert ((out / "x.txt").read_bytes(), (out / "y.bin").read_bytes()) == (b"\xc3\xa9", b"\x00")
    assert stat.S_IMODE(out.stat().st_mode) == 0o755 and stat.S_IMODE((out / "x.txt").stat().st_mode) == 0o644
    assert [(n, f, m) for n, f, m in opened] == [("x.txt", RW, 0o666), ("y.bin", RW, 0o666)]
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["out"]


def test_a_new_folder_is_built_in_a_hidden_temporary_folder_beside_it_and_its_parents_go_on_failure(
        tmp_path, monkeypatch):
    out, seen = tmp_path / "a" / "b" / "out", []
    real = safe_io._new_file

    def failing(p, data):
        seen.append(p)
        if p.name == "y":
            raise OSError(errno.EIO, "Input/output error")
        real(p, data)

    monkeypatch.setattr(safe_io, "_new_file", failing)
    assert refused(FileError, write_folder, out, {"x": "1", "y": "2"}, what="--dir") == \
        f"cannot write into --dir {out}: Input/output error; choose another folder"
    assert seen[0].parent.parent == out.parent and re.fullmatch(r"\.out\.[^/]+\.part", seen[0].parent.name)
    assert list(tmp_path.iterdir()) == []  # the temporary folder and both made parents are gone


def test_an_existing_folder_gets_its_new_files_through_a_hidden_folder_inside_it(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("old x")
    (out / "other").write_text("kept")
    seen, renames, real_new, real_rename = [], [], safe_io._new_file, os.rename
    monkeypatch.setattr(safe_io, "_new_file", lambda p, data: seen.append(p) or real_new(p, data))
    monkeypatch.setattr(safe_io.os, "rename", lambda a, b: renames.append((a, b)) or real_rename(a, b))
    write_folder(out, {"x": "new x", "y": "new y"})
    tmp = seen[0].parent.parent
    assert tmp.parent == out and re.fullmatch(r"\.simcache-[^/]+\.part", tmp.name)
    assert seen == [tmp / "new" / "x", tmp / "new" / "y"]
    assert renames == [(out / "x", tmp / "old" / "x"), (tmp / "new" / "x", out / "x"), (tmp / "new" / "y", out / "y")]
    assert {p.name: p.read_text() for p in out.iterdir()} == {"x": "new x", "y": "new y", "other": "kept"}


def test_a_folder_write_refused_by_its_check_names_the_option(tmp_path):
    (tmp_path / "out" / "x").mkdir(parents=True)
    assert refused(FileError, write_folder, tmp_path / "out", {"x": "1"}, what="--dir") == \
        f"{tmp_path / 'out'} holds a folder named x where a file goes; choose another --dir"


def test_a_long_folder_name_s_temporary_folder_keeps_80_characters_of_it(tmp_path, monkeypatch):
    out, seen, real = tmp_path / ("d" * 200), [], safe_io._new_file
    monkeypatch.setattr(safe_io, "_new_file", lambda p, data: seen.append(p) or real(p, data))
    write_folder(out, {"x": "1"})
    assert re.fullmatch(r"\.d{80}\.[^/]+\.part", seen[0].parent.name) and (out / "x").read_text() == "1"
