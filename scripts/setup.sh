#!/usr/bin/env bash
# Idempotent set-up shared by scripts/run.sh and scripts/test.sh.
# - .venv with Python 3.11+ and the project installed editable with its test extras
# - torch pinned to the local CPU wheel ON THE SAME pip LINE (otherwise pip picks a multi-GB CUDA build)
# - Debian packages graphviz (`dot`) and chromium, only when missing
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

TORCH_PIN="torch==2.13.0"
VENV=".venv"
STAMP="$VENV/.simcache-installed"

say() { echo "[setup] $*"; }
die() { echo "[setup] ERROR: $*" >&2; exit 1; }

# --- system packages -------------------------------------------------------
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"
        else
            die "need the Debian packages '${missing[*]}' but cannot install them (not root, no passwordless sudo): run 'sudo apt-get install -y ${missing[*]}' and retry."
        fi
    fi
    command -v apt-get >/dev/null 2>&1 || \
        die "need '${missing[*]}' but apt-get is not available: install them with your system's package manager and retry."
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
say "dot: $(dot -V 2>&1)"
say "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo 'version check failed')"

# --- virtual environment ---------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    PY=""
    if command -v python3.11 >/dev/null 2>&1 && python3.11 -c 'import sys' >/dev/null 2>&1; then
        PY=python3.11
    elif command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        PY=python3
    else
        die "Python 3.11 or newer is required (no python3.11, and python3 is older or missing)."
    fi
    say "creating $VENV with $PY ($($PY --version 2>&1))"
    "$PY" -m venv "$VENV"
    rm -f "$STAMP"
fi

# --- python packages (skipped when the stamp matches pyproject.toml) ----------
want="$(cat pyproject.toml <(echo "$TORCH_PIN") | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    say "python packages up to date ($STAMP)"
else
    say "installing $TORCH_PIN and simcache[test] into $VENV (first time takes a few minutes)"
    # (the grep drops pip's warnings about this machine's empty local index folders)
    quiet='is ignored: it is neither a file nor a directory'
    "$VENV/bin/python" -m pip install -q --upgrade pip 2> >(grep -v "$quiet" >&2)
    "$VENV/bin/pip" install -q "$TORCH_PIN" -e '.[test]' 2> >(grep -v "$quiet" >&2)
    echo "$want" > "$STAMP"
fi
say "torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
say "ready"
