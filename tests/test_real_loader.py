"""simcache.real's loader on a made-up SGLang tree (our own few lines, nothing of SGLang's): real module names, stubs
for every other ``sglang.*`` import, isolation from ``sys.modules``, several loads in one process, clear errors."""
from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from simcache.real import HI_MAMBA, SourceError, load
from simcache.real.source import from_path, root_of
from tests.real_fake_tree import MC, make_tree


def test_files_load_under_their_real_names_over_stubs_and_leave_sys_modules_as_they_were(tmp_path):
    sentinel = type(sys)("sglang")
    sys.modules["sglang"] = sentinel  # the caller's own sglang, which a load must put back
    try:
        loaded = load(from_path(make_tree(tmp_path)), HI_MAMBA)
        assert sys.modules["sglang"] is sentinel
        assert not [k for k in sys.modules if k.startswith("sglang.")]
    finally:
        del sys.modules["sglang"]
    cls = loaded.cache_class
    assert cls.__module__ == "sglang.srt.mem_cache.hi_mamba_radix_cache" and cls.__name__ == "HiMambaRadixCache"
    assert loaded.module("base_prefix_cache").BASE == "lru-base"
    assert sorted(loaded.real) == [f"sglang.srt.mem_cache.{m}" for m in (
        "base_prefix_cache", "evict_policy", "hi_mamba_radix_cache", "mamba_radix_cache", "radix_cache")]
    with loaded.active():  # a method's lazy import finds the stubs (and a new stub) only while active
        assert cls().lazy() == (64, "Late")
        assert sys.modules["sglang.srt.mem_cache.mamba_radix_cache"] is loaded.module("mamba_radix_cache")
    assert "sglang" not in sys.modules
    listed = loaded.stub_list()
    assert "sglang.srt.made.up: Thing (placeholder)" in listed
    assert "sglang.srt.later.only: Late (placeholder)" in listed  # recorded after the load too
    assert "sglang.srt.mem_cache.hicache_storage: PoolHitPolicy, PoolName, PoolTransfer" in listed
    assert not list(tmp_path.rglob("__pycache__")), "loading wrote bytecode beside the user's files"


def test_two_versions_live_in_one_process_each_with_its_own_modules(tmp_path):
    a = load(from_path(make_tree(tmp_path / "a", "one")), HI_MAMBA)
    b = load(from_path(make_tree(tmp_path / "b", "two", checkout=True)), HI_MAMBA)
    assert (a.module("hi_mamba_radix_cache").VERSION, b.module("hi_mamba_radix_cache").VERSION) == ("one", "two")
    assert a.cache_class is not b.cache_class and a.module("evict_policy") is not b.module("evict_policy")
    with a.active():
        assert sys.modules["sglang.srt.mem_cache.hi_mamba_radix_cache"].VERSION == "one"
        with a.active():  # re-entrant
            pass
        assert sys.modules["sglang.srt.mem_cache.hi_mamba_radix_cache"].VERSION == "one"
    with b.active():
        assert sys.modules["sglang.srt.mem_cache.hi_mamba_radix_cache"].VERSION == "two"
    assert "sglang" not in sys.modules


def test_an_optional_file_that_needs_a_missing_third_party_package_is_stubbed_and_says_why(tmp_path):
    tree = make_tree(tmp_path, extra={"utils.py": "import simcache_no_such_package_xyz\n"})
    loaded = load(from_path(tree), HI_MAMBA)
    assert "sglang.srt.mem_cache.utils" not in loaded.real
    assert loaded.fallbacks == {"sglang.srt.mem_cache.utils": "its file needs simcache_no_such_package_xyz, which "
                                                              "is not installed"}
    assert any(s.startswith("sglang.srt.mem_cache.utils: ") and s.endswith(
        "[stubbed: its file needs simcache_no_such_package_xyz, which is not installed]") for s in loaded.stub_list())


def test_a_required_file_that_fails_or_is_missing_is_one_sentence(tmp_path):
    tree = make_tree(tmp_path / "broken", extra={"radix_cache.py": "raise RuntimeError('boom')\n"})
    with pytest.raises(SourceError) as e:
        load(from_path(tree), HI_MAMBA)
    assert str(e.value) == (f"loading {tree.resolve() / MC / 'radix_cache.py'} failed: RuntimeError: boom; this file "
                            f"may need a stub simcache.real does not have (see `simcache real --list-stubs`)")
    assert "sglang" not in sys.modules
    tree = make_tree(tmp_path / "partial")
    (tree / MC / "radix_cache.py").unlink()
    with pytest.raises(SourceError) as e:
        load(from_path(tree), HI_MAMBA)
    assert str(e.value).startswith(f"{tree} has no {MC}/radix_cache.py; ")
    no_class = make_tree(tmp_path / "noclass", extra={"hi_mamba_radix_cache.py": "X = 1\n"})
    with pytest.raises(SourceError) as e:
        load(from_path(no_class), replace(HI_MAMBA))
    assert str(e.value).endswith("defines no HiMambaRadixCache; this SGLang version does not have the hi_mamba cache")


def test_root_of_finds_sglang_in_a_checkout_a_wheel_or_the_package_folder(tmp_path):
    wheel = make_tree(tmp_path / "wheel")
    checkout = make_tree(tmp_path / "checkout", checkout=True)
    assert root_of(wheel) == wheel.resolve()
    assert root_of(checkout) == (checkout / "python").resolve()
    assert root_of(checkout / "python" / "sglang") == (checkout / "python").resolve()
    for bad, says in ((tmp_path / "nope", "no such folder"), (wheel / MC / "radix_cache.py", "is not a folder"),
                      (tmp_path, "holds no sglang/srt folder")):
        with pytest.raises(SourceError) as e:
            root_of(bad)
        assert says in str(e.value)
