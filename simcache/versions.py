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

Between 4a50cd78 and 7f67965b only #26945 and #27391 change what our operations can see; the rest of that range
(load-back anchor, prefetch terminate policy, timeout defaults, TP all-reduces, KV events, allocator refactors) is
unreachable with one TP rank, no sidecar pools and events off, so it has no flag. One change is not modelled:
with the Mamba extra buffer (page size > 1), #24954 makes ``cache_unfinished_req`` hand the request's ping-pong slot
to the tree and give the request a fresh one, instead of forking a copy (other slot ids, same states). No operation
calls ``cache_unfinished_req``; simcache's keeps the fork under every preset.
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
REAL_PRESETS = ("pre_fix", "merged_fix", "followup_fix", "main_2026_06")
PRESET_DESCRIPTIONS = {
    "pre_fix": "the code before the fix (SGLang main e9d6b9eb)",
    "described_fix": "the fix as the PR text describes it: no-children predicate + stale guards + cleanup",
    "reviewed_fix": "described_fix + the review: guard before the asserts, unconditional LRU removal",
    "merged_fix": "what #22592 merged: the host-leaf predicate alone (SGLang main 14e122cd)",
    "followup_fix": "merged_fix + #23696: cascade respects host refs, chunked forwarded (SGLang main 4a50cd78)",
    "main_2026_06": "followup_fix + #26945 prefetch truncated to free host KV + #27391 KV-only host_hit_length "
                    "(SGLang main 7f67965b, 2026-06-22)",
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
