"""A dependency-free progress line on stderr, shown only on a terminal or when asked for (``--progress``).

The bar is decoration: a stderr that is closed, full or gone (``2>&-``, ``2>/dev/full``) turns it off silently and
never costs the result (``QuietStream`` does the same for the ``tqdm`` bar of a long run)."""
from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``bar(dict(runs=.., total=.., failing=..))`` redraws at most ten times a second; ``close()`` ends the line.

    With ``total`` a bar is drawn (``[#####.....]  512/1000``); without it, the counts alone. Wall time is read
    only to throttle drawing and to show the rate; it never reaches a result."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool | None = None,
                 width: int = 30) -> None:
        self.label, self.stream, self.width = label, stream or sys.stderr, width
        self.enabled = _isatty(self.stream) if enabled is None else enabled and self.stream is not None
        self.started, self._last = time.monotonic(), float("-inf")  # the first update is drawn at once
        self._drawn = False

    def __call__(self, info: dict) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        done, total = info.get("runs", 0), info.get("total")
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        rate = done / max(now - self.started, 1e-9)
        extra = "  ".join(f"{k} {v}" for k, v in info.items() if k not in ("runs", "total"))
        if total:
            filled = int(self.width * min(done, total) / total)
            head = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}"
        else:
            head = f"{done} runs"
        self._write(f"\r{self.label}: {head}  {extra}  {rate:.0f}/s\033[K")
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self._write("\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, full or gone: the bar stops, the run goes on
            self.enabled = False


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError, AttributeError):
        return False


def progress_for(label: str, asked: bool = False) -> ProgressBar | None:
    """A bar when stderr is a terminal or ``asked``; else None (no output at all)."""
    bar = ProgressBar(label, enabled=asked or _isatty(sys.stderr))
    return bar if bar.enabled else None


class QuietStream:
    """``stream`` (default: stderr at each write) for a progress bar: a write or flush that fails is dropped."""

    def __init__(self, stream=None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            (self._stream or sys.stderr).write(text)
        except (OSError, ValueError, AttributeError):
            pass
        return len(text)

    def flush(self) -> None:
        try:
            (self._stream or sys.stderr).flush()
        except (OSError, ValueError, AttributeError):
            pass

    def isatty(self) -> bool:
        return _isatty(self._stream or sys.stderr)
