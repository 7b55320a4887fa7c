"""The command line: ``python -m simcache run | scenarios | explore | export``.

Every simulated outcome exits 0 (a crash of the simulated cache is a result); a user's mistake prints one sentence
naming the problem and the fix on stderr and exits 2.
"""
from __future__ import annotations

import argparse
import errno
import json
import re
import sys
from collections.abc import Sequence

from .cli_commands import cmd_scenarios, cmd_workload
from .cli_numbers import LIMITS, MAX_JOBS, MAX_WORKLOAD_TURNS, UsageError, decimal, whole  # noqa: F401 -- re-exported
from .cli_output import _OUTPUT_ERRNOS, _SIGNED, _drop_stdout, _guard_signed, _say, one_line  # noqa: F401 -- re-exported
from .errors import OutputError, SimcacheError, shown
from .presets import ALL_PRESETS
from .transcript import transcript
from .versions import parse_flag
from .workload import WorkloadSpec

AGAINST_REAL_HELP = ("also run it on SGLang's own cache code and state the real outcome in the header: a release "
                     "(0.5.17: its wheel is fetched once into the cache folder), a checkout or unpacked wheel, or "
                     "'installed' (loading these files runs their code)")
DEVICE_HELP = ("where the device pools live: cpu (the default), cuda, cuda:N, or auto (cuda when available); "
               "the results are the same on each")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one sentence, exit status 2, no usage dump
        sub = self.prog.split()[1:]  # "simcache run" for a subcommand's parser, "simcache" for the top one
        raise UsageError(f"{message}; see `python -m simcache {sub[0] + ' ' if sub else ''}--help`")


def _flags(items: Sequence[str] | None) -> dict:
    return dict(parse_flag(t) for t in items or ())


def _preset(name: str | None) -> str | None:
    if name is not None and name not in ALL_PRESETS:
        raise UsageError(f"unknown preset {shown(name)}; choose one of {', '.join(ALL_PRESETS)}")
    return name


def _schedule(text: str | None) -> str | None:
    if text is not None and not text.strip():
        raise UsageError("--schedule is empty; give actor turns like 'R1 R2*2 ctl*', or leave it out for the "
                         "scenario's own schedule")
    return text


MAX_MEMORY_LIMIT_MB = 1 << 20  # a terabyte: beyond any machine this runs on
MAX_OP_NUMBER = 10**18 - 1  # --ops ends: 18 digits at most (a B past the run's end means "to the end")
_OPS = re.compile(r"(-?[0-9]*):([0-9]*)")


def _ops(text: str | None) -> tuple[int | None, int | None] | None:
    """``--ops A:B`` -> (A, B); either end may be left out (``100:``, ``:500``); plain ASCII digits only."""
    if text is None:
        return None
    m = _OPS.fullmatch(text.strip()) if text.isascii() else None
    if m is None:
        raise UsageError(f"--ops takes A:B (operation numbers from 0 in plain digits, B excluded), like --ops 0:500, "
                         f"not {shown(text, 30)}")
    if m.group(1).startswith("-"):
        t = text.strip()
        raise UsageError(f"--ops {t if len(t) <= 30 else shown(t, 30)} starts below 0: operations are numbered from "
                         f"0, like --ops 0:{m.group(2) or 500}")
    for end, digits in zip("AB", m.groups(), strict=True):
        if len(digits) > 18:
            raise UsageError(f"--ops {end} has {len(digits):,} digits, over the limit of 18 ({MAX_OP_NUMBER:,}); "
                             f"give a smaller number, or leave {end} out for the {'start' if end == 'A' else 'end'}")
    a, b = (int(g) if g else None for g in m.groups())
    return a, b


def _trace_options(a) -> dict:
    from .trace.memory import parse_memory_limit  # one rule for the flag and $SIMCACHE_MEMORY_LIMIT_MB

    text = getattr(a, "memory_limit", None)
    limit = None if text is None else parse_memory_limit(text, "--memory-limit")
    return dict(ops=_ops(getattr(a, "ops", None)), memory_limit_mb=limit,
                progress=True if getattr(a, "progress", False) else None)


def cmd_run(a) -> int:
    from .simulate import simulate

    # the transcript and the JSON need events only: no snapshots, no checkpoints for them
    run = simulate(a.scenario, _preset(a.preset), _flags(a.flag), _schedule(a.schedule), snapshots=False,
                   device=a.device, **_trace_options(a))
    real = _against_real(run, a)
    if a.json:
        print(json.dumps(run.to_json() if real is None else dict(run.to_json(), real=real[1]), indent=1))
    else:
        print(transcript(run) if real is None else f"{real[0]}\n{transcript(run)}")
    return 0


def _against_real(run, a) -> tuple[str, dict] | None:
    """``--against-real VERSION|PATH``: (the header line, the real result with its differing fields) or None."""
    word = getattr(a, "against_real", None)
    if word is None:
        return None
    from .presets import is_unified

    if is_unified(run.flags):
        from .real.unified.confirm import against_real_unified

        return against_real_unified(run, word)
    from .real.compare import against_real

    return against_real(run, word)


def cmd_export(a) -> int:
    from .simulate import simulate

    try:
        from .export import export_html
    except ImportError as e:  # pragma: no cover - the views may be missing in a partial install
        raise UsageError(f"the export view is not available ({e})") from None
    from .safe_io import check_file

    if a.game is not None:
        return _export_game(a)
    if a.scenario is None:
        raise UsageError("export needs a SCENARIO (a gallery name or a file), or --game for the levels page")
    if a.storyboard is not None and a.output is not None:
        raise UsageError("give either -o PAGE or --storyboard DIR, not both")
    a.output = "run.html" if a.output is None else a.output
    if a.compare is not None and a.preset:
        raise UsageError("give either --preset or --compare A,B, not both")
    tour = None
    if a.tour is not None:
        if a.compare is not None or a.storyboard is not None:
            raise UsageError("a tour steps through one run's page; give --tour without --compare or --storyboard")
        from .tour import load as load_tour

        try:
            tour = load_tour(a.tour)
        except SimcacheError as e:
            raise UsageError(str(e)) from None
    schedule, flags = _schedule(a.schedule), _flags(a.flag)
    try:
        if a.storyboard is not None:
            from .safe_io import check_folder

            check_folder(a.storyboard, ["comment.md"], what="--storyboard")  # a bad folder fails before the work
        else:
            check_file(a.output)  # a bad -o fails before the work
    except SimcacheError as e:
        raise UsageError(str(e)) from None
    if a.storyboard is not None:
        from .storyboard import write_storyboard

        runs = [simulate(a.scenario, n, flags, schedule, device=a.device, **_trace_options(a))
                for n in _compare_names(a.compare)] if a.compare is not None else \
            [simulate(a.scenario, _preset(a.preset), flags, schedule, device=a.device, **_trace_options(a))]
        real = _against_real(runs[0], a)
        written = write_storyboard(runs[0], a.storyboard, compare=runs[1] if len(runs) > 1 else None,
                                   **({} if real is None else {"header_note": real[0]}))
        for path in written.values():
            print(path)
        return 0
    if a.compare is not None:
        runs = [simulate(a.scenario, n, flags, schedule, device=a.device, **_trace_options(a))
                for n in _compare_names(a.compare)]
        real = _against_real(runs[0], a)
        path = export_html(runs[0], a.output, compare=runs[1], **({} if real is None else {"header_note": real[0]}))
    else:
        preset = _preset(a.preset) or (tour.preset if tour is not None else None)
        run = simulate(a.scenario, preset, flags, schedule, device=a.device, **_trace_options(a))
        real = _against_real(run, a)
        path = export_html(run, a.output, tour=tour, **({} if real is None else {"header_note": real[0]}))
    if str(path) != "-":  # with -o - the page itself went to stdout
        print(path)
    return 0


def _compare_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    if len(names) != 2 or not all(names):
        raise UsageError("--compare takes two presets separated by a comma, like pre_fix,followup_fix")
    for n in names:
        _preset(n)
    return names


def _export_game(a) -> int:
    """``export --game [LEVEL]``: the be-the-scheduler levels as one page that plays without a kernel."""
    from .game_map import game_page, parse_levels

    others = [n for n, v in (("SCENARIO", a.scenario), ("--preset", a.preset), ("--compare", a.compare),
                             ("--flag", a.flag), ("--schedule", a.schedule), ("--storyboard", a.storyboard),
                             ("--tour", a.tour)) if v]
    if others:
        raise UsageError(f"--game writes the levels page from the gallery; drop {', '.join(others)}")
    try:
        numbers = parse_levels(None if a.game == "all" else a.game)
        from .progress import QuietStream

        note = QuietStream()  # notes on stderr; a closed or full stderr never costs the page
        print(f"[export] precomputing level(s) {', '.join(map(str, numbers))}", file=note)
        path = game_page("game.html" if a.output is None else a.output, numbers,
                         say=lambda text: print(f"[export] {text}", file=note, flush=True))
    except OutputError:  # stdout (-o -) full or closed: exit status 1, not a usage error
        raise
    except SimcacheError as e:
        raise UsageError(str(e)) from None
    if str(path) != "-":
        print(path)
    return 0


def cmd_explore(a) -> int:
    try:
        from .explore import cli_explore
    except ImportError as e:  # pragma: no cover - the explorer may be missing in a partial install
        raise UsageError(f"the explore command is not available ({e})") from None

    return cli_explore(a)


def _trace_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ops", metavar="A:B", help="trace only operations A..B-1 (the ones before A still run, "
                                                "untraced); narrows a long run, e.g. --ops 0:500")
    p.add_argument("--memory-limit", metavar="MB", help="stop, with a message, a run (and its page) that adds "
                   "more than this many megabytes of memory (default $SIMCACHE_MEMORY_LIMIT_MB or 4096)")
    p.add_argument("--progress", action="store_true", help="always show a progress bar on stderr (default: "
                                                           "for long runs on a terminal)")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="simcache", description="A faithful, visual simulator of SGLang's HiMambaRadixCache and of the "
                 "UnifiedRadixCache that replaced it (the unified_* presets).")
    sub = ap.add_subparsers(dest="command", parser_class=_Parser)
    r = sub.add_parser("run", help="run a scenario and print what happened",
                       description="Run a scenario under a preset and print what happened: the transcript of each "
                                   "operation and the outcome, or one JSON object with --json.")
    r.add_argument("scenario", help="a gallery name (see `scenarios`) or a YAML/JSON file (the oracle's OPS.json too)")
    r.add_argument("--preset", help=f"one of {', '.join(ALL_PRESETS)} (default: the scenario's, else pre_fix)")
    r.add_argument("--flag", action="append", metavar="NAME=VALUE", help="override one flag (repeatable)")
    r.add_argument("--schedule", help="actor turns, e.g. 'R1 R2*2 ctl*' (default: the scenario's)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--device", default="cpu", help=DEVICE_HELP)
    r.add_argument("--against-real", metavar="VERSION|PATH", help=AGAINST_REAL_HELP)
    _trace_arguments(r)
    r.set_defaults(fn=cmd_run)
    s = sub.add_parser("scenarios", help="list the scenario gallery",
                       description="List the scenario gallery (HiMamba's, then the unified family's) with each "
                                   "scenario's expected outcome per preset.")
    s.add_argument("--json", action="store_true", help="print the list as JSON")
    s.set_defaults(fn=cmd_scenarios)
    e = sub.add_parser("export", help="write a self-contained HTML page of a run",
                       description="Write a self-contained HTML page of a run (it opens offline), two presets side "
                                   "by side (--compare), the game's levels page (--game) or a storyboard to paste "
                                   "into a pull-request comment (--storyboard).")
    e.add_argument("scenario", nargs="?", help="a gallery name or a YAML/JSON file (not with --game)")
    e.add_argument("--preset", help=f"one of {', '.join(ALL_PRESETS)}")
    e.add_argument("--compare", metavar="A,B", help="two presets side by side")
    e.add_argument("--flag", action="append", metavar="NAME=VALUE", help="override one flag (repeatable)")
    e.add_argument("--schedule", help="actor turns, e.g. 'R1 R2*2 ctl*'")
    e.add_argument("-o", "--output", default=None,
                   help="the page to write (default run.html, or game.html with --game); '-' writes it to stdout")
    e.add_argument("--storyboard", metavar="DIR",
                   help="instead of a page, write DIR: comment.md (the outcome table first) and at most three PNGs "
                        "(the divergence with --compare, went stale, the end), for a pull-request comment")
    e.add_argument("--game", nargs="?", const="all", metavar="LEVEL",
                   help="write the be-the-scheduler levels (all, or LEVEL 1-5, or a list like 2,4) as one page "
                        "that plays offline without a kernel; no SCENARIO")
    e.add_argument("--device", default="cpu", help=DEVICE_HELP)
    e.add_argument("--against-real", metavar="VERSION|PATH", help=AGAINST_REAL_HELP)
    e.add_argument("--tour", metavar="NAME|FILE",
                   help="add a predict-then-reveal tour (a gallery tour like crash_pr, or a tour file: docs/tours.md); "
                        "its preset is the default")
    _trace_arguments(e)
    e.set_defaults(fn=cmd_export)
    x = sub.add_parser("explore", help="search the schedules of a scenario for failing interleavings",
                       description="Search the interleavings of a scenario's actors for failures, shrink the first "
                                   "one found, and optionally confirm each on SGLang's own code (--confirm-real).")
    x.add_argument("scenario", help="a gallery name or a YAML/JSON file")
    x.add_argument("--preset", help=f"one of {', '.join(ALL_PRESETS)}")
    x.add_argument("--flag", action="append", metavar="NAME=VALUE", help="override one flag (repeatable)")
    x.add_argument("--strategy", default="exhaustive", choices=["exhaustive", "random", "pct"],
                   help="how schedules are chosen: exhaustive (the default: every one within --bound), random "
                        "(seeded draws, --budget of them, default 1000) or pct (PCT's priority draws)")
    x.add_argument("--bound", default=None, help="preemption bound (exhaustive, default 2; none with --reduce dpor) "
                                                 "/ depth (pct, default 3)")
    x.add_argument("--reduce", default="state", choices=["state", "none", "dpor"],
                   help="exhaustive only: 'state' (default) skips a prefix whose cache state was already searched; "
                        "'none' runs every schedule; 'dpor' searches every schedule (no bound) with sleep sets over "
                        "the operations' footprints plus state caching: the same outcomes, end states and damage "
                        "with fewer runs")
    x.add_argument("--seed", default="0", help="seed of the random and pct strategies")
    x.add_argument("--budget", default=None, help="most schedules to run (default 1000 for random and pct, "
                                                  "1,000,000 for exhaustive; at most 10,000,000)")
    x.add_argument("--shrink", action="store_true", help="shrink the first failure to a minimal case")
    x.add_argument("--out", help="folder for the schedule, shrunk scenario, JSON trace and pytest file")
    x.add_argument("--jobs", default="auto", help=f"worker processes (at most {MAX_JOBS}; never more than the cores; "
                                                  f"results identical to one process), or auto (the default): one "
                                                  f"per usable core for a random or pct search of 2,000 schedules "
                                                  f"or more, else one")
    x.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    x.add_argument("--json", action="store_true", help="print one JSON object")
    x.add_argument("--confirm-real", metavar="VERSION|PATH",
                   help="replay each failure found (after --shrink) on SGLang's own code (a release like 0.5.17, a "
                        "checkout or unpacked wheel, or 'installed'; loading its files runs their code) and mark it "
                        "confirmed or not reproduced (exit status 1 when one is not reproduced)")
    x.set_defaults(fn=cmd_explore)
    w = sub.add_parser("workload", help="crash rate per preset as host memory pressure rises",
                       description="Measure each preset's crash rate on seeded multi-turn chat workloads as host "
                                   "memory pressure rises.")
    w.add_argument("--presets", nargs="+", default=["pre_fix", "merged_fix", "followup_fix"],
                   help="presets to compare (rows of the table; default pre_fix merged_fix followup_fix)")
    w.add_argument("--pressures", nargs="+", default=["0.5", "1", "2", "4", "8"],
                   help="working set / host KV slots, each from 0.001 to 1000000 (columns of the table; default "
                        "0.5 1 2 4 8)")
    w.add_argument("--streams", default="50", help="request streams per preset and pressure (default 50, at most "
                                                         "100,000)")
    w.add_argument("--requests", default=str(WorkloadSpec.requests),
                   help=f"chat turns per stream (default {WorkloadSpec.requests}, at most 10,000)")
    w.add_argument("--seed", default="0", help="seed of the generated streams (default 0)")
    w.add_argument("--jobs", default="1", help="worker processes, or auto for one per usable core (default 1; "
                                               "results identical to serial)")
    w.add_argument("--signatures", action="store_true", help="also list what raised, per row")
    w.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    w.add_argument("--json", action="store_true", help="print the rows as JSON")
    w.set_defaults(fn=cmd_workload)
    from .real.cli import add_parser as add_real

    add_real(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 any outcome, 1 output failed, 2 bad input, 130 Ctrl-C)."""
    try:
        if sys.stdout is None or getattr(sys.stdout, "closed", False):
            print("simcache: standard output is closed, so the result cannot be shown; run it with stdout open "
                  "(or redirect it to a file)", file=sys.stderr)
            return 1
        ap = build_parser()
        a = ap.parse_args(_guard_signed(sys.argv[1:] if argv is None else list(argv)))
        if not getattr(a, "fn", None):
            raise UsageError("give a command: run, scenarios, explore, export or workload (see --help)")
        from .trace.memory import memory_limit

        memory_limit()  # a bad $SIMCACHE_MEMORY_LIMIT_MB is said before any work, in every command
        rc = a.fn(a)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not as a traceback at exit
        return rc
    except OutputError as e:  # the page or result could not go to stdout (-o -): as for print's output below
        _drop_stdout()
        if e.errno == errno.EPIPE:  # the reader went away (``| head``): not an error of ours, say nothing
            return 0
        _say(one_line(str(e)))
        return 1
    except SimcacheError as e:
        msg = one_line(str(e))
        _say(f"{msg[0].lower() + msg[1:] if msg else 'bad input'}")
        return 2
    except KeyboardInterrupt:
        _say("interrupted (Ctrl-C); nothing was written")
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): not an error of ours, say nothing
        _drop_stdout()
        return 0
    except OSError as e:
        if e.filename is not None or e.errno not in _OUTPUT_ERRNOS:
            raise
        _drop_stdout()
        _say(f"cannot write the output: {e.strerror or e}; free some space or write it elsewhere")
        return 1


if __name__ == "__main__":
    sys.exit(main())
