"""The memory limit: a recorder checks the process's memory as it goes and stops a run that outgrows
``memory_limit_mb`` (``$SIMCACHE_MEMORY_LIMIT_MB``, default 4096) with a ``TraceLimitError`` that says how to narrow
it."""
from __future__ import annotations

import os

from ..errors import ConfigError
from .records import TraceLimitError

DEFAULT_MEMORY_LIMIT_MB = 4096


def memory_limit() -> float:
    """The memory ceiling in MB: ``$SIMCACHE_MEMORY_LIMIT_MB`` or ``DEFAULT_MEMORY_LIMIT_MB``."""
    text = os.environ.get("SIMCACHE_MEMORY_LIMIT_MB")
    if text is None:
        return float(DEFAULT_MEMORY_LIMIT_MB)
    t = text.strip()
    value = float(t) if t.isascii() and t.replace(".", "", 1).isdigit() and len(t) <= 12 else 0.0
    if not 0 < value <= (1 << 20):
        raise ConfigError(f"the environment variable SIMCACHE_MEMORY_LIMIT_MB must be megabytes above 0 (plain "
                          f"digits, at most 1048576), not {text[:30]!r}; e.g. export SIMCACHE_MEMORY_LIMIT_MB=4096, "
                          f"or unset it")
    return value


def rss_mb() -> float | None:
    """This process's resident memory in MB (None where the platform does not say)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):
        try:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        except Exception:  # noqa: BLE001 -- no way to tell: no ceiling
            return None



class MemoryLimit:
    """The recorder's memory check (a mixin of ``Ledger``: reads ``memory_limit_mb`` and ``ops``)."""

    def _check_memory(self) -> None:
        used = rss_mb()
        if used is not None and self.memory_limit_mb and used > self.memory_limit_mb:
            k = self.ops[-1].index if self.ops else 0
            raise TraceLimitError(
                f"this run's trace outgrew the memory limit of {self.memory_limit_mb:.0f} MB at operation {k} "
                f"({used:.0f} MB in use); narrow it to fewer operations with --ops A:B "
                f"(e.g. --ops {k // 2}:{max(k, 1)}), "
                f"or raise the limit with --memory-limit MB")
