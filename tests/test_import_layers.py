"""The package's import layering, read from the source (``tools/import_graph.py``; nothing is imported).

core (the simulated cache) <- simulation (driver, scenarios, traces) <- explore, views <- cli. A lazy import inside
a function counts: it is still a dependency. The checks below fail on the first back-edge someone adds.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools" / "import_graph.py")
import_graph = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = import_graph
_spec.loader.exec_module(import_graph)

GRAPH = import_graph.build(ROOT / "simcache")
CORE = {f"simcache.{m}" for m in ("cache", "tree", "lru", "evict_host", "evict_device", "hicache", "storage",
                                   "prefetch", "controller", "pools", "pool_copy", "slot_arrays", "fingerprints",
                                   "node", "requests", "versions", "config", "errors")}
CORE_HELPERS = {f"simcache.{m}" for m in ("keys", "trace_hooks", "streams")}  # leaves the core builds on
ABOVE = ("simcache.explore", "simcache.render", "simcache.cli", "simcache.teach", "simcache.lab", "simcache.export",
         "simcache.player", "simcache.game", "simcache.workload", "simcache.simulate", "simcache.trace",
         "simcache.driver", "simcache.scenario", "simcache.ops_run")


def test_the_graph_reads_every_module_and_resolves_relative_imports():
    assert CORE <= set(GRAPH) and "simcache.explore.search" in GRAPH
    assert GRAPH["simcache.errors"] == set()
    assert GRAPH["simcache.node"] == {"simcache.keys"}
    assert "simcache.explore.workers" in GRAPH["simcache.explore.search"]  # ``from . import workers``
    assert "simcache.pool" in GRAPH["simcache.explore.workers"]  # ``from ..pool import ...``
    assert "simcache.cli" not in GRAPH["simcache.workload"]  # under ``if __name__ == "__main__":`` only


def test_the_core_imports_nothing_above_it():
    assert import_graph.imports_above(GRAPH, CORE, ABOVE) == []
    for module in sorted(CORE):
        assert GRAPH[module] <= CORE | CORE_HELPERS, module
    for module in sorted(CORE_HELPERS):
        assert GRAPH[module] <= CORE_HELPERS | {"simcache.errors"}, module


# back-edges still to remove, each with who removes it; the set may only shrink
KNOWN_BACK_EDGES = {
    ("simcache.workload", "simcache.explore.machine"): "signature(); issue #11 part A puts it beside Crash",
    ("simcache.trace.recorder", "simcache.explore.fastcopy"): "the checkpoints copy the cache with fast_copy",
    ("simcache.trace.replay", "simcache.explore.fastcopy"): "a replay starts from a fast_copy of a checkpoint",
}


def test_the_simulation_layer_imports_no_view_no_cli_and_only_known_explorer_helpers():
    simulation = {"simcache.driver", "simcache.scenario", "simcache.ops_run", "simcache.simulate",
                  "simcache.workload", "simcache.pool", "simcache.progress"} | {
        m for m in GRAPH if m == "simcache.trace" or m.startswith("simcache.trace.")}
    assert {"simcache.trace", "simcache.trace.recorder", "simcache.trace.replay"} <= simulation
    found = import_graph.imports_above(GRAPH, simulation, ("simcache.explore", "simcache.render", "simcache.cli",
                                                           "simcache.teach", "simcache.lab", "simcache.export",
                                                           "simcache.player", "simcache.game"))
    assert set(found) <= set(KNOWN_BACK_EDGES)


def test_views_never_import_the_explorer_or_the_cli():
    views = {m for m in GRAPH if m.startswith("simcache.render")} | {
        "simcache.player", "simcache.player_model", "simcache.game", "simcache.game_widgets", "simcache.export",
        "simcache.export_data", "simcache.lab", "simcache.stale_gif", "simcache.storyboard"}
    assert import_graph.imports_above(GRAPH, views, ("simcache.explore", "simcache.cli", "simcache.teach")) == []


def test_there_is_no_import_cycle():
    """The cli -> explore -> artefacts -> cli cycle (the transcript, the numbers), the ops_run <-> trace one (the
    replayer's step) and game <-> game_map (the level table now lives in game_levels, which both read) are gone."""
    assert import_graph.cycles(GRAPH) == []


def test_the_report_names_layers_cycles_and_the_longest_chain():
    text = import_graph.report({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": set(), "p.d": {"p.e"}, "p.e": {"p.d"}})
    assert text.splitlines() == [
        "5 modules, 4 imports, 3 layers",
        "layer 0: p.c, p.d, p.e",
        "layer 1: p.b",
        "layer 2: p.a",
        "cycles: 1",
        "  p.d <-> p.e",
        "longest import chain (3 modules): p.a -> p.b -> p.c",
    ]
