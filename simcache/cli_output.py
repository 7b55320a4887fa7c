"""What the command line prints when things go wrong: one printable line on stderr, stdout dropped when it cannot be
written, and the argument guard for signed numbers; moved out of ``cli.py``, which re-exports them."""
from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Sequence

# what print() to a full disk, a closed descriptor or a failing device raises (no file name: it is stdout)
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EBADF, errno.EIO, errno.EFBIG, errno.EDQUOT, errno.EINVAL}
_SIGNED = re.compile(r"-(?:inf|infinity|nan|[0-9.]+[eE][-+]?[0-9]+|[0-9]*:[0-9]*)", re.IGNORECASE)


def _guard_signed(argv: Sequence[str]) -> list[str]:
    """argparse takes ``-inf``, ``-1e3`` or ``-1:3`` for an option name; a leading space makes it a value (checked
    later)."""
    return [" " + t if isinstance(t, str) and _SIGNED.fullmatch(t) else t for t in argv]


def one_line(text: str, word: int = 200) -> str:
    """``text`` as one printable line: control characters escaped, any word over ``word`` characters cut."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return re.sub(rf"\S{{{word + 1},}}", lambda m: f"{m.group()[:40]}... ({len(m.group()):,} characters)", text)


def _say(sentence: str) -> None:
    if sys.stderr is None:  # started with stderr closed: print(file=None) would write to stdout
        return
    try:
        print(f"simcache: {sentence}", file=sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush of unwritable output raises nothing more."""
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
