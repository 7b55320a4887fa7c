"""Write every command's ``--help`` into docs/cli.md's "Every option" section (between its markers), so the
reference there is the parser's own text. ``tests/test_core_exact_cli.py`` checks the two agree; run this after
changing an option: ``.venv/bin/python scripts/cli_help.py``."""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli.md"
BEGIN, END = "<!-- every option: begin (scripts/cli_help.py writes this) -->", "<!-- every option: end -->"
COMMANDS = ("run", "scenarios", "export", "explore", "workload", "real")
WIDTH = "100"  # argparse wraps at $COLUMNS; the docs are written at this width


def help_text(command: str | None) -> str:
    """``python -m simcache [COMMAND] --help`` as argparse writes it at the docs' width."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from simcache.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parser = build_parser()
        if command is None:
            return parser.format_help()
        sub = next(a for a in parser._subparsers._group_actions if a.dest == "command")
        return sub.choices[command].format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def python_line() -> str:
    """The line naming the Python the section was written with (argparse's layout differs by version)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return f"Written with Python {version}; argparse's layout differs by version."


def section() -> str:
    parts = [BEGIN, "", python_line(), ""]
    for command in (None, *COMMANDS):
        title = "python -m simcache --help" if command is None else f"python -m simcache {command} --help"
        parts += [f"`{title}`:", "", "```", help_text(command).rstrip("\n"), "```", ""]
    return "\n".join(parts + [END])


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{DOC} has no 'every option' markers; add the two lines {BEGIN!r} and {END!r} where the section goes",
              file=sys.stderr)
        return 2
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(head + section() + tail, encoding="utf-8")
    print(f"wrote the options of {len(COMMANDS)} commands into {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
