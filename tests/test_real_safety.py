"""simcache.real keeps to what the user named (review1 #1, #2, #5, #6): ``--clear-cache`` removes only simcache's own
marked folder; no code runs from a folder the user did not name (a parent, the current folder, ``./sglang`` beside
``--sglang installed``); a git commit's kept files are checked against the commit at each use, links refused; an
edited checkout is loaded again. Each planted file writes a marker when it runs: the marker must never appear.
Made-up SGLang trees and a local git repository only (our own lines, nothing of SGLang's)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simcache.cli import main
from simcache.real import HI_MAMBA, SourceError, from_git, load, resolve
from simcache.real.compare import loaded_for
from tests.real_fake_tree import FILES, MC, make_tree


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMCACHE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def planted(base: Path, marker: Path) -> Path:
    """A made-up SGLang tree whose first loaded file writes ``marker`` when it runs."""
    return make_tree(base, extra={"evict_policy.py": f"open({str(marker)!r}, 'w').write('ran')\nPOLICY = 'lru'\n"})


def sentence(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    return err.strip()


# --- #1: --clear-cache removes only what simcache marked as its own ---

def test_clear_cache_leaves_the_users_folders_in_a_cache_folder_they_use(cache, capsys):
    (cache / "git" / "myrepo").mkdir(parents=True)
    (cache / "git" / "myrepo" / "work.txt").write_text("precious")
    (cache / "sglang" / "python").mkdir(parents=True)
    (cache / "sglang" / "python" / "x.py").write_text("mine")
    (cache / "game").mkdir()
    (cache / "game" / "level4.json.gz").write_text("the levels page's cache")
    assert main(["real", "--clear-cache"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"nothing to clear: {cache / 'real'} does not exist",
        f"left as they are: {cache / 'sglang'}, {cache / 'git'} (no marker of simcache's; an older simcache kept "
        f"wheels there: remove them yourself if they are its)"]
    assert (cache / "git" / "myrepo" / "work.txt").read_text() == "precious"
    assert (cache / "sglang" / "python" / "x.py").read_text() == "mine"
    assert (cache / "game" / "level4.json.gz").is_file()


def test_a_folder_named_real_without_the_marker_is_neither_removed_nor_written_into(cache, capsys, tmp_path):
    (cache / "real").mkdir(parents=True)
    (cache / "real" / "notes.txt").write_text("mine")
    said = (f"simcache: {cache / 'real'} is a folder without simcache's CACHEDIR.TAG, so it is not simcache's cache "
            f"folder; simcache neither writes into nor removes it: move it away, or point $SIMCACHE_CACHE_DIR at "
            f"another folder")
    assert sentence(capsys, "real", "--clear-cache") == said
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", "9.8.7") == said  # before any download
    assert sorted(p.name for p in (cache / "real").iterdir()) == ["notes.txt"]
    (cache / "real" / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")  # another tool's
    assert sentence(capsys, "real", "--clear-cache") == said
    assert (cache / "real" / "notes.txt").is_file()


def test_clear_cache_removes_simcaches_marked_folder_and_a_link_in_it_without_following_it(cache, capsys, tmp_path):
    repo = git_repo(tmp_path / "repo", make_tree(tmp_path / "tree"))
    src = from_git(repo, head(repo), HI_MAMBA.files)
    assert src.root.parent.parent == cache / "real" and (cache / "real" / "CACHEDIR.TAG").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    os.symlink(elsewhere, cache / "real" / "link")
    assert main(["real", "--clear-cache"]) == 0
    assert capsys.readouterr().out == f"removed {cache / 'real'} (simcache's SGLang wheels and files)\n"
    assert not (cache / "real").exists() and (elsewhere / "keep.txt").read_text() == "mine"


# --- #2: no code runs from a path the user did not name ---

def test_a_folder_below_a_sglang_tree_does_not_load_the_tree_two_levels_up(cache, capsys, tmp_path):
    marker = tmp_path / "PWNED"
    x = planted(tmp_path / "x", marker)
    (x / "other" / "deeper").mkdir(parents=True)
    assert sentence(capsys, "real", "crash_pr", "--sglang", str(x / "other" / "deeper")) == (
        f"simcache: --sglang {x / 'other' / 'deeper'} holds no sglang/srt folder; give the top of a SGLang checkout "
        f"(with python/sglang/) or an unpacked wheel (with sglang/)")
    (x / "lib").mkdir()
    with pytest.raises(SourceError):
        resolve(str(x / "lib"), None, HI_MAMBA.files)  # one level down, not named sglang
    assert not marker.exists()


def test_an_empty_path_is_refused(cache, capsys, tmp_path, monkeypatch):
    marker = tmp_path / "PWNED"
    x = planted(tmp_path / "x", marker)
    monkeypatch.chdir(x / "sglang")
    assert sentence(capsys, "real", "crash_pr", "--sglang", "") == (
        "simcache: --sglang got an empty path; give the folder of a SGLang checkout or unpacked wheel (for the "
        "current folder, give .)")
    assert sentence(capsys, "run", "crash_pr", "--against-real", "") == (
        "simcache: --sglang got an empty path; give the folder of a SGLang checkout or unpacked wheel (for the "
        "current folder, give .)")
    assert not marker.exists()


def test_the_sglang_folder_or_its_srt_folder_names_its_parent_and_the_label_is_the_folder_loaded(cache, tmp_path):
    tree = make_tree(tmp_path / "tree")
    for named in (tree / "sglang", tree / "sglang" / "srt", tree / "sglang" / "srt" / ".." / ".." / "sglang"):
        src = resolve(str(named), None, HI_MAMBA.files)
        assert (src.root, src.label) == (tree.resolve(), str(tree.resolve()))


def test_installed_never_finds_a_sglang_folder_in_the_current_folder(cache, capsys, tmp_path, monkeypatch):
    marker = tmp_path / "PWNED"
    x = planted(tmp_path / "x", marker)
    monkeypatch.chdir(x)
    monkeypatch.syspath_prepend(str(x))  # as `python -m` puts the current folder first
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    assert sentence(capsys, "real", "crash_pr", "--sglang", "installed") == (
        "simcache: --sglang installed: no sglang package is installed in this Python; give --sglang PATH or "
        "--sglang-version X.Y.Z instead")
    assert not marker.exists()
    site = make_tree(tmp_path / "site")  # an installed one elsewhere on the path is still found
    monkeypatch.syspath_prepend(str(site))
    assert resolve("installed", None, HI_MAMBA.files).root == site.resolve()


# --- #5: a commit's kept files: links refused, each file checked against the commit ---

def git_repo(repo: Path, tree: Path) -> Path:
    """A git repository holding ``tree`` under ``python/`` in one commit (as SGLang's checkout has it)."""
    work = repo / "work"
    (work / "python").mkdir(parents=True)
    os.rename(tree / "sglang", work / "python" / "sglang")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_SYSTEM=os.devnull)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "tree"]):
        subprocess.run(["git", "-C", str(work), *args], check=True, env=env, capture_output=True)
    return work / ".git"


def head(repo: Path) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_symlink_planted_in_a_commits_folder_is_refused_never_followed(cache, tmp_path):
    marker = tmp_path / "PWNED"
    repo = git_repo(tmp_path / "repo", make_tree(tmp_path / "tree"))
    src = from_git(repo, head(repo)[:9], HI_MAMBA.files)
    assert src.label == f"git {head(repo)[:9]}"
    assert load(src, HI_MAMBA).module("hi_mamba_radix_cache").VERSION == "one"
    x = planted(tmp_path / "x", marker)
    os.rename(src.root / "sglang", tmp_path / "moved")
    os.symlink(x / "sglang", src.root / "sglang")
    with pytest.raises(SourceError) as e:
        load(from_git(repo, head(repo)[:9], HI_MAMBA.files), HI_MAMBA)
    assert str(e.value) == (f"{src.root / 'sglang'} in the cache folder is not a plain folder (a symlink or a file); "
                            f"remove it with `python -m simcache real --clear-cache`")
    assert not marker.exists()


def test_a_changed_kept_file_is_written_again_from_the_commit_and_a_file_it_lacks_is_never_loaded(cache, tmp_path):
    marker = tmp_path / "PWNED"
    repo = git_repo(tmp_path / "repo", make_tree(tmp_path / "tree"))
    src = from_git(repo, head(repo), HI_MAMBA.files)
    kept = src.root / MC / "evict_policy.py"
    kept.write_text(f"open({str(marker)!r}, 'w').write('ran')\nPOLICY = 'lru'\n")
    lacking = src.root / MC / "utils.py"  # an optional file this commit does not have
    lacking.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    loaded = load(from_git(repo, head(repo), HI_MAMBA.files), HI_MAMBA)
    assert kept.read_text() == FILES["evict_policy.py"] and not lacking.exists()
    assert "sglang.srt.mem_cache.utils" not in loaded.real and not marker.exists()


def test_a_git_failure_is_one_readable_sentence(cache, tmp_path):
    with pytest.raises(SourceError) as e:
        from_git(tmp_path / "nope", "abcdef1", HI_MAMBA.files)
    assert str(e.value) == (f"git rev-parse --verify failed in {tmp_path / 'nope'}: fatal: not a git repository: "
                            f"'{tmp_path / 'nope'}'")


# --- #6: a checkout edited in the same process is loaded again ---

def test_an_edited_checkout_is_loaded_again_in_the_same_process(cache, tmp_path):
    tree = make_tree(tmp_path / "tree", "before")
    first = loaded_for(str(tree), None)
    assert loaded_for(str(tree), None) is first  # unchanged: the same load
    hm = tree / MC / "hi_mamba_radix_cache.py"
    hm.write_text(hm.read_text().replace("'before'", "'after!'"))  # same size: the contents tell
    again = loaded_for(str(tree), None)
    assert again is not first
    assert (first.module("hi_mamba_radix_cache").VERSION, again.module("hi_mamba_radix_cache").VERSION) == (
        "before", "after!")


def test_simcaches_folder_is_made_whole_with_its_marker_or_not_at_all(cache, monkeypatch):
    from simcache.real import source

    def full(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(SourceError) as e:
        source.own_dir()
    assert str(e.value) == (f"cannot make simcache's cache folder {cache / 'real'} (No space left on device); point "
                            f"$SIMCACHE_CACHE_DIR at a folder you can write")
    assert list(cache.iterdir()) == []  # no unmarked real/ left behind, no half-made folder
    monkeypatch.undo()
    monkeypatch.setenv("SIMCACHE_CACHE_DIR", str(cache))
    assert source.own_dir() == cache / "real" and [p.name for p in cache.iterdir()] == ["real"]
    assert (cache / "real" / "CACHEDIR.TAG").read_text() == source.TAG_TEXT
