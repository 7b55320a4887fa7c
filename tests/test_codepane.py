"""The code pane (issue #17): at a micro-step, the simulated frames, their source, the current line, the node
locals, the SGLang location per preset commit and the fix lines; rebuilt by replay, never recorded.

Story: at the moment #8 goes stale in crash_pr under pre_fix, the Python stack is the PR's nine frames; every
frame that holds #8 says so; the innermost frame is ``_delete_tombstone_leaf`` at the line that pops the parent's
slot; each frame names the SGLang function's definition at e9d6b9eb; the stale guard's lines are fix lines, off
under pre_fix and on under described_fix. A call step shows the callee on top; the assertion step the frames the
exception unwound. The HTML pane links each node to the tree through CSS only, scoped to its own tree.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from simcache import simulate
from simcache.codepane import COMMITS, code_at, code_frames, flag_on, sglang_lines
from simcache.player import PlayerModel
from simcache.render.codepane import codepane_html
from simcache.render.moments import moments
from simcache.trace_hooks import SIMULATED_CODE
from simcache.versions import preset

ROOT = Path(__file__).resolve().parent.parent
PR_FRAMES = ["cache_finished_req", "insert", "_insert_helper", "_inc_hit_count", "write_backup", "evict_host",
             "_evict_host_leaf", "_iteratively_delete_tombstone_leaf", "_delete_tombstone_leaf"]


def crash():
    return simulate("crash_pr", "pre_fix")


def test_went_stale_frames_are_the_pr_stack_with_their_nodes():
    run = crash()
    step = moments(run.trace)["went-stale"][0]
    frames = code_at(run.trace, step)
    assert [f.function for f in frames] == PR_FRAMES
    held = {f.function: dict(f.locals) for f in frames}
    assert held["_insert_helper"]["node"] == (8,) and held["write_backup"]["node"] == (8,)
    assert held["evict_host"] == {"x": (9,)} and held["_evict_host_leaf"] == {"node": (9,), "parent": (8,)}
    assert held["_iteratively_delete_tombstone_leaf"] == {"node": (9,), "p": (8,)}
    top = frames[-1]
    assert (top.path, top.lines[top.line - top.first_line].strip()) == (
        "simcache/evict_host.py", "parent = self._pop_from_parent(node)")
    # every caller waits on the line that calls the next frame
    for outer, inner in zip(frames, frames[1:], strict=False):
        assert inner.function in outer.lines[outer.line - outer.first_line], (outer.function, inner.function)


def test_sglang_locations_per_commit_and_fix_lines():
    run = crash()
    top = code_at(run.trace, moments(run.trace)["went-stale"][0])[-1]
    assert top.sglang("pre_fix") == "hi_mamba_radix_cache.py:599 @ e9d6b9eb"
    assert top.sglang("merged_fix") == "hi_mamba_radix_cache.py:596 @ 14e122cd"
    assert top.sglang("described_fix") == top.sglang("pre_fix")  # never merged: the code it patches
    fixes = dict(top.fix_lines)
    guard = [ln for ln, s in enumerate(top.lines, top.first_line) if "_stale_guard(" in s]
    assert guard and all(fixes[ln] == "stale_guards" for ln in guard)
    assert top.line not in fixes  # the pop itself is pre-fix code
    assert not flag_on(preset("pre_fix"), "stale_guards") and flag_on(preset("described_fix"), "stale_guards")
    html = codepane_html(run, moments(run.trace)["went-stale"][0])
    assert "fix: stale_guards (off in pre_fix)" in html and "sc-fix sc-on" not in html.split("stale_guards")[0]
    guarded = simulate("crash_pr", "described_fix")
    assert "fix: stale_guards (on in described_fix)" in codepane_html(guarded, moments(guarded.trace)["went-stale"][0])


def test_call_step_puts_the_callee_on_top_and_assertion_reads_the_traceback():
    run = crash()
    t = run.trace
    call = next(s for s in t.steps if s.kind == "call" and s.detail["function"] == "_delete_tombstone_leaf")
    frames = code_at(t, call.index)
    assert frames[-1].function == "_delete_tombstone_leaf"
    assert frames[-1].lines[frames[-1].line - frames[-1].first_line].lstrip().startswith("def _delete_tombstone_leaf")
    assert frames[-1].locals == (("node", (call.node,)),)
    end = code_at(t, moments(t)["assertion"][0])
    assert [f.function for f in end] == list(run.crash.stack)
    assert dict(end[-1].locals) == {"node": (8,)}
    assert code_at(t, 0) == ()  # an operation's first step: no simulated function runs yet


def test_frames_equal_whether_read_alone_or_in_a_batch_and_tracing_is_unchanged():
    run = crash()
    t = run.trace
    steps = list(range(0, len(t.steps), 7))
    batch = code_frames(t, steps)
    fresh = simulate("crash_pr", "pre_fix")
    assert all(code_at(fresh.trace, s) == batch[s] for s in steps[::5])
    assert fresh.trace.sha256() == t.sha256()  # reading the code pane changes no recorded event


def test_table_is_facts_only_and_covers_the_simulated_functions():
    table = sglang_lines()
    # HiMamba's functions (the unified model's have their own table, tests/test_unified_views.py)
    names = {n for c, n in SIMULATED_CODE.items() if "/simcache/unified/" not in c.co_filename.replace("\\", "/")}
    assert set(table) <= names and names - set(table) == {"_cleanup_stale_node", "_has_fresh_parent_link"}
    for per_commit in table.values():
        assert set(per_commit) <= set(COMMITS.values())
        for file, line in per_commit.values():
            assert file.endswith(".py") and "/" not in file and isinstance(line, int) and line > 0
    text = (ROOT / "simcache" / "data" / "sglang_lines.json").read_text()
    assert json.loads(text) == table and "def " not in text


def test_hover_css_is_scoped_to_its_own_tree_and_player_shows_the_pane():
    run = crash()
    m = PlayerModel(run, precompute=False)
    m.go(moments(run.trace)["went-stale"][0])
    a, b = m.code(0, "sc-t7"), m.code(0, "sc-t8")
    assert 'class="sc-panel sc-code sc-t7-code"' in a and 'data-node="8"' in a
    assert 'body:has(.sc-t7-code a.sc-node[data-node="8"]:is(:hover,:focus)) .sc-t7 g[id="n8"]' in a
    assert ".sc-t7" not in b and a.count("<details") == len(PR_FRAMES) and a.count(" open>") == 1


def test_table_regenerates_identically_from_the_mirror(tmp_path):
    mirror = Path("/work/.mirror/ziruiliu+sglang_exp/repo")
    if not mirror.exists():
        import pytest

        pytest.skip("no SGLang mirror here")
    subprocess.run([sys.executable, str(ROOT / "tools" / "sglang_lines.py"), str(mirror), str(tmp_path / "t.json")],
                   check=True, capture_output=True)
    assert (tmp_path / "t.json").read_text() == (ROOT / "simcache" / "data" / "sglang_lines.json").read_text()
