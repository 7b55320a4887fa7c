"""How long the browser tests wait for a condition: a generous budget, scaled for a loaded machine.

A browser test never sleeps a fixed time and never asserts right after a click: it waits for the condition it
needs (Playwright's ``expect`` or ``wait_for_function``), for at most ``budget_ms(base)``. The budget is ``base``
seconds times a scale: ``SIMCACHE_WAIT_SCALE`` when set (CI on a slow runner), else the machine's load per core
(1-minute load average / cores), at least 1 and at most 8. A wait that succeeds returns as soon as the condition
holds, so a generous budget costs nothing on a quiet machine; it only stops a busy 2-core machine (JupyterLab,
a kernel and Chromium competing with other jobs) from failing a test that is merely slow.
"""
from __future__ import annotations

import os

# the base budgets, in seconds on an idle machine (already generous: every one of them normally takes < 2 s)
SERVER_START_S = 90.0  # JupyterLab answering /api/status
KERNEL_S = 120.0  # the kernel connected and idle
RUN_ALL_S = 180.0  # every cell of a notebook run
UI_S = 60.0  # one click's effect (a widget re-render, a page update)


def scale() -> float:
    raw = os.environ.get("SIMCACHE_WAIT_SCALE")
    if raw:
        try:
            return max(1.0, float(raw))
        except ValueError:
            raise ValueError(f"SIMCACHE_WAIT_SCALE must be a number, not {raw!r}") from None
    try:
        per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        per_core = 1.0
    return min(8.0, max(1.0, per_core))


def budget_s(base: float) -> float:
    return base * scale()


def budget_ms(base: float) -> int:
    return int(budget_s(base) * 1000)
