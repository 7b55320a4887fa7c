"""A release's files from a package index, on a local fake index (never the network): found, fetched once, verified,
extracted into the cache folder only; each failure one sentence, exit status 2 on the command line, nothing written
outside the cache folder. The wheel holds a made-up SGLang tree (our own lines, nothing of SGLang's)."""
from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from simcache.cli import main
from simcache.real import HI_MAMBA, SourceError, load, resolve
from simcache.real import wheel as wheel_mod
from simcache.real.source import TAG_TEXT, clear_cache
from tests.real_fake_tree import FILES, MC, make_tree

VERSION = "9.8.7"
WHEEL = f"sglang-{VERSION}-cp311-cp311-manylinux_2_34_x86_64.whl"


def make_wheel(skip: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in FILES.items():
            if name != skip:
                z.writestr(f"{MC}/{name}", text.format(version=VERSION) if "{version" in text else text)
        z.writestr("sglang-9.8.7.dist-info/METADATA", "Name: sglang\n")
    return buf.getvalue()


class Index:
    """A local JSON simple API for sglang: one wheel, with the sha256 and size it is told to announce."""

    def __init__(self, body: bytes, sha256: str | None = None, size: int | None = None, wheel_status: int = 200,
                 more: list | None = None, only: list | None = None):
        self.body, self.wheel_status, self.hits = body, wheel_status, {"index": 0, "wheel": 0}
        self.more, self.only = more or [], only  # more index entries; or only these
        self.sha256 = sha256 or hashlib.sha256(body).hexdigest()
        self.size = len(body) if size is None else size
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/simple/sglang/":
                    index.hits["index"] += 1
                    doc = {"name": "sglang", "versions": ["0.5.17", VERSION], "files": [
                        {"filename": WHEEL, "url": f"http://127.0.0.1:{index.port}/files/{WHEEL}",
                         "hashes": {"sha256": index.sha256}, "size": index.size},
                        {"filename": "sglang-0.5.17.tar.gz", "url": "http://127.0.0.1:1/x", "hashes": {"sha256": "0"}},
                        *index.more]}
                    if index.only is not None:
                        doc["files"] = index.only
                    self._send(200, json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json")
                elif self.path == f"/files/{WHEEL}":
                    index.hits["wheel"] += 1
                    self._send(index.wheel_status, index.body if index.wheel_status == 200 else b"no",
                               "application/octet-stream")
                else:
                    self._send(404, b"no", "text/plain")

            def _send(self, status, data, kind):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache folder, and a folder beside it that must stay empty (nothing written outside the cache)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.setenv("SIMCACHE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(outside)
    yield tmp_path / "cache"
    assert list(outside.iterdir()) == [], "something was written outside the cache folder"


def serve(monkeypatch, request, **kw) -> Index:
    idx = Index(kw.pop("body", None) or make_wheel(), **kw)
    request.addfinalizer(idx.close)
    monkeypatch.setenv("SIMCACHE_INDEX_URL", f"http://127.0.0.1:{idx.port}/simple/")
    return idx


def sentence(capsys, *argv: str) -> str:
    """The one sentence a failing command prints (after the download's progress line, if it got that far)."""
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if not ln.startswith("simcache: downloading ")]
    assert out == "" and len(lines) == 1, err
    return lines[0]


def test_a_release_is_fetched_once_verified_and_only_its_files_extracted(cache, monkeypatch, request, capsys):
    idx = serve(monkeypatch, request)
    src = resolve(version=VERSION, files=HI_MAMBA.files)
    assert src.kind == "release" and src.version == VERSION and src.root == cache / "real" / "sglang" / VERSION
    assert src.label == f"sglang {VERSION} ({WHEEL}, sha256 {idx.sha256[:12]}...)"
    got = sorted(str(p.relative_to(src.root)) for p in src.root.rglob("*.py"))
    assert got == sorted(f"{MC}/{n}" for n in FILES)  # no METADATA, nothing else of the wheel
    assert (cache / "real" / "wheels" / WHEEL).read_bytes() == idx.body
    assert load(src, HI_MAMBA).module("hi_mamba_radix_cache").VERSION == VERSION
    assert "downloading " + WHEEL in capsys.readouterr().err
    resolve(version=VERSION, files=HI_MAMBA.files)  # the second time: from the cache, no index, no download
    assert idx.hits == {"index": 1, "wheel": 1}
    (src.root / MC / "radix_cache.py").write_text("tampered = True\n")  # a changed file is extracted again
    resolve(version=VERSION, files=HI_MAMBA.files)
    assert (src.root / MC / "radix_cache.py").read_text() == FILES["radix_cache.py"]
    assert idx.hits == {"index": 2, "wheel": 1}  # the kept wheel's sha256 still matched: not downloaded again
    assert clear_cache() == [f"removed {cache / 'real'} (simcache's SGLang wheels and files)"]
    assert not (cache / "real").exists()


def test_the_newest_release_is_the_highest_version_not_the_last_listed():
    from simcache.real.wheel import _release_order

    listed = ["0.5.13", "0.5.13.post1", "0.5.18", "0.5.23", "0.5.9", "9" * 5000, "0.5.10"]  # as text: 0.5.9 last
    assert max(listed[:5] + listed[6:], key=_release_order) == "0.5.23"
    assert sorted(["0.5.9", "0.5.13.post1", "0.5.10", "0.5.13"], key=_release_order) == [
        "0.5.9", "0.5.10", "0.5.13", "0.5.13.post1"]
    assert max(listed, key=_release_order) == "9" * 5000  # a hostile index entry is compared, never a traceback


def test_a_version_the_index_does_not_have(cache, monkeypatch, request, capsys):
    serve(monkeypatch, request)
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", "1.2.3") == (
        f"simcache: sglang has no release 1.2.3 on the package index (the newest is {VERSION}); give a released "
        f"version like 0.5.17")
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", "0.5.17") == (
        "simcache: sglang 0.5.17 has no wheel with a sha256 on the package index; give --sglang PATH to an unpacked "
        "copy instead")
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", "latest") == (
        "simcache: --sglang-version 'latest' is not a version number; give one like 0.5.17")


def test_a_hash_mismatch_keeps_nothing(cache, monkeypatch, request, capsys):
    serve(monkeypatch, request, sha256="ab" * 32)
    err = sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION)
    assert err.startswith(f"simcache: the downloaded {WHEEL} has sha256 ") and err.endswith(
        ", not the index's abababababab...; nothing was kept, try again")
    assert list((cache / "real" / "wheels").iterdir()) == []


def test_a_pinned_wheel_whose_index_hash_changed_is_refused_before_downloading(cache, monkeypatch, request, capsys):
    idx = serve(monkeypatch, request)
    monkeypatch.setitem(wheel_mod.PINNED, WHEEL, "cd" * 32)
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION) == (
        f"simcache: the package index's sha256 for {WHEEL} is {idx.sha256[:12]}..., not the cdcdcdcdcdcd... this "
        f"project pinned; refusing it")
    assert idx.hits["wheel"] == 0


def test_a_failed_download_and_an_unreachable_index(cache, monkeypatch, request, capsys):
    idx = serve(monkeypatch, request, wheel_status=500)
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION) == (
        f"simcache: the package index answered HTTP 500 for http://127.0.0.1:{idx.port}/files/{WHEEL}; try again "
        f"later")
    idx.close()
    err = sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION)
    assert err.startswith(f"simcache: cannot reach the package index at http://127.0.0.1:{idx.port}/simple/sglang/ (")
    assert err.endswith("); check the network, or give --sglang PATH to a local checkout")


def test_a_download_over_the_bound_is_refused_before_or_while_fetching(cache, monkeypatch, request, capsys):
    body = make_wheel()
    idx = serve(monkeypatch, request, body=body, size=len(body) - 10)  # the body grows past what was announced
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION) == (
        f"simcache: the download of {WHEEL} grew past the {len(body) - 10:,} bytes the index announced; refusing it")
    monkeypatch.setattr(wheel_mod, "MAX_WHEEL", 100)
    idx.size = len(body)
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION) == (
        f"simcache: {WHEEL} is 0 MB, over the 0 MB this tool fetches")
    assert idx.hits["wheel"] == 1 and list((cache / "real" / "wheels").iterdir()) == []


def test_a_file_missing_from_the_wheel(cache, monkeypatch, request, capsys):
    serve(monkeypatch, request, body=make_wheel(skip="mamba_radix_cache.py"))
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION).startswith(
        f"simcache: the wheel of sglang {VERSION} ({WHEEL}, sha256 ")
    assert capsys.readouterr() == ("", "")
    with pytest.raises(SourceError) as e:
        load(resolve(version=VERSION, files=HI_MAMBA.files), HI_MAMBA)
    assert str(e.value).endswith(f"...) has no {MC}/mamba_radix_cache.py; this release does not ship the hi_mamba "
                                 f"cache")


def test_a_planted_symlink_in_the_cache_is_refused_not_followed(cache, monkeypatch, request, capsys, tmp_path):
    serve(monkeypatch, request)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (cache / "real" / "sglang").mkdir(parents=True)
    (cache / "real" / "CACHEDIR.TAG").write_text(TAG_TEXT)
    os.symlink(elsewhere, cache / "real" / "sglang" / VERSION)
    err = sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION)
    assert err == (f"simcache: {cache / 'real' / 'sglang' / VERSION} in the cache folder is not a plain folder (a "
                   f"symlink or a file); remove it with `python -m simcache real --clear-cache`")
    assert list(elsewhere.iterdir()) == []
    assert main(["real", "--clear-cache"]) == 0
    assert capsys.readouterr().out == f"removed {cache / 'real'} (simcache's SGLang wheels and files)\n"
    assert elsewhere.is_dir() and not (cache / "real").exists()


def test_bad_paths_and_words_are_one_sentence(cache, capsys, tmp_path):
    assert sentence(capsys, "real", "crash_pr", "--sglang", str(tmp_path / "nope")) == (
        f"simcache: --sglang {tmp_path / 'nope'}: no such folder; give a SGLang checkout or an unpacked wheel")
    assert sentence(capsys, "real", "crash_pr", "--sglang", str(tmp_path)) == (
        f"simcache: --sglang {tmp_path} holds no sglang/srt folder; give the top of a SGLang checkout (with "
        f"python/sglang/) or an unpacked wheel (with sglang/)")
    assert sentence(capsys, "real", "crash_pr") == (
        "simcache: say which SGLang code to run: --sglang PATH (or --sglang installed) or --sglang-version X.Y.Z")
    assert sentence(capsys, "run", "crash_pr", "--against-real", str(tmp_path / "nope")) == (
        f"simcache: --sglang {tmp_path / 'nope'}: no such folder; give a SGLang checkout or an unpacked wheel")
    assert sentence(capsys, "real", "--clear-cache", "crash_pr") == (
        "simcache: --clear-cache runs alone; give it without a scenario, --gallery or --list-stubs")


def test_help_says_loading_runs_their_code_and_where_the_cache_is(cache, capsys):
    with pytest.raises(SystemExit):
        main(["real", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "LOADING SGLANG'S FILES RUNS THEIR CODE" in text
    assert ("SGLang's wheels and files go in its real/ folder, marked by a CACHEDIR.TAG. `simcache real --clear-cache` "
            "removes that folder (only when it carries the marker) and prints what it removed") in text


def test_the_list_of_stubs_of_a_made_up_tree(cache, capsys, tmp_path):
    tree = make_tree(tmp_path / "tree")
    assert main(["real", "--sglang", str(tree), "--list-stubs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == str(tree) and "sglang.srt.mem_cache.radix_cache" in doc["real"]
    assert "sglang.srt.made.up: Thing (placeholder)" in doc["stubs"]
    assert not list(Path(tree).rglob("__pycache__"))


def test_the_installed_package_is_used_only_when_asked_for_by_name(cache, capsys, tmp_path, monkeypatch):
    site = make_tree(tmp_path / "site")  # stands in for a site-packages folder with an installed sglang
    (site / "sglang" / "__init__.py").write_text("raise RuntimeError('an installed package must not be imported')\n")
    monkeypatch.syspath_prepend(str(site))
    assert main(["real", "--sglang", "installed", "--list-stubs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"installed sglang at {site.resolve() / 'sglang'}: real modules ")
    assert "sglang" not in sys.modules
    assert sentence(capsys, "real", "crash_pr") == (
        "simcache: say which SGLang code to run: --sglang PATH (or --sglang installed) or --sglang-version X.Y.Z")


def test_an_installed_sglang_is_never_imported_when_a_path_is_named(cache, tmp_path, monkeypatch):
    site = make_tree(tmp_path / "site")
    (site / "sglang" / "__init__.py").write_text("raise RuntimeError('an installed package must not be imported')\n")
    (site / "sglang" / "srt" / "made").mkdir()
    (site / "sglang" / "srt" / "made" / "up.py").write_text("Thing = 'from the installed package'\n")
    monkeypatch.syspath_prepend(str(site))
    loaded = load(resolve(str(make_tree(tmp_path / "named")), None, HI_MAMBA.files), HI_MAMBA)
    assert loaded.module("sglang.srt.made.up").Thing.__name__ == "Thing"  # a placeholder, not the installed text
    assert all(str(p).startswith(str((tmp_path / "named").resolve())) for p in loaded.real.values())


def test_a_bad_confirm_real_source_fails_before_the_search(cache, capsys, tmp_path, monkeypatch):
    import simcache.explore.cli as explore_cli

    monkeypatch.setattr(explore_cli, "explore", lambda *a, **k: pytest.fail("the search ran before the check"))
    assert sentence(capsys, "explore", "scenario_a", "--confirm-real", str(tmp_path / "nope")) == (
        f"simcache: --sglang {tmp_path / 'nope'}: no such folder; give a SGLang checkout or an unpacked wheel")


def test_a_release_no_preset_models_asks_for_one(cache, monkeypatch, request, capsys):
    serve(monkeypatch, request)
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION).startswith(
        f"simcache: no preset models sglang {VERSION}; give --preset NAME to compare with one (pre_fix, ")


# --- review1 #9, #15: a corrupt cache file, a malformed index, a question asked before any download ---

def test_a_corrupt_files_json_is_ignored_and_the_files_extracted_again(cache, monkeypatch, request):
    idx = serve(monkeypatch, request)
    src = resolve(version=VERSION, files=HI_MAMBA.files)
    manifest = src.root / "files.json"
    for text in ("[]", '{"files": {}, "absent": 5}', '{"wheel": 1, "sha256": "x", "files": {"a": 2}, "absent": []}',
                 "not json", '{"files": []}'):
        manifest.write_text(text)
        again = resolve(version=VERSION, files=HI_MAMBA.files)
        assert again == src and json.loads(manifest.read_text())["files"].keys() == {f"{MC}/{n}" for n in FILES}
    assert idx.hits["wheel"] == 1  # the kept wheel was reused each time: its sha256 still matched


def test_a_malformed_index_entry_is_passed_over_and_a_nul_in_a_name_is_one_sentence(cache, monkeypatch, request,
                                                                                     capsys):
    idx = serve(monkeypatch, request, more=[
        {"filename": f"sglang-{VERSION}-py3-none-any.whl", "url": "http://127.0.0.1:1/x", "hashes": {"sha256": 5}},
        {"filename": f"sglang-{VERSION}-cp310-none-any.whl", "url": 7, "hashes": {"sha256": "ab" * 32}},
        {"filename": f"sglang-{VERSION}-cp39-none-any.whl", "url": "u", "hashes": {"sha256": "zz" * 32}},
        {"filename": f"sglang-{VERSION}-cp38-none-any.whl", "url": "u", "hashes": {"sha256": "ab" * 32}, "size": "1"},
        ["not", "a", "dict"]])
    assert resolve(version=VERSION, files=HI_MAMBA.files).label.startswith(f"sglang {VERSION} ({WHEEL}, ")
    assert idx.hits["wheel"] == 1
    (cache / "real" / "sglang" / VERSION / "files.json").unlink()  # so the index is asked again
    idx.only = [{"filename": f"sglang-{VERSION}-py3-none-any.whl", "url": "u", "hashes": {"sha256": None}}]
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION) == (
        f"simcache: sglang {VERSION} has no wheel with a sha256 on the package index; give --sglang PATH to an "
        f"unpacked copy instead")
    nul = f"sglang-{VERSION}-cp311-cp311-x\x00y.whl"
    idx.only = [{"filename": nul, "url": f"http://127.0.0.1:{idx.port}/files/{WHEEL}", "hashes": {"sha256": idx.sha256},
                 "size": len(idx.body)}]
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION) == (
        f"simcache: the package index named a wheel 'sglang-{VERSION}-cp311-cp311-x\\x00y.whl'; refusing a file name "
        f"with a path or a control character in it")
    assert [p.name for p in (cache / "real" / "wheels").iterdir()] == [WHEEL]


def test_real_without_a_scenario_says_so_before_fetching_anything(cache, monkeypatch, request, capsys):
    idx = serve(monkeypatch, request)
    assert sentence(capsys, "real", "--sglang-version", VERSION) == (
        "simcache: give a SCENARIO (a gallery name or a file) or --gallery")
    assert sentence(capsys, "real", "crash_pr", "--gallery", "--sglang-version", VERSION) == (
        "simcache: give a SCENARIO (a gallery name or a file) or --gallery, not both")
    assert sentence(capsys, "real", "crash_pr", "--sglang-version", VERSION, "--memory-limit", "lots") == (
        "simcache: --memory-limit takes megabytes above 0 and at most 1,048,576 (plain digits like 2048, 0.5 or 1e3), "
        "not lots; e.g. --memory-limit 2048")
    assert idx.hits == {"index": 0, "wheel": 0}


def test_a_wheel_an_older_simcache_kept_is_copied_when_its_sha256_matches(cache, monkeypatch, request):
    idx = serve(monkeypatch, request)
    old = cache / "sglang" / "wheels"
    old.mkdir(parents=True)
    (old / WHEEL).write_bytes(idx.body)
    resolve(version=VERSION, files=HI_MAMBA.files)
    assert idx.hits["wheel"] == 0 and (cache / "real" / "wheels" / WHEEL).read_bytes() == idx.body
    assert (old / WHEEL).read_bytes() == idx.body  # read, never moved: that folder carries no marker of simcache's


def test_the_unified_race_without_a_source_is_refused_before_fetching_anything(cache, monkeypatch, request, capsys):
    from simcache.real.unified.__main__ import main as race_main

    idx = serve(monkeypatch, request)
    for argv in ([], ["--all", "--sglang-version", "0.5.16"], ["--git", "m", "--sglang-version", "0.5.16"]):
        with pytest.raises(SystemExit) as e:
            race_main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err.splitlines()
        assert err[-1] == (
            "python -m simcache.real.unified: error: say which code to run, one of: --sglang-version X.Y.Z "
            "(repeatable), --all (every covered release, about 110 MB of wheels on a first run), --sglang PATH --as "
            "VERSION, or --git MIRROR")
    assert idx.hits == {"index": 0, "wheel": 0} and not (cache / "real").exists()


def test_a_unified_preset_refuses_installed_and_asks_for_a_scenario_before_fetching(cache, monkeypatch, request,
                                                                                     capsys):
    idx = serve(monkeypatch, request)
    assert sentence(capsys, "real", "x.json", "--preset", "unified_0_5_16", "--sglang", "installed") == (
        "simcache: --sglang installed runs HiMamba's class; for a unified preset give --sglang PATH (a checkout or "
        "unpacked wheel) or --sglang-version X.Y.Z")
    assert sentence(capsys, "real", "--preset", "unified_0_5_16", "--sglang-version", "0.5.16") == (
        "simcache: give a SCENARIO (a YAML/JSON scenario file or an OPS.json) to run on the unified class")
    assert idx.hits == {"index": 0, "wheel": 0} and not (cache / "real").exists()
