#!/usr/bin/env bash
# bash scripts/run.sh [jupyter lab args...]   open the notebooks in JupyterLab
# bash scripts/run.sh --html                   render the walkthrough to build/walkthrough.html (headless)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh

if [ "${1:-}" = "--html" ]; then
    shift
    out="build/walkthrough.html"
    mkdir -p build
    echo "[run] rendering walkthrough"
    .venv/bin/python -m simcache export crash_pr -o "$out" "$@"
    echo "[run] wrote $(pwd)/$out"
    exit 0
fi

extra=()
if [ "$(id -u)" -eq 0 ]; then
    extra+=(--allow-root)
fi
echo "[run] starting JupyterLab on notebooks/"
exec .venv/bin/jupyter lab notebooks/ "${extra[@]}" "$@"
