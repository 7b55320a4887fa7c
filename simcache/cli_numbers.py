"""The command line's words for a user's mistake and its numbers: ``UsageError`` (one sentence, exit status 2) and
plain, capped whole and decimal numbers. Its own module so that the explorer's command line (``explore/cli.py``)
uses them without importing ``cli``, which imports the explorer."""
from __future__ import annotations

import os
import re

from .errors import SimcacheError, shown


class UsageError(SimcacheError):
    pass


# --- numbers: plain ASCII decimals only (no '+5', '1_000', full-width digits, '1e3'), each with a cap --------------
MAX_JOBS = 64
LIMITS = {  # option -> (lowest, highest)
    "budget": (1, 10_000_000), "bound": (0, 10_000), "seed": (-(2**63), 2**63 - 1), "jobs": (1, MAX_JOBS),
    "streams": (1, 100_000), "requests": (1, 10_000),
}
MAX_WORKLOAD_TURNS = 20_000_000  # streams x requests x presets x pressures: hours of work beyond this
_WHOLE = re.compile(r"-?[0-9]{1,20}")
_DECIMAL = re.compile(r"-?(?:[0-9]{1,12}(?:\.[0-9]{0,12})?|\.[0-9]{1,12})(?:[eE][-+]?[0-9]{1,3})?")


def whole(option: str, text: str | int | None) -> int | None:
    """``text`` as a whole number within ``LIMITS[option]``, else one sentence naming the option."""
    if text is None or type(text) is int:
        value = text
    elif isinstance(text, str) and _WHOLE.fullmatch(text):
        value = int(text)
    else:
        value = None
    low, high = LIMITS[option]
    said = str(text) if str(text).isprintable() and len(str(text)) <= 30 else shown(text, 30)
    if value is None and isinstance(text, str) and text.isascii() and text.lstrip("-").isdigit():
        value = high + 1 if not text.startswith("-") else low - 1  # too many digits to be sensible
    span = "a whole number" + (f" >= {low}" if low > -1000 else "")
    if value is not None and value < low and low <= -1000:  # a minimum too long to state as ">= N" up front
        raise UsageError(f"--{option} {said} is under the minimum of {low:,}; give a whole number from {low:,} to "
                         f"{high:,}")
    if value is None and text is not None or value is not None and value < low:
        raise UsageError(f"--{option} must be {span}, not {said}; write plain digits like --{option} {max(low, 1)}")
    if value is not None and value > high:
        raise UsageError(f"--{option} {said} is over the limit of {high:,}; give a smaller number")
    return value


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def jobs(text: str | int | None) -> int | None:
    """``--jobs``: a whole number within the limits, or ``auto`` for every core this process may use."""
    if isinstance(text, str) and text.strip().lower() == "auto":
        return min(usable_cores(), LIMITS["jobs"][1])
    try:
        return whole("jobs", text)
    except UsageError as e:
        if isinstance(text, str) and text.isascii() and not text.lstrip("-").isdigit():
            raise UsageError(f"--jobs must be a whole number >= 1 or auto, not {shown(text, 30)}; write plain digits "
                             f"like --jobs 2, or --jobs auto for every core") from None
        raise e


def decimal(option: str, text: str) -> float:
    """``text`` as a plain decimal number (digits, a point, an exponent); refuses words, '_', non-ASCII digits."""
    t = text.strip()
    if _DECIMAL.fullmatch(t):
        return float(t)
    if t.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        return float(t)  # the range check names the allowed range
    raise UsageError(f"--{option} takes plain numbers like 0.5 1 2, not {shown(text, 30)}")
