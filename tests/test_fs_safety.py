"""Filesystem safety: simcache writes only the paths the user names, all or nothing, and reads only regular files.

Each case builds a hostile filesystem (a device node, a symlink, a planted ``.part`` link, a FIFO, a read-only or
full disk) and asserts the whole outcome: the exit status, the one sentence, and every file left behind. Device
nodes and small tmpfs mounts need root; without it those cases skip with the reason.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from simcache.cli import main
from simcache.errors import FileError
from simcache.pool import Pool, quiet_worker
from simcache.safe_io import read_bytes, write_file, write_folder

ROOT = Path(__file__).resolve().parent.parent
OUT_FILES = {"schedule.txt", "minimal.yaml", "trace.json", "explore.json", "test_minimal_scenario_a.py"}


def cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def listing(folder: Path) -> dict[str, str]:
    """name -> kind (and link target) of everything in ``folder``, hidden files included."""
    out = {}
    for p in sorted(folder.iterdir()):
        st = os.lstat(p)
        kind = ("link->" + os.readlink(p) if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode)
                else "chr" if stat.S_ISCHR(st.st_mode) else "fifo" if stat.S_ISFIFO(st.st_mode) else "file")
        out[p.name] = kind
    return out


def mknod_or_skip(path: Path, major: int, minor: int) -> None:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except (PermissionError, AttributeError, OSError) as e:
        pytest.skip(f"cannot create a device node here ({e}); run the suite as root to check devices")


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (root only): a full disk for real."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the full-disk cases run in CI as root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}); the full-disk cases need it")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# --- export -o: devices are streams, links are followed to a regular file, nothing else is replaced -----------------

def test_export_to_a_full_device_fails_with_one_sentence_and_keeps_the_device(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mknod_or_skip(tmp_path / "full", 1, 7)
    rc, out, err = cli(capsys, "export", "scenario_a", "-o", "full")
    assert (rc, out) == (2, "")
    assert err == "simcache: cannot write full: No space left on device; free some space or choose another path\n"
    assert listing(tmp_path) == {"full": "chr"}


def test_export_to_a_null_device_streams_into_it(capsys, tmp_path):
    mknod_or_skip(tmp_path / "null", 1, 3)
    rc, out, err = cli(capsys, "export", "scenario_a", "-o", str(tmp_path / "null"))
    assert (rc, out, err) == (0, f"{tmp_path / 'null'}\n", "")
    assert listing(tmp_path) == {"null": "chr"}


def test_export_to_stdout_with_dash(capsys, tmp_path, monkeypatch):
    import io

    buf = io.BytesIO()

    class Out:
        buffer, closed = buf, False

        def flush(self):
            pass

        def write(self, s):  # print() of the path must not happen with -o -
            raise AssertionError(s)

    monkeypatch.setattr(sys, "stdout", Out())
    assert main(["export", "scenario_a", "-o", "-"]) == 0
    page = buf.getvalue().decode()
    assert page.startswith("<!doctype html>") and page.endswith("</html>")


def test_export_through_a_symlink_replaces_its_target_and_keeps_the_link(capsys, tmp_path):
    (tmp_path / "real.html").write_text("old")
    (tmp_path / "link.html").symlink_to(tmp_path / "real.html")
    rc, out, err = cli(capsys, "export", "scenario_a", "-o", str(tmp_path / "link.html"))
    assert (rc, err) == (0, "")
    assert listing(tmp_path) == {"link.html": f"link->{tmp_path / 'real.html'}", "real.html": "file"}
    assert (tmp_path / "real.html").read_text().startswith("<!doctype html>")


def test_export_to_a_dangling_symlink_is_refused_and_creates_nothing(capsys, tmp_path):
    (tmp_path / "link.html").symlink_to(tmp_path / "nowhere.html")
    rc, out, err = cli(capsys, "export", "scenario_a", "-o", str(tmp_path / "link.html"))
    assert (rc, out) == (2, "")
    assert err == (f"simcache: {tmp_path / 'link.html'} is a symlink to {tmp_path / 'nowhere.html'}, which does not "
                   f"exist; remove the link or give another path\n")
    assert listing(tmp_path) == {"link.html": f"link->{tmp_path / 'nowhere.html'}"}


def test_a_planted_part_symlink_is_never_followed(capsys, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for name in (".run.html.part", "run.html.part"):
        (tmp_path / name).symlink_to(victim)
    rc, out, err = cli(capsys, "export", "scenario_a", "-o", str(tmp_path / "run.html"))
    assert (rc, err) == (0, "")
    assert victim.read_text() == "precious"
    assert listing(tmp_path) == {".run.html.part": f"link->{victim}", "run.html": "file",
                                 "run.html.part": f"link->{victim}", "victim": "file"}


def test_export_into_a_fifo_streams_to_its_reader(capsys, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    rc, out, err = cli(capsys, "export", "scenario_a", "-o", str(fifo))
    reader.join(60)
    assert (rc, err) == (0, "")
    assert got and got[0].startswith(b"<!doctype html>") and listing(tmp_path) == {"pipe": "fifo"}


def test_export_onto_a_full_disk_leaves_the_old_file_and_no_temporary_file(capsys, small_disk):
    (small_disk / "run.html").write_text("old page")
    rc, out, err = cli(capsys, "export", "scenario_a", "-o", str(small_disk / "run.html"))
    assert (rc, out) == (2, "")
    assert err == (f"simcache: cannot write {small_disk / 'run.html'}: No space left on device; free some space or "
                   f"choose another path\n")
    assert listing(small_disk) == {"run.html": "file"} and (small_disk / "run.html").read_text() == "old page"


def test_export_into_a_read_only_folder(capsys, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:  # root ignores permission bits: a read-only mount is the real thing
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)], capture_output=True)
        if r.returncode != 0:
            pytest.skip("root ignores permissions and cannot mount a read-only tmpfs here")
    else:
        ro.chmod(0o555)
    try:
        rc, out, err = cli(capsys, "export", "scenario_a", "-o", str(ro / "run.html"))
        assert (rc, out) == (2, "") and err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith(f"simcache: cannot write {ro / 'run.html'}: ")
        assert listing(ro) == {}
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(ro)], capture_output=True)
        else:
            ro.chmod(0o755)


def test_a_failing_cleanup_raises_no_second_error(tmp_path, monkeypatch):
    import simcache.safe_io as safe_io

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safe_io, "_write_all", boom)
    monkeypatch.setattr(os, "unlink", lambda *a, **k: (_ for _ in ()).throw(PermissionError(1, "nope")))
    with pytest.raises(FileError) as e:
        write_file(tmp_path / "x.html", "text")
    assert str(e.value) == (f"cannot write {tmp_path / 'x.html'}: No space left on device; free some space or "
                            f"choose another path")


# --- reading: only regular files, size checked before reading -----------------------------------------------------

@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "a named pipe (FIFO)"),
    (lambda p: p.mkdir(), "a folder"),
])
def test_reading_a_fifo_or_folder_is_refused_at_once(make, kind, capsys, tmp_path):
    p = tmp_path / "s.yaml"
    make(p)
    started = time.monotonic()
    rc, out, err = cli(capsys, "run", str(p))
    assert (rc, out) == (2, "") and time.monotonic() - started < 30
    assert err == f"simcache: scenario file {p} is {kind}, not a file; give a YAML or JSON file\n"


def test_reading_dev_zero_is_refused_unread(capsys):
    rc, out, err = cli(capsys, "run", "/dev/zero")
    assert (rc, out, err) == (2, "", "simcache: scenario file /dev/zero is a character device, not a file; give a "
                                     "YAML or JSON file\n")


def test_read_bytes_stops_at_the_limit(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_bytes(b"x" * 101)
    with pytest.raises(FileError, match="a.yaml is larger than 0 MB"):
        read_bytes(p, limit=100)
    assert read_bytes(p, limit=101) == b"x" * 101


def test_a_dangling_scenario_symlink_is_named_as_such(capsys, tmp_path):
    (tmp_path / "s.yaml").symlink_to(tmp_path / "gone.yaml")
    rc, out, err = cli(capsys, "run", str(tmp_path / "s.yaml"))
    assert (rc, out, err) == (2, "", f"simcache: scenario file {tmp_path / 's.yaml'} is a symlink to a missing file; "
                                     f"point it at a file or give another path\n")


# --- explore --out: validated first, written into a fresh folder, moved into place --------------------------------

def test_explore_out_replaces_a_planted_symlink_instead_of_following_it(capsys, tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.json"
    out.mkdir()
    (out / "explore.json").symlink_to(victim)
    (out / "trace.json").symlink_to(victim)
    rc, stdout, err = cli(capsys, "explore", "scenario_a", "--shrink", "--json", "--out", str(out))
    assert (rc, err) == (0, "")
    assert not victim.exists()
    assert listing(out) == dict.fromkeys(OUT_FILES, "file")


def test_explore_out_with_a_blocked_artefact_writes_nothing(capsys, tmp_path):
    out = tmp_path / "out"
    (out / "trace.json").mkdir(parents=True)
    rc, stdout, err = cli(capsys, "explore", "scenario_a", "--shrink", "--out", str(out))
    assert (rc, stdout) == (2, "")
    assert err == f"simcache: {out} holds a folder named trace.json where a file goes; choose another --out\n"
    assert listing(out) == {"trace.json": "dir"}


@pytest.mark.parametrize("args, sentence", [
    (["--jobs", "0"], "--jobs must be a whole number >= 1, not 0; write plain digits like --jobs 1"),
    (["--budget", "0"], "--budget must be a whole number >= 1, not 0; write plain digits like --budget 1"),
    (["--bound", "-1"], "--bound must be a whole number >= 0, not -1; write plain digits like --bound 1"),
])
def test_explore_refuses_bad_numbers_before_creating_any_folder(args, sentence, capsys, tmp_path):
    rc, out, err = cli(capsys, "explore", "scenario_a", "--out", str(tmp_path / "a" / "b"), *args)
    assert (rc, out, err) == (2, "", f"simcache: {sentence}\n")
    assert listing(tmp_path) == {}


def test_explore_out_as_a_dangling_symlink_is_named_as_such(capsys, tmp_path):
    (tmp_path / "out").symlink_to(tmp_path / "gone")
    rc, out, err = cli(capsys, "explore", "scenario_a", "--out", str(tmp_path / "out"))
    assert (rc, out, err) == (2, "", f"simcache: --out {tmp_path / 'out'} is a symlink to a missing folder; remove "
                                     f"the link or choose another folder\n")


def test_explore_out_creates_the_folder_in_one_move(capsys, tmp_path):
    rc, out, err = cli(capsys, "explore", "scenario_a", "--shrink", "--out", str(tmp_path / "a" / "b"))
    assert (rc, err) == (0, "")
    assert listing(tmp_path) == {"a": "dir"} and listing(tmp_path / "a") == {"b": "dir"}
    assert listing(tmp_path / "a" / "b") == dict.fromkeys(OUT_FILES, "file")


def test_a_folder_write_that_fails_midway_puts_the_old_files_back(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old a")
    (out / "b.txt").write_text("old b")
    real_rename, calls = os.rename, []

    def flaky(src, dst):
        calls.append(Path(dst).name)
        if Path(dst) == out / "b.txt" and "new" in str(src):
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", flaky)
    with pytest.raises(FileError, match="No space left on device; free some space"):
        write_folder(out, {"a.txt": "new a", "b.txt": "new b"})
    assert listing(out) == {"a.txt": "file", "b.txt": "file"}
    assert ((out / "a.txt").read_text(), (out / "b.txt").read_text()) == ("old a", "old b")


def test_explore_out_on_a_full_disk_writes_nothing(capsys, small_disk):
    (small_disk / "filler").write_bytes(b"x" * 56 * 1024)  # 8 KiB left: the 14 KB trace cannot fit
    rc, out, err = cli(capsys, "explore", "scenario_a", "--shrink", "--out", str(small_disk / "o"))
    assert (rc, out) == (2, "")
    assert err == f"simcache: cannot write into --out {small_disk / 'o'}: No space left on device; free some space " \
                  f"or choose another folder\n"
    assert listing(small_disk) == {"filler": "file"}


# --- stdout that cannot be written, and Ctrl-C ---------------------------------------------------------------------

def _simcache(*argv, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "simcache", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env=env, **kw)


def test_a_full_or_closed_stdout_exits_1_with_one_sentence():
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "simcache", "run", "scenario_a", "--json"], cwd=ROOT, stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=180, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (p.returncode, p.stderr) == (1, "simcache: cannot write the output: No space left on device; free some "
                                           "space or write it elsewhere\n")
    p = subprocess.run(f"{sys.executable} -m simcache run scenario_a >&-", shell=True, cwd=ROOT, capture_output=True,
                       text=True, timeout=180, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (p.returncode, p.stderr) == (1, "simcache: standard output is closed, so the result cannot be shown; run it "
                                           "with stdout open (or redirect it to a file)\n")


def test_ctrl_c_is_one_sentence_and_status_130(capsys, monkeypatch, tmp_path):
    import importlib

    sim = importlib.import_module("simcache.simulate")  # the module (the package's attribute is the function)

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(sim, "simulate", interrupted)
    rc, out, err = cli(capsys, "export", "scenario_a", "-o", str(tmp_path / "run.html"))
    assert (rc, out, err) == (130, "", "simcache: interrupted (Ctrl-C); nothing was written\n")
    assert listing(tmp_path) == {}


def test_ctrl_c_while_the_heavy_modules_load_is_one_sentence(tmp_path):
    # a stand-in torch whose import is "interrupted": the moment a real Ctrl-C during start-up lands in
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise KeyboardInterrupt\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    p = subprocess.run([sys.executable, "-m", "simcache", "run", "scenario_a"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env=env)
    assert (p.returncode, p.stdout, p.stderr) == (130, "", "simcache: interrupted (Ctrl-C); nothing was written\n")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["torch"]


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (a zombie has stopped; it only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_an_interrupted_pool_stops_its_workers_at_once():
    from simcache.pool import mp_context

    pool = Pool(2, mp_context=mp_context(), initializer=quiet_worker)
    futures = [pool.submit(_sleep, 60) for _ in range(2)]
    time.sleep(0.5)
    procs = list(pool._processes.values())
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        try:
            raise KeyboardInterrupt
        finally:
            pool.shutdown()
    # the pool's own management thread may reap a worker first (then Process.is_alive() cannot tell): ask the OS
    pids = [p.pid for p in procs]
    while any(_running(pid) for pid in pids) and time.monotonic() - started < 30:
        time.sleep(0.05)
    assert time.monotonic() - started < 30 and not any(_running(pid) for pid in pids)
    assert not any(f.done() and not f.cancelled() and f.exception() is None for f in futures)  # none ran to the end
