"""The explorer's findings on a unified preset, confirmed or refuted on SGLang's own ``UnifiedRadixCache``
(``explore --confirm-real``, ``run --against-real``; the release wheels from simcache's cache folder, skipped with
one sentence when the package index cannot be reached)."""
from __future__ import annotations

import json

import pytest

from simcache.cli import main
from simcache.real.source import SourceError
from simcache.real.unified.confirm import loaded_unified


@pytest.fixture(scope="module", autouse=True)
def wheels():
    for version, preset in (("0.5.16", "unified_0_5_16"), ("0.5.17", "unified_0_5_17")):
        try:
            loaded_unified(version, preset)
        except SourceError as e:
            if "cannot reach" in str(e) or "HTTP" in str(e):
                pytest.skip(f"the package index cannot be reached, so the {version} wheel cannot be fetched: {e}")
            raise


def test_the_race_and_its_shrunk_form_are_confirmed_on_the_real_0_5_16(capsys):
    assert main(["explore", "unified_refill", "--shrink", "--confirm-real", "0.5.16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    got = out["confirm_real"]
    assert got["disagreements"] == 0 and got["source"].startswith("sglang 0.5.16 (")
    assert [(c["label"], c["schedule"], c["verdict"], c["real_raised_in"], c["real_step"]) for c in got["results"]] == [
        ("minimal (shrunk)", "R2 pf*2 mem*3", "confirmed", "_remove_leaf_from_parent", 5),
        ("first failure with AssertionError (no message) @ _remove_leaf_from_parent", "pf*2 R2 pf mem*3", "confirmed",
         "_remove_leaf_from_parent", 6)]


def test_run_against_the_real_code_agrees_on_every_field_on_both_releases(capsys):
    for preset, version, what in (("unified_0_5_16", "0.5.16", "AssertionError:  in _remove_leaf_from_parent at op 6"),
                                  ("unified_0_5_17", "0.5.17", "clean")):
        assert main(["run", "unified_refill", "--preset", preset, "--against-real", version, "--json"]) == 0
        real = json.loads(capsys.readouterr().out)["real"]
        assert real["differ"] == [], preset
        assert (real["outcome"] if what == "clean" else f"{real['outcome']} in {real['raised_in']} at op "
                f"{real['step']}") == what


def test_against_real_runs_the_same_window_as_a_run_narrowed_by_ops(capsys):
    # review1 #7: the real code runs operations 0..4 too (the model runs 0..1 untraced and none from 5), never the
    # whole schedule, whose op 6 fails on 0.5.16
    assert main(["run", "unified_refill", "--preset", "unified_0_5_16", "--ops", "2:5", "--against-real", "0.5.16",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["status"], doc["real"]["status"], doc["real"]["outcome"], doc["real"]["differ"]) == (
        ".....", ".....", "clean", [])
    assert main(["run", "unified_refill", "--preset", "unified_0_5_16", "--ops", "2:5", "--against-real",
                 "0.5.16"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.startswith("real code, sglang 0.5.16 (") and head.endswith(
        ", narrowed to operations 2..4 of 0..6 (--ops 2:5): 0..1 ran untraced, 5..6 never ran: clean in this window; "
        "the model agrees on every field")
