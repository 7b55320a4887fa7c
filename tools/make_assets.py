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
import re
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


# --- the storyboard (comment.md and its pictures, as export --storyboard writes them) and, beside it, the GIF of
# --- the stale window (simcache.stale_gif: the README's first picture; the storyboard command writes no GIF) ----
STORYBOARD = dict(scenario="crash_pr", presets=["pre_fix", "described_fix"])
GIF = "stale-window.gif"


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


def storyboard_files(fast: bool = False) -> tuple[dict, list, str]:
    """The storyboard's files, the GIF's frames and their source digest (the DOT texts, the panels' words and
    comment.md; each GIF frame's words, DOT texts and time, and the GIF's size settings)."""
    from simcache import stale_gif
    from simcache.simulate import simulate
    from simcache.storyboard import storyboard_files as files_of

    a, b = (simulate(STORYBOARD["scenario"], p) for p in STORYBOARD["presets"])
    with _recording(fast) as seen:
        files = files_of(a, compare=b)
    frames = stale_gif.stale_window(a, b)
    gif = dict(frames=[vars(f) for f in frames], width=stale_gif.WIDTH, dpi=stale_gif.DPI,
               min_scale=stale_gif.MIN_SCALE)
    return files, frames, _sha({"comment.md": files["comment.md"], **seen, GIF: gif})


def make_storyboard() -> tuple[list[str], str]:
    from simcache.stale_gif import gif

    files, frames, digest = storyboard_files()
    files[GIF] = gif(frames)
    out = ASSETS / "storyboard"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name, content in files.items():
        (out / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return sorted(f"storyboard/{n}" for n in files), digest


# --- pages and screenshots: Debian chromium through Playwright ---------------------------------------------------
@contextmanager
def _browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise SystemExit(f"make_assets: {CHROMIUM} is missing: apt-get install -y chromium (scripts/setup.sh does it)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


def _page(browser, width: int = 1600, height: int = 1000):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(120_000)
    page.route("**/*", lambda route: route.abort() if not route.request.url.startswith(("file:", "http://127.0.0.1"))
               else route.continue_())  # offline: a page that reaches out shows it
    return page


# the example export page: the page itself is the asset, its bytes its digest
EXPORT = dict(scenario="scenario_d", preset="pre_fix")


def export_page() -> bytes:
    from simcache.export import export_html
    from simcache.simulate import simulate

    with tempfile.TemporaryDirectory() as d:
        return export_html(simulate(EXPORT["scenario"], EXPORT["preset"]), Path(d) / "page.html").read_bytes()


def make_export() -> tuple[list[str], str]:
    data = export_page()
    (ASSETS / "export-scenario_d.html").write_bytes(data)
    return ["export-scenario_d.html"], hashlib.sha256(data).hexdigest()


# the compare page at the first divergence: drawn from the page's bytes, after its "divergence" button
COMPARE = dict(scenario="crash_pr", presets=["pre_fix", "described_fix"], click="#btn-divergence")


def compare_page() -> bytes:
    from simcache.export import export_html
    from simcache.simulate import simulate

    a, b = (simulate(COMPARE["scenario"], p) for p in COMPARE["presets"])
    with tempfile.TemporaryDirectory() as d:
        return export_html(a, Path(d) / "page.html", compare=b).read_bytes()


def make_compare() -> tuple[list[str], str]:
    data = compare_page()
    with tempfile.TemporaryDirectory() as d, _browser() as browser:
        path = Path(d) / "compare.html"
        path.write_bytes(data)
        page = _page(browser)
        page.goto(path.as_uri())
        page.click(COMPARE["click"])
        page.locator("#run0.diverged").wait_for()
        page.wait_for_timeout(500)  # the frame's layout settles
        page.screenshot(path=str(ASSETS / "compare-divergence.png"))
    return ["compare-divergence.png"], hashlib.sha256(data).hexdigest()


# a game level, solved: the levels page's bytes and the moves clicked
GAME = dict(level=2, moves=["mem", "l3", "mem"])


def game_html() -> bytes:
    from simcache.game_map import game_page

    with tempfile.TemporaryDirectory() as d:
        return game_page(Path(d) / "game.html", [GAME["level"]]).read_bytes()


def make_game() -> tuple[list[str], str]:
    data = game_html()
    with tempfile.TemporaryDirectory() as d, _browser() as browser:
        path = Path(d) / "game.html"
        path.write_bytes(data)
        page = _page(browser, 1300, 950)
        page.goto(path.as_uri())
        page.locator("body[data-ready='1']").wait_for()
        for actor in GAME["moves"]:
            page.click(f"#actor-{actor}")
        page.locator("#status", has_text="reach the assertion").wait_for()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ASSETS / "game-level-2.png"), full_page=True)
    return ["game-level-2.png"], _sha({"page": hashlib.sha256(data).hexdigest(), "moves": GAME["moves"]})


# the player in JupyterLab at the went-stale moment: drawn from its widgets' values there
PLAYER = dict(scenario="crash_pr", preset="pre_fix", jump="went-stale")
PLAYER_CELL = f"""from simcache import simulate
from simcache.player import Player
player = Player(simulate({PLAYER["scenario"]!r}, {PLAYER["preset"]!r}))
player.model.jump({PLAYER["jump"]!r})
player.refresh()
player"""


def player_values() -> str:
    """The digest of every widget value the player shows at the moment (caption, tree, code pane, panels ...)."""
    from simcache.player import Player
    from simcache.simulate import simulate

    player = Player(simulate(PLAYER["scenario"], PLAYER["preset"]))
    player.model.jump(PLAYER["jump"])
    player.refresh()
    values = []

    def walk(w) -> None:
        v = getattr(w, "value", None)
        if isinstance(v, (str, int, float)):  # a side's CSS token counts the players made in this process
            values.append([type(w).__name__, getattr(w, "description", ""),
                           re.sub(r"\bsc-t\d+\b", "sc-t", v) if isinstance(v, str) else v])
        for child in getattr(w, "children", ()):
            walk(child)

    walk(player.widget)
    return _sha(values)


def _lab(work: Path, logs: Path):
    """A JupyterLab on 127.0.0.1 serving ``work``: (process, url); its whole process group is the caller's to stop."""
    import os
    import socket
    import subprocess
    import time
    import urllib.request

    config = logs / "config"
    for rel, data in ((Path("labconfig") / "page_config.json",
                       {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}),
                      (Path("lab/user-settings/@jupyterlab/notebook-extension/tracker.jupyterlab-settings"),
                       {"windowingMode": "none"})):
        (config / rel).parent.mkdir(parents=True, exist_ok=True)
        (config / rel).write_text(json.dumps(data))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(logs / "runtime"),
               JUPYTER_PLATFORM_DIRS="1")
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.token=", "--ServerApp.password=", "--LabApp.expose_app_in_browser=True",
           f"--ServerApp.root_dir={work}"] + (["--allow-root"] if os.geteuid() == 0 else [])
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=open(logs / "jupyter.log", "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 180
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"make_assets: JupyterLab did not start: {(logs / 'jupyter.log').read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)


KERNEL_READY = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""


def make_player() -> tuple[list[str], str]:
    import os
    import signal

    import nbformat

    with tempfile.TemporaryDirectory() as d:
        work, logs = Path(d) / "work", Path(d) / "logs"
        work.mkdir()
        logs.mkdir()
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PLAYER_CELL)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, work / "player.ipynb")
        proc, url = _lab(work, logs)
        try:
            with _browser() as browser:
                page = _page(browser, 1800, 1400)
                page.set_default_timeout(300_000)
                page.goto(f"{url}/lab/tree/player.ipynb")
                page.wait_for_function(KERNEL_READY)
                page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
                jump = page.get_by_role("button", name="jump ▶", exact=True).first
                jump.wait_for()
                player = page.locator(".widget-vbox", has=jump).first
                player.locator("svg g.went-stale").first.wait_for()
                page.evaluate("window.jupyterapp.commands.execute('application:toggle-left-area')")
                page.mouse.move(0, 0)
                page.wait_for_timeout(1500)
                player.screenshot(path=str(ASSETS / "player-went-stale.png"))
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
    return ["player-went-stale.png"], player_values()


# name -> (what it shows, its inputs, how it is made, how its digest is recomputed quickly)
REGISTRY = {
    "storyboard": ("crash_pr under pre_fix and described_fix: the storyboard for a PR comment (comment.md and "
                   "three pictures) and the GIF of the stale window (the README's picture)",
                   STORYBOARD, make_storyboard, lambda: storyboard_files(fast=True)[2]),
    "player": ("the ipywidgets player in JupyterLab at the moment node #8 goes stale (crash_pr, pre_fix)",
               PLAYER, make_player, player_values),
    "compare": ("the exported side-by-side page (crash_pr, pre_fix | described_fix) at the first divergence",
                COMPARE, make_compare, lambda: hashlib.sha256(compare_page()).hexdigest()),
    "game": ("be the scheduler: level 2 solved on the offline levels page", GAME, make_game,
             lambda: _sha({"page": hashlib.sha256(game_html()).hexdigest(), "moves": GAME["moves"]})),
    "export": ("an exported page to open in a browser: scenario_d under pre_fix (no network, no Jupyter)", EXPORT,
               make_export, lambda: hashlib.sha256(export_page()).hexdigest()),
}


def read_manifest() -> dict:
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}


def _fresh(*args: str) -> str:
    """Run this tool in a fresh process (``args``) and return its stdout. Each asset is made, and each digest
    computed, in a process of its own: a clean start, with nothing another asset drew in the process-wide SVG cache
    (``render.svg.render_many`` draws each SVG as ``dot`` draws it alone, so that cache changes no byte)."""
    import subprocess

    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True,
                          cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"make_assets {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def digests(names: list[str]) -> dict[str, str]:
    """Each asset's source digest, computed by the current code in one fresh process (the SVG cache emptied before
    each, so no asset's digest depends on what was drawn before it)."""
    return json.loads(_fresh("--digest", *names).strip().splitlines()[-1])


def _digests_here(names: list[str]) -> dict[str, str]:
    from simcache.render.svg import SVG_CACHE

    out = {}
    for n in names:
        SVG_CACHE.data.clear()
        out[n] = REGISTRY[n][3]()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help=f"assets to make (default: all of {', '.join(REGISTRY)})")
    ap.add_argument("--check", action="store_true", help="recompute each source digest and compare; write nothing")
    ap.add_argument("--digest", nargs="+", metavar="NAME", help=argparse.SUPPRESS)  # digests, in this process
    ap.add_argument("--one", metavar="NAME", help=argparse.SUPPRESS)  # make one asset in this process: JSON entry
    a = ap.parse_args(argv)
    unknown = [n for n in [*a.names, *(a.digest or ()), *filter(None, (a.one,))] if n not in REGISTRY]
    if unknown:
        print(f"make_assets: unknown asset {', '.join(unknown)}; choose from {', '.join(REGISTRY)}", file=sys.stderr)
        return 2
    if a.digest:
        print(json.dumps(_digests_here(a.digest)))
        return 0
    if a.one:
        what, inputs, make, _ = REGISTRY[a.one]
        files, source = make()
        print(json.dumps(dict(shows=what, inputs=inputs, files=files, source_sha256=source,
                              command=f"{COMMAND} {a.one}")))
        return 0
    manifest = read_manifest()
    names = a.names or list(REGISTRY)
    if a.check:
        now = digests(names)
        stale = [n for n in names if manifest.get(n, {}).get("source_sha256") != now[n]]
        for n in stale:
            print(f"assets/{n} is out of date: run {COMMAND} {n}", file=sys.stderr)
        return 1 if stale else 0
    ASSETS.mkdir(exist_ok=True)
    for n in names:
        manifest[n] = json.loads(_fresh("--one", n).strip().splitlines()[-1])
        print(f"assets/{n}: {len(manifest[n]['files'])} file(s)")
    with tempfile.NamedTemporaryFile("w", dir=ASSETS, delete=False, suffix=".json") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    Path(f.name).chmod(0o644)
    Path(f.name).replace(MANIFEST)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
