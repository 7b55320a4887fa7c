#!/usr/bin/env bash
# Install what is needed, then run every test: unit tests in tests/ and the notebooks under nbmake.
# CI runs exactly this (see .ci/run).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh

status=0

echo "[test] pytest tests/"
.venv/bin/python -m pytest tests || status=$?
[ "$status" -eq 0 ] || echo "[test] tests/ FAILED (pytest exit $status)"

if [ -d notebooks ] && [ -n "$(find notebooks -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -print -quit)" ]; then
    echo "[test] pytest --nbmake notebooks/"
    nb_status=0
    .venv/bin/python -m pytest --nbmake --nbmake-timeout=600 notebooks/ || nb_status=$?
    if [ "$nb_status" -ne 0 ]; then
        echo "[test] notebooks FAILED (pytest exit $nb_status)"
        [ "$status" -ne 0 ] || status=$nb_status
    fi
else
    echo "[test] notebooks/*.ipynb are missing: the six guided notebooks must be there (FAILED)"
    [ "$status" -ne 0 ] || status=1
fi

if [ "$status" -eq 0 ]; then echo "[test] all passed"; else echo "[test] FAILED"; fi
exit "$status"
