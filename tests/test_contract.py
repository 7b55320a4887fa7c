"""The cache's contract: every public operation says what it mutates, what must be locked, and which SGLang
function it mirrors (``SGLang: ``Class.function``, file.py:LINE`` at 4a50cd78, or ``SGLang: none (why)``)."""
from __future__ import annotations

import inspect
import re

import pytest

from simcache.cache import HiMambaRadixCache
from simcache.controller import Ack, CacheController
from simcache.lru import EvictionRound, LRUList, OrderedLeafSet

SGLANG_FILES = {"hi_mamba_radix_cache.py", "mamba_radix_cache.py", "radix_cache.py", "cache_controller.py"}
NAMED = re.compile(r"SGLang: (the \S+ (loop )?of |the ack's |[^`]*)``(?P<name>[\w.() ]+)``.*?(?P<file>[a-z_]+\.py):\d+",
                   re.S)
NONE = re.compile(r"SGLang: none \(\S")
CACHE_CLASSES = [k for k in HiMambaRadixCache.__mro__ if k.__module__.startswith("simcache.")]
OTHER_CLASSES = [LRUList, OrderedLeafSet, EvictionRound, CacheController, Ack]


def _public(classes):
    for klass in classes:
        for name, attr in vars(klass).items():
            if name.startswith("_") or not (inspect.isfunction(attr) or isinstance(attr, property)):
                continue
            yield f"{klass.__name__}.{name}", (attr.fget if isinstance(attr, property) else attr).__doc__ or ""


CACHE_OPS = dict(_public(CACHE_CLASSES))
OTHER_OPS = dict(_public(OTHER_CLASSES))


def test_the_contract_covers_the_cache_its_mixins_the_lru_lists_and_the_controller():
    assert {"TreeOps.match_prefix", "TreeOps.insert", "HiCache.write_backup", "Prefetch.prefetch_from_storage",
            "HostEviction.evict_host", "DeviceEviction.evict", "RequestCaching.cache_finished_req",
            "HiMambaRadixCache.inc_lock_ref"} <= set(CACHE_OPS)
    assert {"LRUList.insert_mru", "CacheController.write", "EvictionRound.next"} <= set(OTHER_OPS)
    assert len(CACHE_OPS) + len(OTHER_OPS) >= 60


@pytest.mark.parametrize("name", sorted({**CACHE_OPS, **OTHER_OPS}))
def test_every_public_operation_names_its_sglang_counterpart(name):
    doc = {**CACHE_OPS, **OTHER_OPS}[name]
    named = NAMED.search(doc)
    assert named or NONE.search(doc), f"{name}: no 'SGLang: ``...``, file.py:LINE' nor 'SGLang: none (...)'"
    if named:
        assert named["file"] in SGLANG_FILES, (name, named["file"])


@pytest.mark.parametrize("name", sorted(CACHE_OPS))
def test_every_cache_operation_says_what_it_mutates_and_what_must_be_locked(name):
    doc = CACHE_OPS[name]
    assert "Mutates:" in doc and re.search(r"\b[Ll]ocks:", doc), name


def test_match_prefix_says_it_splits_nodes():
    assert "splits" in CACHE_OPS["TreeOps.match_prefix"]
    assert "split" in CACHE_OPS["Prefetch.check_prefetch_progress"]
