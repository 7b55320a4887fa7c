"""Mutation testing as a benchmark-style command (not in CI): how many small deliberate bugs the tests catch.

    python benchmarks/mutation.py [MODULE ...] [--out build/mutation.json] [--max-children 2]

For each module (default: every one in ``MODULES``) it copies the project into a temporary folder, writes a
``[mutmut]`` section that mutates only that module and runs only the tests that exercise it (the fast, targeted
selection in ``MODULES``: a full-suite run per mutant does not fit a shared 2-core machine), runs ``mutmut run``
under ``nice``, and reads every mutant's status back with ``mutmut results --all true``. It writes, per module,
the score (killed / (killed + survived); timeouts count as killed, as mutmut does) and the surviving mutants'
names and diffs, to ``--out`` (JSON) and as a table on stdout. Survivors are either killed by a new test or
listed in the README's benchmarks section with why they are equivalent.

mutmut 3 never mutates a decorated function, and every SGLang-named cache method is decorated with ``@simulated``.
So in the copy (never in the project) two things change, neither of which changes behaviour:
- ``undecorate``: each ``@simulated`` line goes, and ``name = simulated(name)`` follows the function instead (the
  same object ends up in the class: a decorator is that assignment), so mutmut sees a plain ``def``; the same for
  ``@fewer_collections()`` (the searches, the shrinker and the replay entry points);
- ``TRACE_HOOKS_SHIM``: mutmut runs a function's body in a renamed copy (``x<sep>Class<sep>name__mutmut_orig``, or
  ``..._N`` for mutant N) behind a trampoline whose code object every mutated function shares, while the names in
  ``raised_in`` and call stacks are found by code object. The shim registers the copies' code objects under the
  SGLang name when ``register`` is handed a trampoline, and never the shared trampoline code, so the names stay right
  (the trampoline's code counts as simulated only for ``cache._unwrap_simulated``, never in a frame walk). When
  ``trace_hooks.py`` itself is mutated no cache method is trampolined, and the copy gets no shim.
Before mutmut runs, the targeted tests run once on the transformed copy (``verify``); a module whose tests do not
pass there is reported, not mutated.

Targets (issue 19): >= 90% killed in simcache/ core modules, >= 80% in render/ and export.
"""
from __future__ import annotations

import argparse
import ast
import fnmatch
import importlib.util
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# module -> the tests that exercise it (targeted, so one mutant's run takes seconds)
CORE = ["tests/test_flags.py", "tests/test_eviction.py", "tests/test_followup_unit.py", "tests/test_tree.py",
        "tests/test_assertion_messages.py", "tests/test_mutant_kills.py", "tests/test_race_property.py",
        "tests/test_core_exact.py"]
# the stream emulation's tests, without the one-shot GPU script (40 s a run: it runs every other step again in
# subprocesses)
STREAM_TESTS = [f"tests/test_streams.py::test_{name}" for name in (
    "stream_work_waits_until_its_event_is_synchronized_and_reads_as_poison_until_then",
    "a_forced_stream_runs_everything_it_holds_and_a_wait_runs_the_other_stream_first",
    "eager_default_runs_the_model_at_once_and_its_wait_forces_the_side_stream",
    "a_dropped_index_tensor_serves_the_next_upload_on_its_stream_only",
    "a_backup_reaches_the_host_pool_only_when_its_copy_completes",
    "the_device_is_cpu_unless_asked_and_a_cpu_cache_has_no_streams_or_pinned_memory",
    "a_bad_device_is_one_sentence",
    "every_gallery_scenario_gives_the_same_outcome_trace_and_contents_under_the_emulation",
    "random_programs_give_the_same_report_and_contents_under_the_emulation",
    "every_ordering_probe_passes_plain_and_emulated",
    "the_emulation_really_defers_a_caches_copies_until_something_needs_them",
    "removing_any_one_synchronisation_makes_a_probe_fail",
    "gpu_check_runs_its_probes_and_programs_under_the_emulation")]
# invariants/: the one-pass and incremental checks are compared with the named ones over whole runs there (CORE
# adds minutes per surviving mutant and no check the two files lack)
INVARIANT_TESTS = ["tests/test_invariants.py", "tests/test_core_exact_invariants.py"]
# trace/: the recorder, the lazy steps and the hash writer (the scale tests without the browser one)
TRACE_TESTS = ["tests/test_trace.py", "tests/test_render.py", "tests/test_trace_fast_paths.py",
    "tests/test_trace_equivalence.py", "tests/test_core_exact_trace.py",
    # the one detach whose parent's slot held another node (worded by _w_detach)
    "tests/test_core_exact_cache.py::"
    "test_detach_pops_whatever_the_slot_holds_counts_it_and_reports_the_cut",
    *(f"tests/test_trace_scale.py::test_{name}" for name in (
        "run_builds_no_snapshot", "snapshots_rebuilt_in_any_order_equal_one_front_to_back_replay",
        "one_ledger_of_holders_agrees_with_itself_on_every_boundary",
        "a_run_over_the_memory_limit_stops_with_one_sentence",
        "trace_options_take_plain_bounded_numbers",
        "a_bad_memory_limit_in_the_environment_is_named",
        "ops_window_traces_only_those_operations", "progress_bar_on_request",
        "the_streamed_trace_hash_is_the_hash_of_the_whole_json_text",
        "run_ops_trace_rebuilds_each_operations_tree_instead_of_storing_it",
        "run_ops_trace_with_a_recorder_that_keeps_no_checkpoints_says_so",
        "the_hash_writer_spells_odd_entries_as_json_dumps_does"))]
MODULES = {
    "simcache/versions.py": ["tests/test_flags.py", "tests/test_parse_flag_table.py", "tests/test_race_property.py",
                             "tests/test_release_0_5_17.py"],
    "simcache/evict_host.py": CORE,
    "simcache/evict_device.py": CORE,
    "simcache/cache.py": [*CORE, "tests/test_core_exact_cache.py"],
    "simcache/tree.py": [*CORE, "tests/test_core_exact_tree.py", "tests/test_release_0_5_17.py"],
    "simcache/hicache.py": [*CORE, "tests/test_core_exact_hicache.py"],
    "simcache/requests.py": [*CORE, "tests/test_core_exact_requests.py"],
    "simcache/storage.py": [*CORE, "tests/test_main_2026_06.py", "tests/test_core_exact_storage.py"],
    "simcache/prefetch.py": [*CORE, "tests/test_main_2026_06.py", "tests/test_core_exact_storage.py",
                             "tests/test_release_0_5_17.py"],
    "simcache/lru.py": ["tests/test_lru.py", *CORE, "tests/test_core_exact_lru.py"],
    # pools.py: its own tests, the copies through the controller and the cache, and the stream emulation's tests
    "simcache/pools.py": ["tests/test_pools.py", "tests/test_core_exact_pools.py", "tests/test_data_integrity.py",
                          "tests/test_core_exact_controller.py", *STREAM_TESTS],
    # split out of pools.py, with its selection: the fingerprints, the slot index arrays, the copies between tiers
    **dict.fromkeys(("simcache/fingerprints.py", "simcache/slot_arrays.py", "simcache/pool_copy.py"), [
        "tests/test_pools.py", "tests/test_core_exact_pools.py", "tests/test_data_integrity.py",
        "tests/test_core_exact_controller.py", *STREAM_TESTS]),
    # keys.py's own exact tests, and test_tree.py's two that compare page_hashes / format_key with references
    "simcache/keys.py": ["tests/test_core_exact_keys.py",
                         "tests/test_tree.py::test_page_hashes_chain_each_page_from_the_previous_page_s_hash_string",
                         "tests/test_tree.py::test_format_key_spells_every_key_token_by_token"],
    "simcache/controller.py": ["tests/test_core_exact_controller.py", "tests/test_pools.py", "tests/test_streams.py",
                               *CORE],
    "simcache/invariants/named.py": INVARIANT_TESTS,
    "simcache/invariants/one_pass.py": INVARIANT_TESTS,
    "simcache/invariants/tracked.py": INVARIANT_TESTS,
    "simcache/invariants/boundary_state.py": INVARIANT_TESTS,
    "simcache/invariants/boundary_pools.py": INVARIANT_TESTS,
    "simcache/invariants/boundary.py": INVARIANT_TESTS,
    # (no test_static_views.py: its kernel imports the installed package, never the mutant)
    "simcache/state.py": ["tests/test_core_exact_state.py", "tests/test_invariants.py", *CORE],
    "simcache/driver.py": ["tests/test_operations.py", "tests/test_core_exact_driver.py", "tests/test_gallery.py",
                           "tests/test_reference_scenarios.py", *CORE,
                           "tests/test_core_exact_driver2.py"],
    # the shrinker: its exact tests first (fast), then the searches' and the brute-force minimality checks
    "simcache/explore/shrink.py": ["tests/test_core_exact_shrink.py", "tests/test_explore.py",
                                   "tests/test_minimality.py", "tests/test_shrink_schedule_pass.py"],
    "simcache/explore/shrink_passes.py": ["tests/test_core_exact_shrink.py", "tests/test_explore.py",
                                          "tests/test_minimality.py", "tests/test_shrink_schedule_pass.py"],
    "simcache/trace/records.py": TRACE_TESTS,
    "simcache/trace/wording.py": TRACE_TESTS,
    "simcache/trace/hash_writer.py": TRACE_TESTS,
    "simcache/trace/stale.py": TRACE_TESTS,
    "simcache/trace/memory.py": TRACE_TESTS,
    "simcache/trace/ledger.py": TRACE_TESTS,
    "simcache/trace/recorder.py": TRACE_TESTS,
    "simcache/trace/replay.py": TRACE_TESTS,
    "simcache/trace/timeline.py": TRACE_TESTS,
    # the explorer's machine and its state key: the machine's own tests, the reduced searches, then the searches
    "simcache/explore/statekey.py": ["tests/test_core_exact_statekey.py", "tests/test_explore_machine.py",
                                     "tests/test_dpor.py", "tests/test_explore.py"],
    "simcache/explore/machine.py": ["tests/test_explore_machine.py", "tests/test_dpor.py", "tests/test_explore.py"],
    # the searches themselves: exhaustive and random exploration, pruning, their results and budgets
    "simcache/explore/search.py": ["tests/test_explore.py", "tests/test_dpor.py", "tests/test_gcpace.py",
                                   "tests/test_core_exact_search.py"],
    # the reduced search, and the tallies every search reports through
    "simcache/explore/dpor.py": ["tests/test_dpor.py", "tests/test_core_exact_search.py"],
    "simcache/explore/results.py": ["tests/test_core_exact_results.py", "tests/test_explore.py", "tests/test_dpor.py",
                                    "tests/test_core_exact_search.py", "tests/test_explore_machine.py"],
    # what a failure leaves on disk: the scenario file, trace and generated pytest module, compared whole
    "simcache/explore/artefacts.py": ["tests/test_core_exact_artefacts.py",
                                      "tests/test_explore.py::test_the_artefacts_replay_and_the_generated_pytest_file_passes"],
    # writing only the paths a user names: all or nothing, no planted symlink followed, no device replaced
    # (their own FIFOs and device nodes only: test_hostile.py's command lines write to the real /dev/null, which a
    # mutant that replaces devices would turn into a regular file; see replaced_system_devices)
    "simcache/safe_io.py": ["tests/test_core_exact_safe_io.py", "tests/test_fs_safety.py"],
    # scenario files: their parsing, checks and refusals (every bad input one sentence)
    "simcache/scenario.py": ["tests/test_core_exact_scenario.py", "tests/test_scenario.py", "tests/test_bad_input.py",
                             "tests/test_gallery.py"],
    # the command line's numbers: every option's limits, the refusal words, --jobs auto, plain decimals
    "simcache/cli_numbers.py": ["tests/test_core_exact_cli_numbers.py", "tests/test_bad_input.py"],
    # random and PCT schedules: the draws against their references, the sampled search against a plain loop
    "simcache/explore/sampling.py": ["tests/test_core_exact_sampling.py", "tests/test_explore.py"],
    # the workload generator read back turn by turn against its spec, and the rates' rows and table
    "simcache/workload.py": ["tests/test_core_exact_workload.py", "tests/test_workload.py"],
    # the small helpers: tree nodes, worker processes, the progress line, the collector's pace
    "simcache/node.py": ["tests/test_core_exact_node_pool.py", "tests/test_core_exact_tree.py"],
    "simcache/pool.py": ["tests/test_core_exact_node_pool.py",
                         "tests/test_fs_safety.py::test_an_interrupted_pool_stops_its_workers_at_once"],
    "simcache/progress.py": ["tests/test_core_exact_progress.py"],
    "simcache/gcpace.py": ["tests/test_gcpace.py"],
    # the public entry point: a run's JSON form, the --ops window, the flags a run gets, what reaches the replay
    "simcache/simulate.py": ["tests/test_core_exact_simulate.py"],
    # the explorer's machine copier: a busy cache walked object by object beside its copy, each kind alone
    "simcache/explore/fastcopy.py": ["tests/test_core_exact_fastcopy.py",
                                     "tests/test_eviction_order.py::test_the_kept_order_survives_a_clone_and_stays_compact"],
    # the explorer's worker processes: the plan each takes, its damage memo, the pool that starts them
    "simcache/explore/workers.py": ["tests/test_core_exact_node_pool.py"],
    # the command line: each command's --help (docs/cli.md), the small parsers, what each command hands on, exits
    "simcache/cli.py": ["tests/test_core_exact_cli.py"],
    # the code pane's frames: the stack at a micro-step, its lines, node locals, fix lines and SGLang locations
    "simcache/codepane.py": ["tests/test_core_exact_codepane.py", "tests/test_codepane_exact.py",
                             "tests/test_codepane.py"],
    # teaching beyond the views: the tours (model and file), the be-the-scheduler game, the teaching helpers
    "simcache/tour.py": ["tests/test_core_exact_tour.py", "tests/test_tour.py"],
    "simcache/tour_file.py": ["tests/test_core_exact_tour_file.py", "tests/test_tour.py"],
    "simcache/game.py": ["tests/test_core_exact_game.py", "tests/test_game_levels.py"],
    "simcache/game_levels.py": ["tests/test_core_exact_game_levels.py", "tests/test_game_levels.py"],
    "simcache/game_map.py": ["tests/test_core_exact_game_map.py", "tests/test_game_levels.py"],
    "simcache/teach.py": ["tests/test_core_exact_teach.py", "tests/test_teach.py"],
    # notebooks 1 and 2's live cache: settings, statuses, calls, the check cells' facts, the views' pieces
    "simcache/lab.py": ["tests/test_core_exact_lab.py"],
    # the notebook player's model and the pull-request storyboard
    "simcache/player.py": ["tests/test_core_exact_player.py", "tests/test_core_exact_player_widgets.py",
                           "tests/test_player.py"],
    "simcache/player_model.py": ["tests/test_core_exact_player.py", "tests/test_core_exact_player_widgets.py",
                                 "tests/test_player.py"],
    "simcache/stale_gif.py": ["tests/test_stale_gif.py"],
    "simcache/storyboard.py": ["tests/test_core_exact_storyboard.py", "tests/test_core_exact_storyboard_pictures.py",
                               "tests/test_storyboard.py"],
    # the explore command: the failure shown, the summary, what reaches the search, the artefacts and refusals
    "simcache/explore/cli.py": ["tests/test_core_exact_explore_cli.py"],
    # the two error voices' shared helper: a bad value said back, cut at its limit
    "simcache/errors.py": ["tests/test_core_exact_errors.py"],
    # the printed account of a run: each step's line, the stale and cleaned-up notes, the ending
    "simcache/transcript.py": ["tests/test_core_exact_transcript.py",
                               "tests/test_trace.py::test_the_transcript_of_crash_pr_under_merged_fix",
                               "tests/test_trace.py::test_the_transcript_of_a_guarded_run_shows_the_cleanup"],
    # the rest of scenario loading: the settings' checks in both voices, and the text-to-plain-data parser
    "simcache/config.py": ["tests/test_core_exact_config.py", "tests/test_bad_input.py", "tests/test_scenario.py",
                           "tests/test_core_exact_scenario.py"],
    "simcache/safe_yaml.py": ["tests/test_core_exact_safe_yaml.py", "tests/test_bad_input.py",
                              "tests/test_scenario.py"],
    # operations, schedules and crash records: their parsing and checks, and the driver and explorer that use them
    "simcache/operations.py": ["tests/test_core_exact_operations.py", "tests/test_operations.py",
                               "tests/test_scenario.py", "tests/test_bad_input.py", "tests/test_core_exact_driver.py"],
    "simcache/scheduler.py": ["tests/test_core_exact_scheduler.py", "tests/test_scenario.py", "tests/test_bad_input.py",
                              "tests/test_core_exact_shrink.py"],
    # the hooks: simulated functions' names in raised_in and call stacks, the recorder's calls, the leaf sets
    "simcache/trace_hooks.py": ["tests/test_core_exact_trace_hooks.py", "tests/test_core_exact_crash.py",
                                "tests/test_core_exact_lru.py", "tests/test_core_exact_trace.py"],
    "simcache/crash.py": ["tests/test_core_exact_crash.py", "tests/test_operations.py",
                          "tests/test_assertion_messages.py", "tests/test_core_exact_shrink.py",
                          "tests/test_core_exact_ops_run.py"],
    # the replay entry points: the fast path against the traced one, scenarios, workloads, reference cases
    "simcache/ops_run.py": ["tests/test_core_exact_ops_run.py", "tests/test_trace_fast_paths.py",
                            "tests/test_trace_equivalence.py", "tests/test_scenario.py", "tests/test_workload.py",
                            "tests/test_reference_scenarios.py"],
    # streams.py: the same stream tests and the pools' exact tests (CudaStreams runs only where CUDA is present)
    "simcache/streams.py": ["tests/test_streams_exact.py", *STREAM_TESTS, "tests/test_core_exact_pools.py"],
    "simcache/snapshot.py": ["tests/test_core_exact_snapshot.py", "tests/test_trace.py", "tests/test_render.py",
                             "tests/test_core_exact_state.py", "tests/test_panels_exact.py", "tests/test_dot_exact.py"],
    # the views: exact DOT / HTML / page-data tests, no browser and no kernel (a kernel imports the installed
    # package, never the mutant; a browser test costs many seconds per surviving mutant)
    "simcache/render/dot.py": ["tests/test_render.py", "tests/test_mutant_kills.py", "tests/test_dot_exact.py"],
    "simcache/export.py": ["tests/test_render.py", "tests/test_mutant_kills.py", "tests/test_export_exact.py"],
    "simcache/export_data.py": ["tests/test_export_exact.py", "tests/test_views_page_safety.py"],
    "simcache/render/panels.py": ["tests/test_render.py", "tests/test_panels_exact.py"],
    "simcache/render/moments.py": ["tests/test_moments_exact.py", "tests/test_render.py", "tests/test_mutant_kills.py"],
    "simcache/render/display.py": ["tests/test_display_exact.py"],
    "simcache/render/explain.py": ["tests/test_explain_exact.py", "tests/test_render.py"],
    "simcache/render/ghosts.py": ["tests/test_ghosts_exact.py", "tests/test_ghosts.py", "tests/test_render.py",
                                  "tests/test_dot_exact.py"],
    # test_codepane.py's mirror test runs tools/, which the copy leaves out; its other tests read simcache/codepane
    "simcache/render/codepane.py": ["tests/test_codepane_exact.py",
                                    "tests/test_codepane.py::test_sglang_locations_per_commit_and_fix_lines",
                                    "tests/test_codepane.py::test_hover_css_is_scoped_to_its_own_tree_and_player_shows_the_pane"],
    # the small views: the render and export tests that call them, and their exact tests (no browser, no kernel)
    "simcache/render/svg.py": ["tests/test_render.py", "tests/test_export_exact.py",
                               "tests/test_render_small_exact.py"],
    "simcache/render/frames.py": ["tests/test_render.py", "tests/test_export_exact.py", "tests/test_display_exact.py",
                                  "tests/test_render_small_exact.py"],
    "simcache/render/timeline.py": ["tests/test_render.py", "tests/test_export_exact.py",
                                    "tests/test_render_small_exact.py"],
    "simcache/render/plots.py": ["tests/test_render.py::test_plots_return_figures_and_png",
                                 "tests/test_render.py::test_crash_rate_plot_labels_what_it_counts_and_fits_the_data",
                                 "tests/test_render_small_exact.py"],
}
# test_streams loads a benchmark and runs a script; test_invariants reads docs/scenarios.md
COPY = ("simcache", "tests", "benchmarks", "scripts", "docs", "pyproject.toml", "README.md")
# a mutant in a function no selected test calls is "no tests" to mutmut: as unkilled as a survivor, and scored so
UNKILLED = ("survived", "no tests")

# appended to the copy's simcache/trace_hooks.py: see the module docstring
TRACE_HOOKS_SHIM = '''

class _MutmutCodes(dict):
    """SIMULATED_CODE for a mutmut copy: a trampolined function's body runs in the copies in its mutants dict."""

    def __init__(self, known):
        super().__init__(known)
        self.pending = []  # (mutants dict, SGLang name): the dict is filled once the module's classes exist
        self.trampolines = set()  # mutmut's shared trampoline code: "registered" for `in`, never a name

    def _resolve(self):
        waiting = []
        for mutants, name in self.pending:
            if not mutants:
                waiting.append((mutants, name))
            for fn in mutants.values():
                dict.__setitem__(self, fn.__code__, name)
        self.pending = waiting

    def get(self, code, default=None):
        if self.pending:
            self._resolve()
        return dict.get(self, code, default)

    def __contains__(self, code):
        if self.pending:
            self._resolve()
        if dict.__contains__(self, code):
            return True
        # a trampoline counts only for cache.py's import-time unwrap (it keeps the wrapped function); a frame walk
        # (call stacks, the code pane) skips the trampoline's frame and names the mutant's own frame below it
        return code in self.trampolines and "_unwrap_simulated" in sys._getframe(1).f_code.co_name


def _mutmut_mutants(fn):
    """The mutants dict behind a mutmut trampoline, or None when ``fn`` is not one."""
    if "mutmut" not in getattr(getattr(fn, "__code__", None), "co_filename", ""):
        return None
    for cell in fn.__closure__ or ():
        for inner in getattr(cell.cell_contents, "__closure__", None) or ():
            if isinstance(inner.cell_contents, dict):
                return inner.cell_contents
    return None


import sys

SIMULATED_CODE = _MutmutCodes(SIMULATED_CODE)
_register_plain = register


def register(fn, name=None):
    mutants = _mutmut_mutants(fn)
    if mutants is None:
        return _register_plain(fn, name)
    SIMULATED_CODE.trampolines.add(fn.__code__)
    SIMULATED_CODE.pending.append((mutants, name or fn.__name__))
    return fn
'''


# decorators mutmut would otherwise skip the function for, each on its own line: the line -> the call it stands for
DECORATORS = {"@simulated": "simulated", "@fewer_collections()": "fewer_collections()"}


def undecorate(source: str) -> str:
    """``@simulated`` (or ``@fewer_collections()``) on its own line above a def -> ``name = simulated(name)`` (or
    ``name = fewer_collections()(name)``) right after the def: the same object ends up bound to the name."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []  # (decorator line, last line of the def, indent, name, the decorator's call)
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            text = lines[dec.lineno - 1].strip()
            named = dec.func if isinstance(dec, ast.Call) else dec
            if isinstance(named, ast.Name) and named.id in ("simulated", "fewer_collections"):
                if len(node.decorator_list) != 1 or text not in DECORATORS:
                    raise ValueError(f"line {dec.lineno}: only a lone {' or '.join(map(repr, DECORATORS))} line "
                                     f"can be rewritten")
                indent = lines[dec.lineno - 1][:len(lines[dec.lineno - 1]) - len(lines[dec.lineno - 1].lstrip())]
                edits.append((dec.lineno, node.end_lineno, indent, node.name, DECORATORS[text]))
    for dec_line, end_line, indent, name, call in sorted(edits, reverse=True):
        lines.insert(end_line, f"{indent}{name} = {call}({name})\n")
        del lines[dec_line - 1]
    return "".join(lines)


# written into the copy's tests/ (never the project's): mutmut runs the tests once in its own process (for its
# stats), then forks a child per mutant. tqdm's default write lock holds a multiprocessing semaphore made in that
# process and shared by every child forked from it: a child that dies holding it (stopped at a time limit) leaves it
# taken, and every later child that draws a bar waits on it forever (no CPU spent, so mutmut's CPU-time limit never
# fires). Each process gets its own plain lock instead, and no monitor thread.
CONFTEST = """import threading

from tqdm import tqdm

tqdm.set_lock(threading.RLock())  # see benchmarks/mutation.py
tqdm.monitor_interval = 0
"""


def prepare(work: Path, module: str, tests: list[str], verify: bool) -> dict | None:
    """The transformed copy in ``work``, with mutmut's section; a dict saying why not when the tests fail there."""
    for name in COPY:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
    target = work / module
    target.write_text(undecorate(target.read_text()))
    if module != "simcache/trace_hooks.py":  # the hooks mutated themselves: no cache method is trampolined
        with open(work / "simcache" / "trace_hooks.py", "a") as f:
            f.write(TRACE_HOOKS_SHIM)
    (work / "tests" / "conftest.py").write_text(CONFTEST)
    if verify:
        check = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "pytest", "-x", "-q", "-p",
                                "no:cacheprovider", *tests], cwd=work, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(work)})
        if check.returncode != 0:
            return dict(module=module, tests=tests, error="the targeted tests fail on the transformed copy",
                        log_tail=check.stdout[-1500:])
    with open(work / "pyproject.toml", "a") as f:  # mutmut's own section, for this module only
        f.write("\n[tool.mutmut]\n"
                'source_paths = ["simcache"]\n'
                f"only_mutate = [{json.dumps(module)}]\n"
                f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
                'pytest_add_cli_args = ["-x", "-q", "-p", "no:cacheprovider"]\n'
                'also_copy = ["tests", "benchmarks", "scripts", "docs"]\n')
    return None


def statuses(work: Path) -> dict[str, str]:
    res = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work,
                         capture_output=True, text=True)
    out: dict[str, str] = {}
    for line in res.stdout.splitlines():
        m = re.match(r"\s*(\S+):\s*(\w[\w ]*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


DIFFS = ("import json, sys; from mutmut.__main__ import find_mutant, get_diff_for_mutant; "
         "print(json.dumps({n: get_diff_for_mutant(n, path=find_mutant(n).path) for n in json.load(sys.stdin)}))")


def survivor_diffs(work: Path, names: list[str]) -> dict[str, str]:
    """Each survivor's diff, in one process (``mutmut show`` per mutant loads everything again: ~10 s each)."""
    if not names:
        return {}
    done = subprocess.run([sys.executable, "-c", DIFFS], cwd=work, input=json.dumps(names), capture_output=True,
                          text=True)
    if done.returncode != 0:
        return {n: f"(no diff: {done.stderr.strip().splitlines()[-1:]})" for n in names}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_module(module: str, tests: list[str], max_children: int, timeout_s: int, verify: bool = True,
               keep: Path | None = None, rerun: bool = False, only: list[str] | None = None) -> dict:
    """Mutate ``module``; with ``keep`` the copy stays there, and ``rerun`` tests only its survivors (and the
    mutants a timeout left unchecked, or no selected test ran) again, against the project's current tests.
    ``only`` (fnmatch patterns of mutant names) tests just those mutants; the others stay "not checked"."""
    with tempfile.TemporaryDirectory(prefix="simcache-mutation-") as tmp:
        work = keep or Path(tmp)
        names: list[str] = []
        saved = work / "mutation-status.json"  # every mutant's last known status (a rerun resets the others')
        before: dict[str, str] = {}
        if rerun:
            before = json.loads(saved.read_text()) if saved.exists() else statuses(work)
            # "segfault": a run killed from outside (SIGKILL reads as one to mutmut), e.g. a hung child
            names = sorted(k for k, v in before.items() if v in (*UNKILLED, "not checked", "segfault")
                           and (not only or any(fnmatch.fnmatch(k, p) for p in only)))
            for dest in (work / "tests", work / "mutants" / "tests"):
                shutil.copytree(ROOT / "tests", dest, dirs_exist_ok=True)
                (dest / "conftest.py").write_text(CONFTEST)
            for conf in (work / "pyproject.toml", work / "mutants" / "pyproject.toml"):  # the selection as it is now
                if conf.exists():  # (new test files join it; mutmut collects stats for the tests it has not seen)
                    conf.write_text(re.sub(r"(?m)^pytest_add_cli_args_test_selection = .*$",
                                           f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
                                           conf.read_text()))
        else:
            if keep is not None:
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir(parents=True)
            failed = prepare(work, module, tests, verify)
            if failed is not None:
                return failed
            names = list(only or [])  # mutmut matches these patterns itself
        mutmut = [sys.executable, "-m", "mutmut"]
        t0 = time.monotonic()
        proc = subprocess.Popen(["nice", "-n", "10", *mutmut, "run", "--max-children", str(max_children), *names],
                                cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:  # keep what was tested: mutmut records each mutant as it finishes
            os.killpg(proc.pid, signal.SIGTERM)
            log, _ = proc.communicate()
            log += f"\nstopped after {timeout_s} s (--timeout); untested mutants are listed under 'other'"
        seconds = time.monotonic() - t0
        status = statuses(work)
        if rerun:  # mutmut forgets the results of mutants it was not asked to run again: keep the earlier ones
            status = {**before, **{k: status[k] for k in names if k in status}}
        if keep is not None:
            saved.write_text(json.dumps(status, indent=0, sort_keys=True))
        killed = sum(s in ("killed", "timeout") for s in status.values())
        # a mutant no selected test reaches ("no tests") is a bug nothing would catch: it counts as a survivor
        survived = sorted(k for k, s in status.items() if s in UNKILLED)
        other = {k: s for k, s in status.items() if s not in ("killed", "timeout", *UNKILLED)}
        diffs = survivor_diffs(work, survived)  # what each survivor changed, for deciding: new test, or equivalent
        return dict(module=module, tests=tests, mutants=len(status), killed=killed, survived=len(survived),
                    score=round(killed / max(1, killed + len(survived)), 3), survivors=survived, diffs=diffs,
                    other=other,
                    seconds=round(seconds, 1), returncode=proc.returncode, log_tail=log[-600:])


SYSTEM_DEVICES = {"/dev/null": (1, 3), "/dev/zero": (1, 5), "/dev/full": (1, 7)}


def replaced_system_devices() -> list[str]:
    """The sentences naming each system device a mutant replaced (a mutant of the file-writing code can rename a
    file over a device a test writes to); empty when every one is still its character device."""
    out = []
    for path, (major, minor) in SYSTEM_DEVICES.items():
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISCHR(mode):
            out.append(f"{path} is no longer a character device (a mutant replaced it); as root, put it back with: "
                       f"rm {path} && mknod -m 666 {path} c {major} {minor}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help=f"modules to mutate (default: all of {', '.join(MODULES)})")
    ap.add_argument("--out", default=str(ROOT / "build" / "mutation.json"),
                    help="where to write the scores and survivors (JSON)")
    ap.add_argument("--max-children", type=int, default=2, help="parallel mutant runs (default 2)")
    ap.add_argument("--timeout", type=int, default=3600,
                    help="seconds allowed per module's mutmut run (default 3600); what finished is still scored")
    ap.add_argument("--keep", action="store_true",
                    help="keep each module's copy in build/mutation/<module> (for --rerun-survivors)")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="test only the survivors of a kept copy again, against the current tests")
    ap.add_argument("--only", action="append", default=[], metavar="GLOB",
                    help="test only the mutants whose names match GLOB (fnmatch; repeatable), e.g. "
                         "'*ǁwrite__mutmut_*'; the others are reported as not checked")
    ap.add_argument("--no-verify", action="store_true",
                    help="skip the targeted tests' run on the transformed copy before mutating")
    args = ap.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        print(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("mutmut") is None:
        print(f"mutmut is not installed in {sys.executable}; install the dev extras with "
              f"{sys.executable} -m pip install -e '.[dev]' and run this again", file=sys.stderr)
        return 2
    out = []
    for module in args.modules or list(MODULES):
        print(f"mutating {module} ...", flush=True)
        keep = ROOT / "build" / "mutation" / module.replace("/", "_") if args.keep or args.rerun_survivors else None
        if args.rerun_survivors and not (keep / "mutants").is_dir():
            print(f"no kept copy of {module} in {keep}; run it with --keep first", file=sys.stderr)
            return 2
        r = run_module(module, MODULES[module], args.max_children, args.timeout, verify=not args.no_verify,
                       keep=keep, rerun=args.rerun_survivors, only=args.only)
        for sentence in replaced_system_devices():
            print(f"  WARNING: {sentence}", file=sys.stderr, flush=True)
        out.append(r)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
        if "error" in r:
            print(f"  not mutated: {r['error']}\n{r['log_tail']}", flush=True)
            continue
        print(f"  {r['killed']}/{r['killed'] + r['survived']} killed ({r['score']:.0%}), {r['mutants']} mutants, "
              f"{r['seconds']} s; survivors: {', '.join(r['survivors']) or 'none'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
