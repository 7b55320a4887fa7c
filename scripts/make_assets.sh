#!/usr/bin/env bash
# Regenerate the pictures in assets/ from the current code (and assets/manifest.json, which tests/test_assets.py
# checks): bash scripts/make_assets.sh [NAME ...]. Needs the venv (bash scripts/setup.sh), graphviz and, for the
# screenshots, Debian chromium at /usr/bin/chromium.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec .venv/bin/python tools/make_assets.py "$@"
