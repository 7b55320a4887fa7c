"""Make the pictures in ``assets/`` from the current code, and record what each was drawn from.

    .venv/bin/python tools/make_assets.py [NAME ...]      # make them (default: all), write assets/manifest.json
    .venv/bin/python tools/make_assets.py --check         # recompute each asset's source digest, change nothing

``bash scripts/make_assets.sh`` runs the first. Each asset has recorded inputs (a scenario, presets, a moment) and a
*source digest*: the SHA-256 of the data the picture was drawn from, computed by the code that draws it (the DOT
texts of its trees and the words of its captions, or the bytes of the page a screenshot shows). Pixels vary with
fonts and browser versions; the digest does not, so ``tests/test_assets.py`` recomputes it from the recorded inputs
and fails, with the command to run, when the code now draws something else than the asset shows.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
MANIFEST = ASSETS / "manifest.json"
COMMAND = "bash scripts/make_assets.sh"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def _sha(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


# --- the storyboard: PNGs of crash_pr's key moments and the GIF of its stale window -----------------------------
STORYBOARD = dict(scenario="crash_pr", presets=["pre_fix", "described_fix"])


@contextmanager
def _recording(fast: bool):
    """While inside: every DOT text the storyboard draws and every panel's words, recorded (with ``fast``, the DOT
    is not drawn: a blank picture stands in, which changes no word and no DOT text)."""
    from simcache import storyboard

    seen: dict[str, list] = {"dot": [], "panel": []}
    real_png, real_panel = storyboard.render_png, storyboard._panel
    blank: list[bytes] = []

    def png(dot: str, dpi: int = 96) -> bytes:
        seen["dot"].append(dot)
        if not fast:
            return real_png(dot, dpi=dpi)
        if not blank:
            import io

            from PIL import Image

            buf = io.BytesIO()
            Image.new("RGB", (40, 30), "white").save(buf, "PNG")
            blank.append(buf.getvalue())
        return blank[0]

    def panel(title, caption, trees, labels, side=True):
        seen["panel"].append([title, caption, list(labels)])
        return real_panel(title, caption, trees, labels, side)

    storyboard.render_png, storyboard._panel = png, panel
    try:
        yield seen
    finally:
        storyboard.render_png, storyboard._panel = real_png, real_panel


def storyboard_files(fast: bool = False) -> tuple[dict, str]:
    """The storyboard's files and its source digest (the DOT texts, the panels' words and comment.md)."""
    from simcache.simulate import simulate
    from simcache.storyboard import storyboard_files as files_of

    a, b = (simulate(STORYBOARD["scenario"], p) for p in STORYBOARD["presets"])
    with _recording(fast) as seen:
        files = files_of(a, compare=b)
    return files, _sha({"comment.md": files["comment.md"], **seen})


def make_storyboard() -> tuple[list[str], str]:
    files, digest = storyboard_files()
    out = ASSETS / "storyboard"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name, content in files.items():
        (out / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return sorted(f"storyboard/{n}" for n in files), digest


# name -> (what it shows, its inputs, how it is made, how its digest is recomputed quickly)
REGISTRY = {
    "storyboard": ("crash_pr's key moments under pre_fix and described_fix, and the GIF of its stale window",
                   STORYBOARD, make_storyboard, lambda: storyboard_files(fast=True)[1]),
}


def read_manifest() -> dict:
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help=f"assets to make (default: all of {', '.join(REGISTRY)})")
    ap.add_argument("--check", action="store_true", help="recompute each source digest and compare; write nothing")
    a = ap.parse_args(argv)
    unknown = [n for n in a.names if n not in REGISTRY]
    if unknown:
        print(f"make_assets: unknown asset {', '.join(unknown)}; choose from {', '.join(REGISTRY)}", file=sys.stderr)
        return 2
    manifest = read_manifest()
    names = a.names or list(REGISTRY)
    if a.check:
        stale = [n for n in names if manifest.get(n, {}).get("source_sha256") != REGISTRY[n][3]()]
        for n in stale:
            print(f"assets/{n} is out of date: run {COMMAND} {n}", file=sys.stderr)
        return 1 if stale else 0
    ASSETS.mkdir(exist_ok=True)
    for n in names:
        what, inputs, make, _ = REGISTRY[n]
        files, digest = make()
        manifest[n] = dict(shows=what, inputs=inputs, files=files, source_sha256=digest,
                           command=f"{COMMAND} {n}")
        print(f"assets/{n}: {len(files)} file(s)")
    with tempfile.NamedTemporaryFile("w", dir=ASSETS, delete=False, suffix=".json") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    Path(f.name).chmod(0o644)
    Path(f.name).replace(MANIFEST)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
