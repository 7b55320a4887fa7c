"""A live cache for the notebooks (1 and 2): ``Lab()`` is a small cache with its scheduler-side driver.

``lab.do("request 1 2 3")`` applies scheduler operations (the scenario vocabulary: ``request``, ``start``,
``finish``, ``evict``, ``evict_host``, ``events`` ...) and returns a *view*: the tree drawn by Graphviz, with the
nodes the operations created or changed marked, beside the canonical tree text. ``lab.calls()`` lists the simulated
calls the last operation made, nested as they ran; ``lab.node``, ``lab.lru``, ``lab.leaves`` and ``lab.free`` are the
small facts the notebooks' check cells assert.
"""
from __future__ import annotations

from html import escape

from .cache import HiMambaRadixCache
from .config import CacheConfig
from .driver import Driver
from .errors import ArgumentError, shown
from .operations import check_op
from .render.display import CSS, HTML, Text
from .render.display import columns as _columns
from .render.dot import legend_dot, render_svg, snapshot_to_dot
from .render.panels import holders_panel, lru_panel, pools_panel, sets_panel
from .scenario import parse_op
from .snapshot import take
from .state import dfs, tree_text
from .trace import Recorder
from .versions import preset as preset_flags


class Lab:
    """A small cache and its driver; ``Lab(device_kv=12)`` (any ``CacheConfig`` field), ``Lab(host=False)`` for a
    device-only cache (nothing is ever copied to the host tier)."""

    def __init__(self, preset: str = "pre_fix", *, host: bool = True, legend: bool = False, **config) -> None:
        from dataclasses import fields

        from . import args

        args.flag(host, "host")
        args.flag(legend, "legend")
        known = [f.name for f in fields(CacheConfig) if f.name != "flags"]
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise ArgumentError(f"Lab takes a preset and CacheConfig fields; unknown: {', '.join(unknown[:5])}; "
                                f"known: {', '.join(known)}")
        if not host:
            config.setdefault("policy", "write_through_selective")
            config.setdefault("write_through_threshold", 1 << 20)  # never hit often enough to be written through
        self.config = CacheConfig(flags=preset_flags(preset), **config)
        self.cache = HiMambaRadixCache(self.config)
        self.driver = Driver(self.cache)
        self.recorder = Recorder(snapshots=False, invariants=False).attach(self.cache, self.driver)
        self.hide_host, self.legend = not host, legend
        self.statuses: list[str] = []
        self._before = self.snapshot()
        self._last = "empty cache"

    # --- acting ---
    def _begin(self, op: dict) -> None:
        self._before = self.snapshot()
        self.recorder.begin_op(len(self.recorder.ops), op)

    def do(self, *ops: str) -> HTML:
        """Apply each operation (``"request 1 2 3"``, ``"evict 2"``, ``"events"`` ...) and show the tree after them."""
        before = self.snapshot()
        for text in ops:
            op = parse_op(text, "Lab.do")
            check_op(op, len(self.statuses), self.cache.page_size)  # a malformed op is refused before it begins
            self._begin(op)
            status = self.driver.step(op, len(self.statuses), crashes=False)  # a crash goes up, as a traceback
            self.statuses.append(status)
            self.recorder.end_op(len(self.recorder.ops) - 1, status)
        self._before, self._last = before, " ; ".join(ops)
        return self.view()

    def match(self, *tokens: int):
        """``cache.match_prefix(tokens)`` (a split, if any, stays in the tree); returns SGLang's ``MatchResult``."""
        from .operations import request_problem

        problem = request_problem({"tokens": list(tokens)})
        if problem:
            raise ArgumentError(f"Lab.match: {problem}")
        self._begin({"op": "match", "tokens": list(tokens)})
        result = self.cache.match_prefix(list(tokens))
        self.recorder.end_op(len(self.recorder.ops) - 1, ".")
        self._last = f"match_prefix {list(tokens)}"
        return result

    # --- looking ---
    def snapshot(self):
        return take(self.cache, list(self.driver.live.values()))

    def view(self) -> HTML:
        """The tree now (nodes created or changed by the last call marked gold), beside its canonical text."""
        dot = snapshot_to_dot(self.snapshot(), self._before, hide_host=self.hide_host,
                              page_size=self.config.page_size, legend=self.legend)
        text = f"<pre style='font-size:13px'>{escape(self.tree())}</pre>"
        head = f"<b>after: {escape(self._last)}</b>"
        return HTML(CSS + head + _columns(f'<div class="sc-tree">{render_svg(dot)}</div>', text))

    def legend_view(self) -> HTML:
        return HTML(CSS + f'<div class="sc-tree" style="max-width:420px">{render_svg(legend_dot(self.hide_host))}'
                          f"</div>")

    def tree(self) -> Text:
        """The canonical tree text (``simcache.tree_text``): one line a node, ``depth key v h m mh fl ml hr hmr``."""
        return Text(tree_text(self.cache))

    def panels(self, *names: str) -> HTML:
        """Panels of the current state: any of ``lru``, ``sets``, ``pools``, ``holders`` (default: lru and sets)."""
        makers = dict(lru=lru_panel, sets=sets_panel, pools=pools_panel, holders=holders_panel)
        for n in names:
            if not isinstance(n, str) or n not in makers:
                raise ArgumentError(f"Lab.panels takes panel names from {', '.join(makers)}, not {shown(n, 40)}")
        snap = self.snapshot()
        return HTML(CSS + "".join(makers[n](snap) for n in names or ("lru", "sets")))

    def calls(self) -> Text:
        """The simulated calls the last operation made, indented by nesting depth."""
        first = self.recorder.ops[-1].first_step if self.recorder.ops else 0
        steps = [s for s in self.recorder.steps[first:] if s.kind == "call"]
        return Text("\n".join("  " * (len(s.stack) - 1) + s.text for s in steps) or "(no calls)")

    def stack_of(self, function: str) -> tuple[str, ...] | None:
        """The call stack (outermost first) when the last operation first entered ``function``; None if it did not."""
        first = self.recorder.ops[-1].first_step if self.recorder.ops else 0
        return next((s.stack for s in self.recorder.steps[first:] if s.kind == "call"
                     and s.stack[-1] == function), None)

    # --- small facts for the check cells ---
    def node(self, *path: int):
        """The attached node whose path from the root spells ``path`` exactly (None if there is none)."""
        paths = {id(self.cache.root_node): ()}
        for _, n in dfs(self.cache):  # preorder: a parent's path is known before its children's
            paths[id(n)] = paths[id(n.parent)] + tuple(n.key)
            if paths[id(n)] == tuple(path):
                return n
        return None

    def lru(self, name: str = "full") -> list[tuple[int, ...]]:
        """Keys in LRU list ``full``, ``mamba`` or ``host_mamba``, most recently used first."""
        lists = dict(full=self.cache.full_lru_list, mamba=self.cache.mamba_lru_list,
                     host_mamba=self.cache.mamba_host_lru_list)
        if not isinstance(name, str) or name not in lists:
            raise ArgumentError(f"Lab.lru takes one of {', '.join(lists)}, not {shown(name, 40)}")
        lst = lists[name]
        return [tuple(n.key) for n in lst.mru_to_lru()]

    def leaves(self, tier: str = "device") -> list[tuple[int, ...]]:
        """Sorted keys in ``evictable_full_device_leaves`` (``device``) or ``evictable_full_host_leaves`` (``host``)."""
        if tier not in ("device", "host"):
            raise ArgumentError(f"Lab.leaves takes device or host, not {shown(tier, 40)}")
        s = self.cache.evictable_full_device_leaves if tier == "device" else self.cache.evictable_full_host_leaves
        return sorted(tuple(n.key) for n in s)

    def free(self, pool: str = "device_kv") -> int:
        """Free slots in a pool: ``device_kv``, ``device_mamba``, ``host_kv``, ``host_mamba``."""
        pools = self.cache.pools.all()
        if not isinstance(pool, str) or pool not in pools:
            raise ArgumentError(f"Lab.free takes one of {', '.join(pools)}, not {shown(pool, 40)}")
        return pools[pool].available_size()
