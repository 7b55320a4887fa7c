"""The memory limit: a run (a traced simulation, a search, a page build) may add at most ``memory_limit_mb`` to this
process's resident memory over what it held when the run started (``$SIMCACHE_MEMORY_LIMIT_MB``, default 4096); past
it, the run stops with a ``TraceLimitError`` sentence that says how to narrow it.

- **What is measured**: what the run *adds* (``MemoryWatch``), never the whole process: the interpreter and torch
  alone hold about 250 MB before anything runs, so a limit of the whole process would refuse a one-operation run.
- **One rule** for ``--memory-limit`` and ``$SIMCACHE_MEMORY_LIMIT_MB`` (``parse_memory_limit``): plain decimal
  megabytes (``2048``, ``0.5``, ``1e3``) above 0 and at most 1,048,576; words, NaN and infinities are refused. A
  number from the Python API (``check_memory_limit``) follows the same rule, ``0`` turning the limit off.
- **When it is checked**: after the first operation and every 64th, and inside an operation as soon as it touches
  many slots or tokens (``BIG``): one request of a million tokens is stopped inside itself, not after it.
"""
from __future__ import annotations

import math
import os
import re

from ..errors import ConfigError, shown
from .records import TraceLimitError

DEFAULT_MEMORY_LIMIT_MB = 4096
MAX_MEMORY_LIMIT_MB = 1 << 20  # a terabyte: beyond any machine this runs on
ENV = "SIMCACHE_MEMORY_LIMIT_MB"
BIG = 4096  # slots or tokens: an operation that moves this many is checked inside itself
_NUMBER = re.compile(r"(?:[0-9]{1,12}(?:\.[0-9]{0,12})?|\.[0-9]{1,12})(?:[eE][-+]?[0-9]{1,3})?")


def parse_memory_limit(text: str, source: str = "--memory-limit") -> float:
    """``--memory-limit`` or ``$SIMCACHE_MEMORY_LIMIT_MB`` (``source`` names which) as megabytes; one sentence
    otherwise, the same rule for both."""
    t = text.strip() if isinstance(text, str) else ""
    value = float(t) if _NUMBER.fullmatch(t) else math.nan
    if not 0 < value <= MAX_MEMORY_LIMIT_MB:
        said = text if isinstance(text, str) and text.isprintable() and 0 < len(text) <= 30 else shown(text, 30)
        example = "--memory-limit 2048" if source == "--memory-limit" else f"export {ENV}=4096, or unset it"
        raise ConfigError(f"{source} takes megabytes above 0 and at most {MAX_MEMORY_LIMIT_MB:,} (plain digits like "
                          f"2048, 0.5 or 1e3), not {said}; e.g. {example}")
    return value


def check_memory_limit(value, name: str = "memory_limit_mb") -> float:
    """A limit given to the Python API: megabytes above 0 and at most 1,048,576, or 0 for none (never NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            value == 0 or 0 < value <= MAX_MEMORY_LIMIT_MB):
        raise ConfigError(f"{name} must be megabytes above 0 and at most {MAX_MEMORY_LIMIT_MB:,} (or 0 for no limit), "
                          f"not {shown(value, 40)}; e.g. {name}=2048")
    return float(value)


def memory_limit() -> float:
    """The memory ceiling in MB: ``$SIMCACHE_MEMORY_LIMIT_MB`` or ``DEFAULT_MEMORY_LIMIT_MB``."""
    text = os.environ.get(ENV)
    if text is None:
        return float(DEFAULT_MEMORY_LIMIT_MB)
    return parse_memory_limit(text, f"the environment variable {ENV}")


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


class MemoryWatch:
    """What a run adds to the process's resident memory since the watch was made, against ``limit_mb`` (0: none)."""

    def __init__(self, limit_mb: float) -> None:
        self.limit_mb = limit_mb
        self.base = rss_mb() if limit_mb else None

    def over(self) -> tuple[float, float] | None:
        """(MB added, MB held now) when the run added more than the limit, else None."""
        if not self.limit_mb or self.base is None:
            return None
        used = rss_mb()
        if used is None or used - self.base <= self.limit_mb:
            return None
        return used - self.base, used

    def said(self, added: float, used: float) -> str:
        return (f"the memory limit of {self.limit_mb:,.0f} MB (it added {added:,.0f} MB to the {self.base:,.0f} MB "
                f"the process held when it started)")

    def check(self, what: str, fix: str) -> None:
        """Raise ``TraceLimitError``: ``{what} outgrew the memory limit ...; {fix}`` when over the limit."""
        got = self.over()
        if got is not None:
            raise TraceLimitError(f"{what} outgrew {self.said(*got)}; {fix}")


class MemoryLimit:
    """The recorder's memory check (a mixin of ``Ledger``: reads ``memory_limit_mb``, ``ops`` and ``_watch``)."""

    def _check_memory(self) -> None:
        watch = self._watch
        got = watch.over()
        if got is None:
            return
        k = self.ops[-1].index if self.ops else 0
        fix = (f"narrow it to fewer operations with --ops A:B (e.g. --ops {k // 2}:{k}), or raise the limit with "
               f"--memory-limit MB") if k > 0 else (
            "its set-up and operation 0 alone need more: raise the limit with --memory-limit MB, or make the "
            "scenario's pools or its first operation smaller")
        raise TraceLimitError(f"this run outgrew {watch.said(*got)} at operation {k}; {fix}")
