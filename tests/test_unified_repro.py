"""The upstream reproducers (``repro/unified_prefetch_refill``, ``repro/unified_writeback_livelock``) fail on 0.5.16
and pass on 0.5.17 (#39 §2).

It runs as its own pytest session per version, as a maintainer would run it, and its JUnit report is read back:
which tests failed, and with what. The wheels come from simcache's cache folder (fetched once, sha256-checked);
without the package index the test is skipped with one sentence.
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from simcache.real.source import SourceError
from simcache.real.unified import load_unified

REPO = Path(__file__).resolve().parent.parent
REPROS = [REPO / "repro" / "unified_prefetch_refill", REPO / "repro" / "unified_writeback_livelock"]


def run_repro(versions: list[str], tmp_path: Path) -> dict[str, str]:
    """test name -> "passed" or its failure message (first line) and the text of the failure; one pytest session
    runs every version (each has its own test classes)."""
    for version in versions:
        try:
            load_unified(version)  # fetch (or find) the wheel here, so a missing index is a skip, not a failure
        except SourceError as e:
            if "cannot reach" in str(e) or "HTTP" in str(e):
                pytest.skip(f"the package index cannot be reached, so the {version} wheel cannot be fetched: {e}")
            raise
    report = tmp_path / "repro.xml"
    env = {**os.environ, "SGLANG_VERSION": ",".join(versions)}
    env.pop("SGLANG_PATH", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                           *map(str, REPROS)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert report.is_file(), proc.stdout + proc.stderr
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        out[f"{case.get('classname').rsplit('.', 1)[-1]}.{case.get('name')}"] = (
            "passed" if failure is None else f"{failure.get('message')}\n{failure.text}")
    assert proc.returncode == (1 if any(v != "passed" for v in out.values()) else 0), proc.stdout
    return out


def test_the_reproducers_fail_on_0_5_16_and_pass_on_0_5_17(
        tmp_path):
    got = run_repro(["0.5.16", "0.5.17"], tmp_path)
    race, wb = "TestPrefetchRefillUnderUnbackedParent", "TestUnderWriteBack"
    detached = "test_evictions_leave_no_detached_node_in_a_leaf_set"
    twice = "test_evictions_run_to_completion_without_freeing_a_slot_twice"
    clean = "test_the_same_steps_under_write_back_run_clean"
    loop = "TestWriteBackMambaEviction"
    returns = "test_evict_mamba_returns_when_the_only_mamba_leaf_cannot_be_backed_up"
    assert sorted(got) == sorted(f"{cls}_{v}.{t}" for v in ("0_5_16", "0_5_17")
                                 for cls, t in ((race, detached), (race, twice), (wb, clean), (loop, returns)))
    assert "after evict(3), a leaf set holds nodes no longer in the tree: {'host': ['[9,9]']}" in \
        got[f"{race}_0_5_16.{detached}"]
    crash = got[f"{race}_0_5_16.{twice}"]
    assert crash.splitlines()[0] == "AssertionError"
    assert "sglang/srt/mem_cache/unified_radix_cache.py:1315: AssertionError" in crash
    assert ">       assert v == node" in crash
    assert got[f"{loop}_0_5_16.{returns}"].splitlines()[0] == (
        "AssertionError: evict(EvictParams(mamba_num=1)) never returns: the Mamba walk retries the same leaf, whose "
        "write-back backup keeps failing (the watchdog stopped it after 200 attempts)")
    passed = {k for k, v in got.items() if v == "passed"}
    assert passed == {f"{wb}_0_5_16.{clean}", f"{race}_0_5_17.{detached}", f"{race}_0_5_17.{twice}",
                      f"{wb}_0_5_17.{clean}", f"{loop}_0_5_17.{returns}"}
