"""The pictures in ``assets/`` (#42) were made by the current code from their recorded inputs.

``assets/manifest.json`` records, per asset, its inputs, its files and the SHA-256 of the data it was drawn from
(DOT texts and captions, or the page a screenshot shows): pixels vary with fonts and browsers, that data does not.
Each test recomputes one digest with ``tools/make_assets.py`` (in a fresh process: a page's SVGs come from a
process-wide cache) and fails with the command that regenerates it.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("make_assets", ROOT / "tools" / "make_assets.py")
make_assets = importlib.util.module_from_spec(_spec)
sys.modules["make_assets"] = make_assets
_spec.loader.exec_module(make_assets)
MANIFEST = json.loads((ROOT / "assets" / "manifest.json").read_text())


def test_the_manifest_lists_every_asset_the_tool_makes_and_every_file_exists():
    assert sorted(MANIFEST) == sorted(make_assets.REGISTRY)
    for name, entry in MANIFEST.items():
        assert entry["command"] == f"bash scripts/make_assets.sh {name}"
        assert entry["inputs"] == make_assets.REGISTRY[name][1], f"{name}: run bash scripts/make_assets.sh {name}"
        for f in entry["files"]:
            assert (ROOT / "assets" / f).stat().st_size > 0, f


@pytest.fixture(scope="module")
def digests() -> dict[str, str]:
    return make_assets.digests(sorted(make_assets.REGISTRY))


@pytest.mark.parametrize("name", sorted(make_assets.REGISTRY))
def test_each_asset_is_what_the_current_code_draws(name, digests):
    digest = digests[name]
    assert digest == MANIFEST[name]["source_sha256"], (
        f"assets/{name} is out of date: the code now draws something else; run bash scripts/make_assets.sh {name} "
        f"and look at the new pictures before committing them")
