"""The data in the slots follows the nodes: after a copy to host, a demotion and a load back, the device and host
slots of every cached prefix hold the KV fingerprints of that prefix, and its Mamba slots hold the Mamba
fingerprint of the whole path. (The driver's "model" writes ``kv_fingerprints(tokens)`` for the tokens a request
computes and ``mamba_fingerprint(tokens)`` for its state; the controller copies slot data between tiers.)
"""
from __future__ import annotations

from helpers import make_cache, node_at, snapshot

from simcache.driver import Driver
from simcache.pools import kv_fingerprints, mamba_fingerprint
from simcache.state import dfs, tree_slot_lines


def path_tokens(cache, node) -> list[int]:
    return cache._node_prefix_tokens(node)


def contents(cache) -> dict[str, dict[str, list[int]]]:
    """What every attached node's slots hold, by tier, next to what they should hold."""
    pools, out = cache.pools, {}
    for _, n in dfs(cache):
        tokens = path_tokens(cache, n)
        kv = kv_fingerprints(tokens, start=len(tokens) - len(n.key))
        got, want = {}, {}
        for name, slots, pool, expected in (("device", n.value, pools.device_kv, kv),
                                            ("host", n.host_value, pools.host_kv, kv),
                                            ("mamba", n.mamba_value, pools.device_mamba, [mamba_fingerprint(tokens)]),
                                            ("mamba_host", n.mamba_host_value, pools.host_mamba,
                                             [mamba_fingerprint(tokens)])):
            if slots is not None:
                got[name], want[name] = pool.read(slots), expected
        out[",".join(map(str, tokens))] = dict(got=got, want=want)
    return out


def assert_every_slot_holds_its_prefix(cache) -> None:
    for prefix, c in contents(cache).items():
        assert c["got"] == c["want"], prefix


def test_write_through_demote_and_load_back_keep_every_token_and_state():
    cache = make_cache("write_through", load_back_threshold=1)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4]))
    drv.finish(drv.start([1, 2, 5, 6]))
    cache.check_hicache_events()
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=0,1 m=- mh=-", "2 3,4 v=2,3 h=2,3 m=0 mh=0",
                                      "2 5,6 v=6,7 h=4,5 m=1 mh=1"]
    assert_every_slot_holds_its_prefix(cache)

    assert cache.evict(100) == (6, 2)  # everything demoted: host copies only
    assert tree_slot_lines(cache) == ["1 1,2 v=- h=0,1 m=- mh=-", "2 3,4 v=- h=2,3 m=- mh=0",
                                      "2 5,6 v=- h=4,5 m=- mh=1"]
    assert_every_slot_holds_its_prefix(cache)
    top, node = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3, 4])
    assert cache.pools.host_kv.read([2, 3]) == kv_fingerprints([1, 2, 3, 4])[2:4]
    assert cache.pools.host_mamba.read([0]) == [mamba_fingerprint([1, 2, 3, 4])]

    # a request through the host-only 1,2/3,4: the host hit (4 tokens >= threshold 1) is loaded back
    rid = drv.start([1, 2, 3, 4, 9])
    req = drv.live[rid]
    assert (req.kv, req.cache_protected_len, req.last_node) == ([8, 9, 10, 11, 12], 4, node)
    assert tree_slot_lines(cache) == ["1 1,2 v=8,9 h=0,1 m=- mh=-", "2 3,4 v=10,11 h=2,3 m=2 mh=0",
                                      "2 5,6 v=- h=4,5 m=- mh=1"]
    # the loaded node's device KV is the KV of its positions 3,4 in the full prefix 1,2,3,4
    assert cache.pools.device_kv.read(node.value) == kv_fingerprints([1, 2, 3, 4], start=2)
    assert cache.pools.device_kv.read(top.value) == kv_fingerprints([1, 2])
    assert cache.pools.host_kv.read(node.host_value) == kv_fingerprints([1, 2, 3, 4], start=2)
    assert cache.pools.device_mamba.read(node.mamba_value) == [mamba_fingerprint([1, 2, 3, 4])]
    # what the request sees as its prefix is exactly what it would have computed itself
    assert cache.pools.device_kv.read(req.kv[:4]) == kv_fingerprints([1, 2, 3, 4])
    assert_every_slot_holds_its_prefix(cache)

    drv.finish(rid)
    cache.check_hicache_events()
    assert tree_slot_lines(cache) == ["1 1,2 v=8,9 h=0,1 m=- mh=-", "2 3,4 v=10,11 h=2,3 m=2 mh=0",
                                      "3 9 v=12 h=6 m=3 mh=2", "2 5,6 v=- h=4,5 m=- mh=1"]
    assert cache.pools.host_kv.read([6]) == kv_fingerprints([1, 2, 3, 4, 9], start=4)
    assert cache.pools.host_mamba.read([2]) == [mamba_fingerprint([1, 2, 3, 4, 9])]
    assert_every_slot_holds_its_prefix(cache)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "3 9 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "2 5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_write_back_demotion_and_load_back_keep_the_data():
    cache = make_cache("write_back", load_back_threshold=1)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4]))
    drv.finish(drv.start([1, 2, 5, 6]))

    assert cache.evict(100) == (6, 2)  # each leaf written back, then demoted; 1,2 last
    assert tree_slot_lines(cache) == ["1 1,2 v=- h=4,5 m=- mh=-", "2 3,4 v=- h=0,1 m=- mh=0",
                                      "2 5,6 v=- h=2,3 m=- mh=1"]
    assert_every_slot_holds_its_prefix(cache)

    rid = drv.start([1, 2, 5, 6, 7])
    node = node_at(cache, [1, 2], [5, 6])
    assert drv.live[rid].kv[:4] == [8, 9, 10, 11]
    assert tree_slot_lines(cache) == ["1 1,2 v=8,9 h=4,5 m=- mh=-", "2 3,4 v=- h=0,1 m=- mh=0",
                                      "2 5,6 v=10,11 h=2,3 m=2 mh=1"]
    assert cache.pools.device_kv.read(node.value) == kv_fingerprints([1, 2, 5, 6], start=2)
    assert cache.pools.device_mamba.read(node.mamba_value) == [mamba_fingerprint([1, 2, 5, 6])]
    drv.finish(rid)
    assert_every_slot_holds_its_prefix(cache)


def test_the_content_check_tells_prefixes_apart():
    # the same tokens 3,4 after different prefixes hold different KV, so a wrong slot cannot pass by luck
    assert kv_fingerprints([1, 2, 3, 4], start=2) != kv_fingerprints([9, 2, 3, 4], start=2)
    assert mamba_fingerprint([1, 2]) != mamba_fingerprint([2, 1])
    cache = make_cache("write_through")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    node = node_at(cache, [1, 2])
    cache.pools.device_kv.write(node.value[1:], [0])
    assert contents(cache)["1,2"]["got"]["device"] != contents(cache)["1,2"]["want"]["device"]
