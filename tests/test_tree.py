"""The radix-tree half of the cache: keys, matching (which splits), inserting, and where Mamba states attach.

The stories run under ``write_back`` so that nothing is copied to host behind our back (write-back only copies on
eviction), and the tree text shows only what matching and inserting did.
"""
from __future__ import annotations

from helpers import free_lists, make_cache, node_at, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from simcache.driver import Driver
from simcache.keys import child_key, format_key, match_len, page_floor
from simcache.state import tree_slot_lines

# --- keys -------------------------------------------------------------------------------------------------------

def test_child_key_is_the_first_token_or_the_first_page():
    assert child_key((1, 2, 3), 1) == 1
    assert child_key((1, 2, 3, 4), 4) == (1, 2, 3, 4)
    assert child_key((1, 2, 3, 4, 5, 6, 7, 8), 4) == (1, 2, 3, 4)
    assert child_key((5, 6, 7, 8), 2) == (5, 6)


def test_match_len_counts_tokens_at_page_size_1_and_whole_pages_otherwise():
    assert match_len((1, 2, 3), (1, 2, 4), 1) == 2
    assert match_len((1, 2, 3), (1, 2, 3, 4), 1) == 3
    assert match_len((9,), (1,), 1) == 0
    # six equal tokens, but the second page differs in its last two: only the first page counts
    assert match_len((1, 2, 3, 4, 5, 6, 7, 8), (1, 2, 3, 4, 5, 6, 9, 9), 4) == 4
    # a partial last page never matches
    assert match_len((1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 6, 7, 8), 4) == 4
    assert match_len((1, 2, 3, 4), (1, 2, 3, 9), 4) == 0
    assert page_floor(7, 4) == 4 and page_floor(8, 4) == 8 and page_floor(3, 1) == 3


# --- page size 1: a story of splits and inserts -------------------------------------------------------------------

def test_a_match_that_ends_inside_a_node_splits_it_and_the_original_object_becomes_the_suffix():
    cache = make_cache("write_back")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4]))
    original = node_at(cache, [1, 2, 3, 4])
    assert original.id == 7  # ids 0-1, 3-6 are the LRU lists' sentinels, 2 the root, as in SGLang
    assert tree_slot_lines(cache) == ["1 1,2,3,4 v=0,1,2,3 h=- m=0 mh=-"]

    result = cache.match_prefix([1, 2, 9])

    prefix = cache.root_node.children[1]
    assert prefix is not original and prefix.id == 8
    assert prefix.key == (1, 2) and prefix.mamba_value is None  # the new prefix is a tombstone
    assert prefix.children == {3: original}
    assert original.key == (3, 4) and original.parent is prefix and original.value == [2, 3]
    assert original.mamba_value == [0]  # the Mamba state stays with the suffix: it is the state after 1,2,3,4
    # the prefix holds no Mamba state, so the best node is the root and no device KV is reusable
    assert result.device_indices == [] and result.last_device_node is cache.root_node
    assert result.best_last_node is cache.root_node
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=- m=- mh=-", "2 3,4 v=2,3 h=- m=0 mh=-"]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3,4 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=4, full_protected=0, mamba_evictable=1, mamba_protected=0),
        full_lru=["1,2/3,4", "1,2"],  # the split inserts the prefix, then the suffix, each at the MRU end
        mamba_lru=["1,2/3,4"], host_mamba_lru=[], device_leaves=["1,2/3,4"], host_leaves=[])


def test_insert_over_a_split_path_frees_the_duplicate_slots_and_attaches_mamba_to_the_new_node_only():
    cache = make_cache("write_back")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4]))
    cache.match_prefix([1, 2, 9])  # split: 1,2 (tombstone) / 3,4

    rid = drv.start([1, 2, 5, 6])
    req = drv.live[rid]
    # the match stopped at the tombstone 1,2: nothing reusable, the request computes all four tokens itself
    assert (req.kv, req.mamba_pool_idx, req.cache_protected_len, req.last_node) == ([4, 5, 6, 7], 1, 0,
                                                                                    cache.root_node)
    assert cache.insert([1, 2, 5, 6], req.kv, [req.mamba_pool_idx]) == (2, False)

    # slots 4,5 duplicated the cached 1,2 and went back to the free list; 6,7 and mamba 1 now belong to 5,6
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=- m=- mh=-", "2 3,4 v=2,3 h=- m=0 mh=-",
                                      "2 5,6 v=6,7 h=- m=1 mh=-"]
    assert free_lists(cache)["device_kv"] == list(range(8, 32)) + [4, 5]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3,4 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0",
              "2 5,6 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=6, full_protected=0, mamba_evictable=2, mamba_protected=0),
        full_lru=["1,2/5,6", "1,2", "1,2/3,4"], mamba_lru=["1,2/5,6", "1,2/3,4"], host_mamba_lru=[],
        device_leaves=["1,2/3,4", "1,2/5,6"], host_leaves=[])


def test_reinserting_a_cached_path_reports_mamba_exist_and_the_request_mamba_is_freed():
    cache = make_cache("write_back")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4]))
    cache.match_prefix([1, 2, 9])
    drv.finish(drv.start([1, 2, 5, 6]))
    before = snapshot(cache)

    rid = drv.start([1, 2, 3, 4])
    req = drv.live[rid]
    # 3,4 holds a Mamba state, so the whole prefix is reusable and the request owns only its Mamba slot 2
    assert (req.kv, req.mamba_pool_idx, req.cache_protected_len) == ([0, 1, 2, 3], 2, 4)
    assert req.last_node is node_at(cache, [1, 2], [3, 4])
    assert cache.insert(req.tokens, req.kv, [2], prev_prefix_len=4) == (4, True)
    cache.dec_lock_ref(req.last_node)  # what cache_finished_req does after the insert (it also frees slot 2)
    cache.pools.device_mamba.free([2])
    del drv.live[rid]

    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=- m=- mh=-", "2 3,4 v=2,3 h=- m=0 mh=-",
                                      "2 5,6 v=6,7 h=- m=1 mh=-"]
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7, 2]
    assert free_lists(cache)["device_kv"] == list(range(8, 32)) + [4, 5]  # nothing freed: all 4 were protected
    assert snapshot(cache) == {**before, "full_lru": ["1,2/3,4", "1,2", "1,2/5,6"],
                               "mamba_lru": ["1,2/3,4", "1,2/5,6"]}


def test_inserting_exactly_a_tombstones_path_gives_it_the_requests_mamba_state():
    cache = make_cache("write_back")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4]))
    cache.match_prefix([1, 2, 9])

    drv.finish(drv.start([1, 2]))  # kv 4,5 are duplicates of 1,2's 0,1; mamba 1 is kept by the tombstone

    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=- m=1 mh=-", "2 3,4 v=2,3 h=- m=0 mh=-"]
    assert free_lists(cache)["device_kv"] == list(range(6, 32)) + [4, 5]
    assert free_lists(cache)["device_mamba"] == [2, 3, 4, 5, 6, 7]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3,4 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=4, full_protected=0, mamba_evictable=2, mamba_protected=0),
        full_lru=["1,2", "1,2/3,4"], mamba_lru=["1,2", "1,2/3,4"], host_mamba_lru=[],
        device_leaves=["1,2/3,4"], host_leaves=[])


def test_device_indices_stop_at_the_deepest_node_holding_a_mamba_state():
    cache = make_cache("write_back")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4]))
    cache.match_prefix([1, 2, 9])
    drv.finish(drv.start([1, 2]))  # 1,2 now holds a Mamba state too
    top, bottom = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3, 4])

    full = cache.match_prefix([1, 2, 3, 4, 5])
    assert (full.device_indices, full.last_device_node, full.best_last_node) == ([0, 1, 2, 3], bottom, bottom)

    # 1,2,3 matches three device tokens, but the split-off 3 is a tombstone: only 1,2's KV comes with a state
    partial = cache.match_prefix([1, 2, 3])
    assert (partial.device_indices, partial.last_device_node, partial.best_last_node) == ([0, 1], top, top)
    assert bottom.key == (4,) and bottom.parent.key == (3,) and bottom.parent.mamba_value is None
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=- m=1 mh=-", "2 3 v=2 h=- m=- mh=-", "3 4 v=3 h=- m=0 mh=-"]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
              "3 4 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=4, full_protected=0, mamba_evictable=2, mamba_protected=0),
        # the split put 3 then 4 at the MRU end; the match then refreshed its best node 1,2 (and its ancestors)
        full_lru=["1,2", "1,2/3/4", "1,2/3"], mamba_lru=["1,2", "1,2/3/4"], host_mamba_lru=[],
        device_leaves=["1,2/3/4"], host_leaves=[])


def test_a_match_of_nothing_changes_nothing():
    cache = make_cache("write_back")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4]))
    before = (snapshot(cache), tree_slot_lines(cache))
    result = cache.match_prefix([7, 1, 2])
    assert (result.device_indices, result.last_device_node, result.host_hit_length) == ([], cache.root_node, 0)
    assert (snapshot(cache), tree_slot_lines(cache)) == before
    empty = cache.match_prefix([])
    assert (empty.device_indices, empty.last_device_node, empty.last_host_node) == ([], cache.root_node,
                                                                                    cache.root_node)


# --- page size 4 ------------------------------------------------------------------------------------------------

def _page4_cache():
    cache = make_cache("write_back", page_size=4)
    kv, mamba = cache.pools.device_kv.alloc(8), cache.pools.device_mamba.alloc(1)
    assert cache.insert([1, 2, 3, 4, 5, 6, 7, 8], kv, mamba) == (0, False)
    return cache


def test_page4_children_are_keyed_by_their_first_page_and_queries_are_cut_to_whole_pages():
    cache = _page4_cache()
    node = node_at(cache, [1, 2, 3, 4, 5, 6, 7, 8])
    assert list(cache.root_node.children) == [(1, 2, 3, 4)]

    # 10 tokens are cut to 8 before matching
    hit = cache.match_prefix([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert (hit.device_indices, hit.last_device_node) == ([0, 1, 2, 3, 4, 5, 6, 7], node)

    # a first page that differs in its last token is no match at all, and nothing splits
    miss = cache.match_prefix([1, 2, 3, 9, 9, 9, 9, 9])
    assert (miss.device_indices, miss.last_device_node) == ([], cache.root_node)
    assert tree_slot_lines(cache) == ["1 1,2,3,4,5,6,7,8 v=0,1,2,3,4,5,6,7 h=- m=0 mh=-"]


def test_page4_splits_happen_only_at_page_boundaries():
    cache = _page4_cache()
    node = node_at(cache, [1, 2, 3, 4, 5, 6, 7, 8])

    # six tokens agree, but the second page does not: the split is after the first page
    result = cache.match_prefix([1, 2, 3, 4, 5, 6, 9, 9])

    prefix = cache.root_node.children[(1, 2, 3, 4)]
    assert prefix.key == (1, 2, 3, 4) and prefix.children == {(5, 6, 7, 8): node}
    assert node.key == (5, 6, 7, 8) and node.parent is prefix
    assert (result.device_indices, result.last_device_node) == ([], cache.root_node)
    assert tree_slot_lines(cache) == ["1 1,2,3,4 v=0,1,2,3 h=- m=- mh=-", "2 5,6,7,8 v=4,5,6,7 h=- m=0 mh=-"]
    assert snapshot(cache) == dict(
        tree=["1 1,2,3,4 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 5,6,7,8 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=8, full_protected=0, mamba_evictable=1, mamba_protected=0),
        full_lru=["1,2,3,4/5,6,7,8", "1,2,3,4"], mamba_lru=["1,2,3,4/5,6,7,8"], host_mamba_lru=[],
        device_leaves=["1,2,3,4/5,6,7,8"], host_leaves=[])


def test_page4_insert_under_a_split_prefix():
    cache = _page4_cache()
    cache.match_prefix([1, 2, 3, 4, 5, 6, 9, 9])
    kv, mamba = cache.pools.device_kv.alloc(8), cache.pools.device_mamba.alloc(1)
    assert (kv, mamba) == ([8, 9, 10, 11, 12, 13, 14, 15], [1])

    assert cache.insert([1, 2, 3, 4, 9, 9, 9, 9], kv, mamba) == (4, False)

    assert list(node_at(cache, [1, 2, 3, 4]).children) == [(5, 6, 7, 8), (9, 9, 9, 9)]
    assert tree_slot_lines(cache) == ["1 1,2,3,4 v=0,1,2,3 h=- m=- mh=-", "2 5,6,7,8 v=4,5,6,7 h=- m=0 mh=-",
                                      "2 9,9,9,9 v=12,13,14,15 h=- m=1 mh=-"]
    assert free_lists(cache)["device_kv"] == list(range(16, 32)) + [8, 9, 10, 11]
    # the new leaf holds a Mamba state, so a match through it reuses both pages of KV
    hit = cache.match_prefix([1, 2, 3, 4, 9, 9, 9, 9, 1])
    assert (hit.device_indices, hit.last_device_node) == ([0, 1, 2, 3, 12, 13, 14, 15],
                                                          node_at(cache, [1, 2, 3, 4], [9, 9, 9, 9]))
    # a partial second page is cut off; the first page is a tombstone, so nothing is reusable
    assert cache.match_prefix([1, 2, 3, 4, 5, 6]).device_indices == []


def test_page_hashes_chain_each_page_from_the_previous_page_s_hash_string():
    """Each page's hash is FNV-1a over its tokens started from the previous page's hash as written (16 hex digits);
    ``page_hashes`` carries the number instead of re-reading the string, and must give the same strings."""
    import random

    from simcache.keys import page_hashes

    def reference(key, page_size, prior):
        out = []
        for start in range(0, len(key), page_size):
            h = 0xCBF29CE484222325 if prior is None else int(prior, 16)
            for t in key[start : start + page_size]:
                h = ((h ^ (t & 0xFFFFFFFFFFFFFFFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
            prior = f"{h:016x}"
            out.append(prior)
        return out

    rng = random.Random(4)
    for _ in range(500):
        ps = rng.choice([1, 2, 16])
        key = tuple(rng.randrange(-5, 1 << 40) for _ in range(ps * rng.randrange(0, 5)))
        prior = rng.choice([None, f"{rng.getrandbits(64):016x}"])
        assert page_hashes(key, ps, prior) == reference(key, ps, prior)
    assert page_hashes((1, 2), 1, None) == ["af63bc4c8601b62c", "082f2407b4e8902a"]  # as before the carry


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=12),
                 st.lists(st.one_of(st.integers(), st.booleans(), st.text(max_size=3)), max_size=6)),
       st.sampled_from([tuple, list]))
def test_format_key_spells_every_key_token_by_token(tokens, kind):
    # the repr fast path for plain ints gives the same text as joining each token's str (bools and text included)
    key = kind(tokens)
    assert format_key(key) == ",".join(str(t) for t in key)
    assert format_key((7,)) == "7" and format_key((7, 8)) == "7,8" and format_key(()) == ""
