"""``TrackedNode``: a tree node that notes every field written, so the boundary check re-examines only what an
operation touched (the sets it notes them in are drained by ``BoundaryCheck.failing``)."""
from __future__ import annotations

from ..node import TreeNode

_UNTRACKED = frozenset({"hit_count", "last_access_time", "hash_value"})  # no invariant reads them
_STRUCTURE = frozenset({"parent", "key", "children"})
_TOUCHED: set = set()  # tracked nodes whose fields were written since the last boundary check drained them
_MOVED: set = set()  # ... whose parent, key or children were replaced
_REKIDS: set = set()  # ... whose children dict was replaced
_VALUED: set = set()  # ... whose device KV changed (their parents' checks read it)
_HOSTED: set = set()  # ... whose host KV changed (their children's checks read it)


class TrackedNode(TreeNode):
    """A ``TreeNode`` that notes every field written (the recorder switches the nodes it sees to this class, so a
    boundary check re-examines only what an operation touched). Same slots, same behaviour otherwise."""

    __slots__ = ()

    def __setattr__(self, name, value, _set=object.__setattr__):
        _set(self, name, value)
        if name in _STRUCTURE:
            _MOVED.add(self)
            if name == "children":
                _REKIDS.add(self)
        elif name not in _UNTRACKED:
            _TOUCHED.add(self)
            if name == "value":
                _VALUED.add(self)
            elif name == "host_value":
                _HOSTED.add(self)


_POOL_NAMES = ("device_kv", "host_kv", "device_mamba", "host_mamba")
