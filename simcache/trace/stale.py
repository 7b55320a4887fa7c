"""Holders and staleness: which simulated calls on the stack still mean to use a node, who holds a node now, and
the went-stale and re-admitted events a detach or a re-entry makes (a mixin of ``Ledger``)."""
from __future__ import annotations

from ..keys import format_key
from ..node import TreeNode
from ..state import holders_of, is_attached
from .records import StaleEvent

# entry points of eviction: a call frame outside the innermost of these that holds a node will resume using it
EVICTION_ENTRIES = frozenset({"evict", "evict_host", "evict_mamba", "evict_mamba_host"})
# calls that delete the node they are given (holding it is not using it)
DELETERS = frozenset({"_evict_regular", "_evict_host_leaf", "_delete_tombstone_leaf",
                      "_iteratively_delete_tombstone_leaf", "_cleanup_stale_node",
                      # the unified cache's (simcache.unified)
                      "_remove_leaf_from_parent", "drop_subtree_no_host"})


class StaleTracking:
    """Went-stale and re-admitted detection over the recorder's frames, known and detached nodes."""

    def frame_holders(self) -> dict[int, tuple[str, ...]]:
        """node id -> the calls on the stack that hold it to use it (not the code deleting it)."""
        out: dict[int, tuple[str, ...]] = {}
        for _, nodes in self._frames:
            for n in nodes:
                if n.id not in out:
                    out[n.id] = tuple(x for x in self._user_frames(n) if not x.startswith("_insert_helper's"))
        return {k: v for k, v in out.items() if v}

    def _user_frames(self, node: TreeNode) -> list[str]:
        """Simulated calls on the stack that hold ``node`` to *use* it, as opposed to the code deleting it: every
        frame taking it as an argument, except a deleter's, and except a caller whose very next call deletes it."""
        frames, out = self._frames, []
        for i, (f, ns) in enumerate(frames):
            if not any(n is node for n in ns) or f in DELETERS:
                continue
            nxt = frames[i + 1] if i + 1 < len(frames) else None
            if nxt is not None and nxt[0] in DELETERS and any(n is node for n in nxt[1]):
                continue
            entry = next((g for g, _ in frames[i + 1 :] if g in EVICTION_ENTRIES), None)
            out.append(f"{f}()" + (f" (resumes after {entry})" if entry else ""))
        if self._current is node and any(f == "_insert_helper" for f, _ in frames):
            out.append("_insert_helper's loop node")
        return out

    def outer_frame_ids(self) -> frozenset[int]:
        """Detached nodes that a call on the stack still means to use (see ``_user_frames``)."""
        held = {n.id: n for _, ns in self._frames for n in ns if n.id in self._detached}
        if self._current is not None and self._current.id in self._detached:
            held[self._current.id] = self._current
        return frozenset(nid for nid, n in held.items() if self._user_frames(n))

    def holders_of(self, node: TreeNode) -> list[str]:
        """Who holds ``node`` now: the structures (the ledger, ``state.holders_of``) and the calls that will
        resume using it (``_user_frames``)."""
        return holders_of(self.cache, node) + self._user_frames(node)

    def _after_detach(self, data: dict) -> None:
        node, popped = data["node"], data["popped"]
        if popped is not node:
            return  # the slot no longer held it: SGLang's assertion fires next
        gone, stack = [], [node]
        while stack:  # the detached node and its subtree
            n = stack.pop()
            if not is_attached(self.cache, n):
                gone.append(n)
                stack.extend(c for c in n.children.values() if c.parent is n)
        cause = " <- ".join(reversed(self._stack)) or "driver"
        for n in gone:
            if n.id not in self._detached:
                self._detached.add(n.id)
                self._detached_log.append(n.id)
            if n.id not in self._known:
                self._know(n)
            holders = self.holders_of(n)
            if holders:
                self.went_stale.append(StaleEvent(len(self._log), n.id, format_key(n.key), tuple(holders),
                                                  f"detached by {cause}"))

    def _check_readmission(self, node, holder: str) -> None:
        if node is None or node is self.cache.root_node or node.id not in self._detached:
            return
        if not is_attached(self.cache, node):
            self.readmitted.append(StaleEvent(len(self._log) - 1, node.id, format_key(node.key), (holder,),
                                              f"detached node re-admitted to {holder}"))
