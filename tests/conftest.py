"""Session-wide set-up. The levels page's two big levels (4 and 5: every reachable state, about 4 minutes of CPU
together) are built once per session, into the cache folder (``game_build.cached_level``), and when a test that
needs them is selected that build starts in a second process at collection, so it runs beside the tests that come
before (CI has two cores; pytest uses one). A test that needs a level waits for it (``prebuilt``); what it reads is
what the same simcache builds in the foreground, byte for byte (the cache folder's own tests check that)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

LEVELS = (4, 5)  # level 4 first: tests/test_core_exact_game_map.py reads it early in the session
USERS = {"big_page": (4, 5), "level_4": (4,)}  # fixtures that read them
_KEY = pytest.StashKey[subprocess.Popen]()


def _path(number: int):
    from simcache.game_build import cache_dir, fingerprint

    return cache_dir() / "game" / f"level{number}-{fingerprint()}.json.gz"


def pytest_collection_finish(session) -> None:
    wanted = {n for item in session.items for f in getattr(item, "fixturenames", ()) for n in USERS.get(f, ())}
    todo = [n for n in LEVELS if n in wanted and not _path(n).exists()]
    if session.config.option.collectonly or not todo:
        return
    code = f"from simcache.game_build import cached_level\nfor n in {todo!r}:\n    cached_level(n)\n"
    session.config.stash[_KEY] = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, preexec_fn=lambda: os.nice(5))


def prebuilt(config, number: int) -> None:
    """Wait until the background build has stored level ``number`` (or has ended: the caller then builds what is
    missing itself, as without it)."""
    proc = config.stash.get(_KEY, None)
    while proc is not None and proc.poll() is None and not _path(number).exists():
        time.sleep(0.2)


def pytest_unconfigure(config) -> None:
    proc = config.stash.get(_KEY, None)
    if proc is not None and proc.poll() is None:  # the session ended first (-x, a deselection): stop it
        proc.terminate()
        proc.wait()
