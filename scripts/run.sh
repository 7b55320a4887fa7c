#!/usr/bin/env bash
# bash scripts/run.sh [jupyter lab args...]   open the notebooks in JupyterLab (the default)
# bash scripts/run.sh --app [voila args...]   serve the walkthrough as a web app: outputs and widgets, no code
# bash scripts/run.sh --html                   render the walkthrough to build/walkthrough.html (headless)
# bash scripts/run.sh --help                   this help
# --no-setup (first) skips scripts/setup.sh, for a venv that is already set up.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    cat <<'TXT'
usage: bash scripts/run.sh [--no-setup] [--app | --html | --help] [args...]

  (no mode)   open the notebooks in JupyterLab; args go to `jupyter lab`
              (e.g. --no-browser --ip 127.0.0.1 --port 8888)
  --app       serve the walkthrough as a web app with Voila: each notebook's text,
              pictures and live widgets (the player, the tours, the game and its level
              menu), without the code cells. The first page describes the notebooks:
              open the printed address and pick one. args go to `voila`
              (e.g. --port 8866 --no-browser --Voila.ip=0.0.0.0 for a classroom network)
  --html      render the walkthrough to build/walkthrough.html (headless, no server);
              args go to `simcache export crash_pr`
  --help      print this help
  --no-setup  (before the mode) skip scripts/setup.sh: the .venv is already set up

Without Jupyter at all: `.venv/bin/python -m simcache export --game -o game.html` writes the
be-the-scheduler levels as one page that plays offline in a browser.
TXT
}

setup=1
if [ "${1:-}" = "--no-setup" ]; then
    setup=0
    shift
fi
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
esac
if [ "$setup" -eq 1 ]; then
    bash scripts/setup.sh
fi

if [ "${1:-}" = "--html" ]; then
    shift
    out="build/walkthrough.html"
    mkdir -p build
    echo "[run] rendering walkthrough"
    .venv/bin/python -m simcache export crash_pr -o "$out" "$@"
    echo "[run] wrote $(pwd)/$out"
    exit 0
fi

if [ "${1:-}" = "--app" ]; then
    shift
    if [ ! -x .venv/bin/voila ]; then
        echo "[run] Voila is not installed in .venv: run 'bash scripts/setup.sh' (it installs the project's dependencies, voila among them)" >&2
        exit 2
    fi
    # the first page describes the notebooks (simcache.app writes a Voila template, "simcache", into build/voila)
    .venv/bin/python -m simcache.app build/voila notebooks >/dev/null
    export JUPYTER_PATH="$(pwd)/build/voila${JUPYTER_PATH:+:$JUPYTER_PATH}"
    echo "[run] serving the walkthrough as an app (Voila) from notebooks/; Ctrl-C stops it"
    # the code cells are stripped (Voila's default); the kernels run in notebooks/, as in JupyterLab
    exec .venv/bin/voila notebooks/ --strip_sources=True --template=simcache "$@"
fi

extra=()
if [ "$(id -u)" -eq 0 ]; then
    extra+=(--allow-root)
fi
echo "[run] starting JupyterLab on notebooks/"
exec .venv/bin/jupyter lab notebooks/ "${extra[@]}" "$@"
