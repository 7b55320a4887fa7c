"""Invariants of the cache: the named checks (``named``: each ``cache, live -> problem text or None``, run by
``check_all``), the one-pass answer to which of them fail (``one_pass.failing``), and the recorder's incremental
check at operation boundaries (``boundary.BoundaryCheck`` over ``boundary_state`` and ``tracked.TrackedNode``).
The list of invariants and what each checks is in ``named``'s docstring.
"""
# ruff: noqa: F401 -- every name the single module ``invariants.py`` held, importable as before
from __future__ import annotations

from ..fingerprints import kv_fingerprints, mamba_fingerprint
from ..node import TreeNode
from ..state import attached_ids, held_by, holder_map, referenced_slots
from .boundary import BoundaryCheck, _other_refs
from .named import (
    BOUNDARY_ONLY,
    INVARIANTS,
    _diff,
    _name,
    _tree,
    attachment,
    backup_continuity,
    check_all,
    check_invariants,
    kv_content,
    leaf_sets,
    lru_membership,
    no_double_free,
    no_leak,
    size_counters,
    tier_monotonicity,
)
from .one_pass import _H0, _M, _attached_nodes, _data_differs, failing
from .tracked import _HOSTED, _MOVED, _POOL_NAMES, _REKIDS, _STRUCTURE, _TOUCHED, _UNTRACKED, _VALUED, TrackedNode

__all__ = ["BOUNDARY_ONLY", "INVARIANTS", "BoundaryCheck", "TrackedNode", "check_all", "check_invariants", "failing",
           "attachment",
           "tier_monotonicity", "backup_continuity", "leaf_sets", "lru_membership", "size_counters", "no_double_free",
           "no_leak", "kv_content"]
