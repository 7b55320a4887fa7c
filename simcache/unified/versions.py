"""The unified family's presets: releases of SGLang's ``UnifiedRadixCache``, as flags checked where each changed.

| preset | release | what changed that our operations reach |
|---|---|---|
| ``unified_0_5_16`` | sglang 0.5.16 (2026-07-25) | host KV of a prefetch reserved when its L3 hit count arrives |
| ``unified_0_5_17`` | sglang 0.5.17 (2026-08-08) | #31902 drops a refill under an un-backed-up node (write-through) |

0.5.17 also discards a prefetch whose Mamba state did not fully arrive (all or nothing).

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

    def as_dict(self) -> dict:
        return asdict(self)


FLAG_NAMES = tuple(f.name for f in fields(UnifiedFlags))
PRESETS: dict[str, UnifiedFlags] = {
    "unified_0_5_16": UnifiedFlags(),
    "unified_0_5_17": UnifiedFlags(drop_refill_under_unbacked=True, prefetch_all_or_nothing=True),
}
RELEASE_OF = {"unified_0_5_16": "0.5.16", "unified_0_5_17": "0.5.17"}  # the wheel each preset models


def preset(name: str) -> UnifiedFlags:
    if name not in PRESETS:
        raise ConfigError(f"unknown unified preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]
