"""A dependency-free progress line on stderr, shown only on a terminal or when asked for (``--progress``)."""
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
        self.enabled = self.stream.isatty() if enabled is None else enabled
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
        self.stream.write(f"\r{self.label}: {head}  {extra}  {rate:.0f}/s\033[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def progress_for(label: str, asked: bool = False) -> ProgressBar | None:
    """A bar when stderr is a terminal or ``asked``; else None (no output at all)."""
    bar = ProgressBar(label, enabled=asked or sys.stderr.isatty())
    return bar if bar.enabled else None
