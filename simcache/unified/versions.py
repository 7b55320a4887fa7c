"""The unified family's presets: releases of SGLang's ``UnifiedRadixCache``, as flags checked where each changed.

| preset | release | what changed that our operations reach |
|---|---|---|
| ``unified_0_5_16`` | sglang 0.5.16 (2026-07-25) | host KV of a prefetch reserved when its L3 hit count arrives |
| ``unified_0_5_17`` | sglang 0.5.17 (2026-08-08) | #31902 drops a refill under an un-backed-up node (write-through) |

0.5.17 also discards a prefetch whose Mamba state did not fully arrive (all or nothing), drops a write-back leaf
whose backup fails together with its host-only subtree, ends its Mamba eviction walk at the MRU end, and (with the
Mamba extra buffer) frees a finished request's KV past its track point after the insert instead of before it.

``git grep drop_refill_under_unbacked`` shows where #31902 touches the model. Both presets run under either write
policy (the scenario's ``policy``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ..errors import ConfigError


@dataclass(frozen=True)
class UnifiedFlags:
    # _insert_helper_host / insert_host: under write-through, drop a prefetched host refill whose walk ends under a
    # node that is not backed up (#31902)
    drop_refill_under_unbacked: bool = False
    # check_prefetch_progress: a prefetch with a Mamba transfer is kept only if every page and the state arrived
    # (0.5.17's _sync_and_check_hybrid_prefetch_result); else all of it is released
    prefetch_all_or_nothing: bool = False
    # _evict_components: under write-back, a D-leaf whose backup fails is dropped with its host-only subtree
    # (drop_subtree_no_host) instead of staying on device; the Mamba walk ends when its cursor runs off the MRU end
    # (0.5.16's restarts at the LRU end, and loops forever on a leaf whose backup keeps failing)
    evict_walk_0_5_17: bool = False
    # Full's host lock: under write-back it pins a node without host KV too (a device-only prefetch anchor)
    write_back_pins_device_only: bool = False
    # nodes live in an arena by id: unlinking a node unregisters it, and the controller's later calls with its id
    # (a lock release, a prefetch's host insert) raise KeyError in node_by_id; the controller calls the tree
    # core's lock methods of the same name, and its event check drains the storage queues with counts it took
    # before the write and load checks
    tree_core_api: bool = False
    # the tree core is built and then reset: its nodes (root, LRU sentinels) are made twice, which shifts node ids
    # and the access clock
    tree_core_resets_twice: bool = False
    # cache_finished_req: the KV past the Mamba track point (extra buffer, page size > 1) is freed after the insert,
    # with the unaligned tail, not before it (0.5.17 batches the two frees; the insert's duplicates go first)
    tail_free_after_insert: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


FLAG_NAMES = tuple(f.name for f in fields(UnifiedFlags))
PRESETS: dict[str, UnifiedFlags] = {
    "unified_0_5_16": UnifiedFlags(),
    "unified_0_5_17": UnifiedFlags(drop_refill_under_unbacked=True, prefetch_all_or_nothing=True,
                                   evict_walk_0_5_17=True, write_back_pins_device_only=True,
                                   tree_core_api=True, tree_core_resets_twice=True, tail_free_after_insert=True),
}
RELEASE_OF = {"unified_0_5_16": "0.5.16", "unified_0_5_17": "0.5.17"}  # the wheel each preset models


def preset(name: str) -> UnifiedFlags:
    if name not in PRESETS:
        raise ConfigError(f"unknown unified preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]
