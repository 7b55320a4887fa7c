"""Two error voices.

- ``CacheAssertion``: an assertion of the *simulated* SGLang cache (same message text as SGLang). It is caught at
  the operation boundary and reported as an outcome, never raised out of the public API.
- ``SimcacheError`` and its subclasses: a user's mistake (bad scenario, schedule, flag, argument). The message is
  one sentence that names the problem and says how to fix it.
"""
from __future__ import annotations


class CacheAssertion(AssertionError):
    """An assertion inside the simulated cache (SGLang's ``assert``), reported as ``AssertionError: <msg>``."""


class SimcacheError(Exception):
    """A user's mistake; the message says how to fix it."""


class ConfigError(SimcacheError):
    """A cache configuration, preset or flag that does not exist or does not fit."""


class ScenarioError(SimcacheError):
    """A scenario file or operation list that is malformed."""


class ScheduleError(SimcacheError):
    """A schedule string that names unknown actors or cannot be replayed."""


class ArgumentError(SimcacheError):
    """An argument of the Python API with the wrong type or value (``teach.show("crash_pr")``, ``tree_text(None)``)."""


class FileError(SimcacheError):
    """A path that cannot be read or written as asked (a folder, a device, a missing folder, a full disk)."""


class OutputError(FileError):
    """Standard output could not be written (full, closed): the command line exits 1, as for its own output."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class UnreadableFile(FileError, ScenarioError):
    """A scenario file that cannot be read: missing, not a regular file, too large."""


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters so a huge bad value is not echoed back whole."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit limit for str()
        return f"a number of {value.bit_length():,} bits" if isinstance(value, int) else type(value).__name__
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
