"""The versions of the fix, as flags checked exactly where each real change touched the code.

``git grep <flag name>`` shows every place a fix touches. Presets (shared/design/sglang_reference.md):

| preset | what it is | real code |
|---|---|---|
| ``pre_fix`` | main before the fix | SGLang e9d6b9eb |
| ``described_fix`` | the PR text: no-children predicate + fresh-parent-link guards + stale cleanup | never merged |
| ``reviewed_fix`` | ``described_fix`` + the review (guard first, unconditional LRU removal) | never merged |
| ``merged_fix`` | what #22592 merged: the predicate change alone | SGLang 14e122cd |
| ``followup_fix`` | ``merged_fix`` + #23696 (cascade stops at host refs; ``chunked`` forwarded) | SGLang 4a50cd78 |
| ``main_2026_06`` | ``followup_fix`` + #26945 (truncated prefetch) + #27391 (KV-only host hit) | SGLang 7f67965b |
| ``release_0_5_17`` | ``main_2026_06`` + the three changes of 0.5.17 listed below | release 0.5.17 |

``REAL_VERSIONS`` says which real code each of these models, and where its files come from.

Between 4a50cd78 and 7f67965b only #26945 and #27391 change what our operations can see; the rest of that range
(load-back anchor, prefetch terminate policy, timeout defaults, TP all-reduces, KV events, allocator refactors) is
unreachable with one TP rank, no sidecar pools and events off, so it has no flag. One change is not modelled:
with the Mamba extra buffer (page size > 1), #24954 makes ``cache_unfinished_req`` hand the request's ping-pong slot
to the tree and give the request a fresh one, instead of forking a copy (other slot ids, same states). No operation
calls ``cache_unfinished_req``; simcache's keeps the fork under every preset.

From 7f67965b to release 0.5.17 three changes reach our operations, one flag each (docs/releases.md has the
evidence): a prefetch's host KV is reserved when its L3 hit count arrives, not when it is issued; a prefetch that
ends before that is revoked; a device split leaves the Mamba LRU alone. The rest has no behaviour here:
``cache_finished_req`` takes ``kv_len_to_handle=`` (the driver hands the request's whole length either way), the
scheduler's ``flush_write_through_acks`` hook is gone (no operation called it), acks are read by attribute, frees go
through ``free_segment``, hashing moved to a native extension, and ``prefetch_capacity_limit`` became half the host
pool (never binding: one prefetch is in flight at a time). The stale-node code and both fixes are identical to
7f67965b. By 7f67965b SGLang's default factory no longer built this class for hybrid Mamba with HiCache
(``UnifiedRadixCache`` has been the default since 5e0271536, #27759, 2026-06-11); in 0.5.17 it is dead code that
still ships.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from .errors import ConfigError, shown

HOST_LEAF_PREDICATES = ("loop_old", "no_children")
PARENT_CHECKS = ("none", "all", "write_through_only")


@dataclass(frozen=True)
class Flags:
    # _update_full_host_leaf_status: "loop_old" ignores children that are not (evicted and backed up);
    # "no_children" (#22592) admits only childless nodes.
    host_leaf_predicate: str = "loop_old"
    # _has_fresh_parent_link + _cleanup_stale_node in _evict_regular, _evict_host_leaf, _delete_tombstone_leaf.
    stale_guards: bool = False
    # the guard runs before the entry assertions instead of just before the frees.
    guard_before_asserts: bool = False
    # _cleanup_stale_node removes from every LRU list it is in, without the tombstone gates.
    unconditional_lru_cleanup: bool = False
    # _iteratively_delete_tombstone_leaf stops at a parent with host refs (#23696).
    cascade_respects_host_refs: bool = False
    # cache_unfinished_req forwards ``chunked`` to insert (#23696).
    forward_chunked: bool = False
    # write_backup's "parent must be backed up" check: never, always, or only when not writing back (#22185).
    write_backup_parent_check: str = "write_through_only"
    # prefetch_from_storage: when host KV cannot be allocated even after evict_host, cut the prefetch down to the
    # page-aligned free host KV and issue it if that is at least prefetch_threshold, instead of declining (#26945).
    prefetch_truncates_to_free_host: bool = False
    # match_prefix: host_hit_length counts only the KV host hit; a Mamba-only host hit goes to its own field,
    # mamba_host_hit_length, instead of counting as one token of host_hit_length (#27391).
    host_hit_counts_kv_only: bool = False
    # prefetch_from_storage reserves no host KV; the drain's new step (_drain_and_alloc_storage_hit) reserves it when
    # the L3 hit count arrives, calling evict_host on shortage, then truncating or revoking (release 0.5.17).
    prefetch_reserves_host_at_hit: bool = False
    # check_prefetch_progress: a prefetch that may end before its host KV was reserved is terminated and revoked
    # (anchor released, Mamba slot freed) instead of being kept in flight (release 0.5.17).
    prefetch_terminate_revokes_unreserved: bool = False
    # MambaRadixCache._split_node leaves the child's place in the Mamba LRU alone instead of moving it to the
    # most recently used end (release 0.5.17).
    split_keeps_child_mamba_lru: bool = False

    def __post_init__(self) -> None:
        if self.host_leaf_predicate not in HOST_LEAF_PREDICATES:
            raise ConfigError(f"host_leaf_predicate must be one of {', '.join(HOST_LEAF_PREDICATES)}, "
                              f"not {shown(self.host_leaf_predicate)}")
        if self.write_backup_parent_check not in PARENT_CHECKS:
            raise ConfigError(f"write_backup_parent_check must be one of {', '.join(PARENT_CHECKS)}, "
                              f"not {shown(self.write_backup_parent_check)}")
        for f in fields(self):
            if f.type == "bool" and not isinstance(getattr(self, f.name), bool):
                raise ConfigError(f"flag {f.name} must be true or false, not {shown(getattr(self, f.name))}")

    def as_dict(self) -> dict:
        return asdict(self)

    def with_(self, **changes) -> Flags:
        unknown = sorted(set(changes) - set(FLAG_NAMES))
        if unknown:
            unknown = [u if len(u) <= 40 else f"{u[:40]}..." for u in unknown[:5]]
            raise ConfigError(f"unknown flag(s) {', '.join(unknown)}; known flags: {', '.join(FLAG_NAMES)}")
        return replace(self, **changes)


FLAG_NAMES = tuple(f.name for f in fields(Flags))

_MERGED = Flags(host_leaf_predicate="no_children")
_DESCRIBED = Flags(host_leaf_predicate="no_children", stale_guards=True)
_FOLLOWUP = replace(_MERGED, cascade_respects_host_refs=True, forward_chunked=True)
PRESETS: dict[str, Flags] = {
    "pre_fix": Flags(),
    "described_fix": _DESCRIBED,
    "reviewed_fix": replace(_DESCRIBED, guard_before_asserts=True, unconditional_lru_cleanup=True),
    "merged_fix": _MERGED,
    "followup_fix": _FOLLOWUP,
    "main_2026_06": replace(_FOLLOWUP, prefetch_truncates_to_free_host=True, host_hit_counts_kv_only=True),
}
PRESETS["release_0_5_17"] = replace(PRESETS["main_2026_06"], prefetch_reserves_host_at_hit=True,
                                    prefetch_terminate_revokes_unreserved=True, split_keeps_child_mamba_lru=True)


@dataclass(frozen=True)
class RealVersion:
    """The real code a preset models: a commit of the SGLang main mirror or a release on the package registry."""

    preset: str
    source: str  # "mirror": a commit of ziruiliu/sglang_exp (SGLang main's history); "wheel": pypi.org's sglang
    ref: str  # the full commit id, or the release's version
    files: str  # where the cache files are, inside that commit or that wheel


_MIRROR_FILES = "python/sglang/srt/mem_cache/ (hi_mamba_radix_cache.py and its base classes)"
# version or commit -> what models it. A release is named by its version; a commit by its full id.
REAL_VERSIONS: dict[str, RealVersion] = {v.ref: v for v in (
    RealVersion("pre_fix", "mirror", "e9d6b9eb2d676f245863609ea611bee78ab5ce70", _MIRROR_FILES),
    RealVersion("merged_fix", "mirror", "14e122cdee7142ecd52e455d21be08403ed32c2a", _MIRROR_FILES),
    RealVersion("followup_fix", "mirror", "4a50cd781e16c793c2377600aa1745f82fbed51c", _MIRROR_FILES),
    RealVersion("main_2026_06", "mirror", "7f67965b4dbbbedbce470af5ead78ff0af0f00da", _MIRROR_FILES),
    RealVersion("release_0_5_17", "wheel", "0.5.17",
                "sglang/srt/mem_cache/ (hi_mamba_radix_cache.py and its base classes) in the wheel"),
)}
REAL_PRESETS = tuple(v.preset for v in REAL_VERSIONS.values())


def preset_for_real(version: str) -> str:
    """The preset that models a real version: ``"0.5.17"`` -> ``"release_0_5_17"``; a commit may be abbreviated to
    7 or more hex digits (``"7f67965b"`` -> ``"main_2026_06"``)."""
    if isinstance(version, str):
        if version in REAL_VERSIONS:
            return REAL_VERSIONS[version].preset
        hits = {v.preset for k, v in REAL_VERSIONS.items()
                if v.source == "mirror" and len(version) >= 7 and k.startswith(version.lower())}
        if len(hits) == 1:
            return hits.pop()
    said = repr(version) if len(repr(version)) <= 60 else f"{repr(version)[:60]}... ({len(repr(version)):,} characters)"
    raise ConfigError(f"no preset models SGLang {said}; known: "
                      f"{', '.join(v.ref if v.source == 'wheel' else v.ref[:9] for v in REAL_VERSIONS.values())}")
PRESET_DESCRIPTIONS = {
    "pre_fix": "the code before the fix (SGLang main e9d6b9eb)",
    "described_fix": "the fix as the PR text describes it: no-children predicate + stale guards + cleanup",
    "reviewed_fix": "described_fix + the review: guard before the asserts, unconditional LRU removal",
    "merged_fix": "what #22592 merged: the host-leaf predicate alone (SGLang main 14e122cd)",
    "followup_fix": "merged_fix + #23696: cascade respects host refs, chunked forwarded (SGLang main 4a50cd78)",
    "main_2026_06": "followup_fix + #26945 prefetch truncated to free host KV + #27391 KV-only host_hit_length "
                    "(SGLang main 7f67965b, 2026-06-22)",
    "release_0_5_17": "main_2026_06 + host KV reserved when the L3 hit count arrives + an unreserved prefetch revoked "
                      "when it ends + a split leaving the Mamba LRU alone (release 0.5.17)",
}


def preset(name: str) -> Flags:
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(f"unknown preset {shown(name)}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def parse_flag(text: str) -> tuple[str, object]:
    """``"stale_guards=true"`` -> ``("stale_guards", True)``; values are checked by ``Flags``."""
    if not isinstance(text, str):
        raise ConfigError(f"a flag is text like 'stale_guards=true', not {type(text).__name__}")
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or name not in FLAG_NAMES:
        said = repr(text) if len(repr(text)) <= 60 else f"{repr(text)[:60]}... ({len(repr(text)):,} characters)"
        raise ConfigError(f"--flag expects NAME=VALUE with NAME one of {', '.join(FLAG_NAMES)}; got {said}")
    raw = raw.strip()
    if raw.lower() in ("true", "1", "yes", "on"):
        return name, True if name not in ("host_leaf_predicate", "write_backup_parent_check") else raw
    if raw.lower() in ("false", "0", "no", "off"):
        return name, False if name not in ("host_leaf_predicate", "write_backup_parent_check") else raw
    return name, raw
