"""The command line: ``python -m simcache run | scenarios | explore | export``.

Every simulated outcome exits 0 (a crash of the simulated cache is a result); a user's mistake prints one sentence
naming the problem and the fix on stderr and exits 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .errors import SimcacheError
from .versions import PRESET_DESCRIPTIONS, PRESETS, parse_flag


class UsageError(SimcacheError):
    pass


DEVICE_HELP = ("where the device pools live: cpu (the default), cuda, cuda:N, or auto (cuda when available); "
               "the results are the same on each")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one sentence, exit status 2, no usage dump
        sub = self.prog.split()[1:]  # "simcache run" for a subcommand's parser, "simcache" for the top one
        raise UsageError(f"{message}; see `python -m simcache {sub[0] + ' ' if sub else ''}--help`")


def _flags(items: Sequence[str] | None) -> dict:
    return dict(parse_flag(t) for t in items or ())


def _preset(name: str | None) -> str | None:
    if name is not None and name not in PRESETS:
        raise UsageError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return name


STATUS_KEY = (". applied", "x raised (the simulated cache's assertion)", "- nothing to do",
              "e no room even after eviction", "u allocation failed", "r prefetch: nothing left to fetch",
              "f prefetch refused")
EVENT_KEY = ("! a node went stale or a detached node was re-admitted", "+ a stale guard cleaned a node up",
             "~ the first invariant violation")


def _damage(double_frees, leaked: dict) -> list[str]:
    return [f"double free {pool}{list(slots)}" for pool, slots in double_frees] + \
        [f"leaked {pool}{list(slots)}" for pool, slots in leaked.items() if slots]


def transcript(run) -> str:
    """A human transcript: operations, went-stale and cleaned-up moments, first violation, outcome and damage
    (what the run left broken), then the raising call stack frame by frame, and a key to the symbols."""
    t, lines = run.trace, []
    sc = run.scenario
    lines.append(f"{sc.name} under {run.preset}  (schedule: {run.schedule})")
    events: dict[int, list[str]] = {}
    for e in t.went_stale:
        events.setdefault(t.steps[e.step].op, []).append(
            f"   ! node {e.node} [{e.key}] went stale (step {e.step}); still held by {', '.join(e.holders)}")
    for e in t.readmitted:
        events.setdefault(t.steps[e.step].op, []).append(
            f"   ! detached node {e.node} [{e.key}] re-admitted to {', '.join(e.holders)} (step {e.step})")
    for e in t.cleaned_up:
        events.setdefault(t.steps[e.step].op, []).append(
            f"   + stale guard cleaned up node {e.node} [{e.key}] (step {e.step}): removed from "
            f"{', '.join(e.removed) or 'nothing'}")
    if t.violations:
        v = t.violations[0]
        events.setdefault(v.op, []).append(
            f"   ~ first invariant violation: {v.invariant}: {v.message} (step {v.step})")
    from .trace import describe_op

    for rec in t.ops:
        who = f"{rec.actor}: " if rec.actor else ""
        lines.append(f"{rec.index:3d} {rec.status} {who}{describe_op(rec.op)}")
        lines.extend(events.get(rec.index, []))
    r = run.result
    damage = _damage([(d["pool"], d["slots"]) for d in r["double_frees"]],
                     {p: a["leaked"] for p, a in r["accounting"].items()})
    if run.crash is not None:
        c = run.crash
        lines.append(f"outcome: {c.type}: {c.message}  (raised in {c.function})")
        if damage:
            lines.append("damage: " + "; ".join(damage))
    else:  # "clean" read wrongly above a double free: say what did not happen, then what broke anyway
        lines.append("outcome: no assertion; " + ("damage: " + "; ".join(damage) if damage else "no damage"))
    if run.crash is not None and run.crash.stack:
        lines.append("traceback, outermost call first:")
        lines += [f"  {'  ' * i}{fn}()" for i, fn in enumerate(run.crash.stack)]
        lines.append(f"  {'  ' * len(run.crash.stack)}{run.crash.type}: {run.crash.message}")
    used = set(t.ops and "".join(o.status for o in t.ops))
    key = [k for k in STATUS_KEY if k[0] in used]
    marks = [k for k in EVENT_KEY if any(line.startswith(f"   {k[0]} ") for line in lines)]
    lines.append("key: " + "; ".join(key + marks))
    return "\n".join(lines)


def _ops(text: str | None) -> tuple[int | None, int | None] | None:
    """``--ops A:B`` -> (A, B); either end may be left out (``100:``, ``:500``)."""
    if text is None:
        return None
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        a, b = (int(p) if p.strip() else None for p in parts)
    except ValueError:
        raise UsageError(f"--ops takes A:B (operation numbers, B excluded), like --ops 0:500, not {text!r}") from None
    if (a is not None and a < 0) or (b is not None and b < 0):
        raise UsageError(f"--ops takes operation numbers from 0, like --ops 0:500, not {text!r}")
    return a, b


def _trace_options(a) -> dict:
    limit = getattr(a, "memory_limit", None)
    if limit is not None and not limit > 0:
        raise UsageError(f"--memory-limit takes megabytes above 0, like --memory-limit 2048, not {limit}")
    return dict(ops=_ops(getattr(a, "ops", None)), memory_limit_mb=limit,
                progress=True if getattr(a, "progress", False) else None)


def cmd_run(a) -> int:
    from .simulate import simulate

    # the transcript and the JSON need events only: no snapshots, no checkpoints for them
    run = simulate(a.scenario, _preset(a.preset), _flags(a.flag), a.schedule, snapshots=False, device=a.device,
                   **_trace_options(a))
    if a.json:
        print(json.dumps(run.to_json(), indent=1))
    else:
        print(transcript(run))
    return 0


def cmd_scenarios(a) -> int:
    from .scenario import gallery, load

    items = []
    for name in gallery():
        sc = load(name)
        items.append(dict(name=name, title=sc.title, reference=sc.reference, schedule=sc.schedule,
                          expect={p: e.get("outcome") for p, e in sc.expect.items()},
                          damage={p: _damage(e.get("double_frees") or [], e.get("leaked") or {})
                                  for p, e in sc.expect.items()}))
    if a.json:
        print(json.dumps(items, indent=1))
    else:
        width = max(len(i["name"]) for i in items) + 2
        for it in items:
            print(f"{it['name']:<{width}} {it['title']}")
            for p, o in it["expect"].items():  # the outcome, and what a clean-looking run still broke
                hurt = it["damage"].get(p)
                what = "assertion" if o == "assertion" else "no assertion"
                print(f"{'':{width}} {p:<13} {what}" + (f"; damage: {'; '.join(hurt)}" if hurt else ""))
        print("\npresets: " + "; ".join(f"{p} = {d}" for p, d in PRESET_DESCRIPTIONS.items()))
    return 0


def cmd_export(a) -> int:
    from .simulate import simulate

    try:
        from .export import export_html
    except ImportError as e:  # pragma: no cover - the views may be missing in a partial install
        raise UsageError(f"the export view is not available ({e})") from None
    if a.compare and a.preset:
        raise UsageError("give either --preset or --compare A,B, not both")
    if a.compare:
        names = [n.strip() for n in a.compare.split(",")]
        if len(names) != 2:
            raise UsageError("--compare takes two presets separated by a comma, like pre_fix,followup_fix")
        runs = [simulate(a.scenario, _preset(n), _flags(a.flag), a.schedule, device=a.device, **_trace_options(a))
                for n in names]
        path = export_html(runs[0], a.output, compare=runs[1])
    else:
        path = export_html(simulate(a.scenario, _preset(a.preset), _flags(a.flag), a.schedule, device=a.device,
                                    **_trace_options(a)), a.output)
    print(path)
    return 0


def cmd_explore(a) -> int:
    try:
        from .explore import cli_explore
    except ImportError as e:  # pragma: no cover - the explorer may be missing in a partial install
        raise UsageError(f"the explore command is not available ({e})") from None

    return cli_explore(a)


def cmd_workload(a) -> int:
    from .explore.progress import progress_for
    from .versions import PRESETS as known
    from .workload import WorkloadSpec, crash_rates, table

    bad = [p for p in a.presets if p not in known]
    if bad:
        raise UsageError(f"unknown preset(s) {', '.join(bad)}; choose from {', '.join(known)}")
    if a.streams < 1 or a.requests < 1:
        raise UsageError("--streams and --requests must be at least 1")
    bar = progress_for("workload", a.progress)
    try:
        rows = crash_rates(a.presets, a.pressures, a.streams, a.seed, a.jobs, WorkloadSpec(requests=a.requests), bar)
    finally:
        if bar is not None:
            bar.close()
    print(json.dumps(rows, indent=1) if a.json else table(rows))
    return 0


def _trace_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ops", metavar="A:B", help="trace only operations A..B-1 (the ones before A still run, "
                                                "untraced); narrows a long run, e.g. --ops 0:500")
    p.add_argument("--memory-limit", type=float, metavar="MB", help="stop, with a message, a run whose trace "
                   "outgrows this many megabytes (default $SIMCACHE_MEMORY_LIMIT_MB or 4096)")
    p.add_argument("--progress", action="store_true", help="always show a progress bar on stderr (default: "
                                                           "for long runs on a terminal)")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="simcache", description="A faithful, visual simulator of SGLang's HiMambaRadixCache.")
    sub = ap.add_subparsers(dest="command", parser_class=_Parser)
    r = sub.add_parser("run", help="run a scenario and print what happened")
    r.add_argument("scenario", help="a gallery name (see `scenarios`) or a YAML/JSON file (the oracle's OPS.json too)")
    r.add_argument("--preset", help=f"one of {', '.join(PRESETS)} (default: the scenario's, else pre_fix)")
    r.add_argument("--flag", action="append", metavar="NAME=VALUE", help="override one flag (repeatable)")
    r.add_argument("--schedule", help="actor turns, e.g. 'R1 R2*2 ctl*' (default: the scenario's)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--device", default="cpu", help=DEVICE_HELP)
    _trace_arguments(r)
    r.set_defaults(fn=cmd_run)
    s = sub.add_parser("scenarios", help="list the scenario gallery")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_scenarios)
    e = sub.add_parser("export", help="write a self-contained HTML page of a run")
    e.add_argument("scenario")
    e.add_argument("--preset")
    e.add_argument("--compare", metavar="A,B", help="two presets side by side")
    e.add_argument("--flag", action="append", metavar="NAME=VALUE")
    e.add_argument("--schedule")
    e.add_argument("-o", "--output", default="run.html")
    e.add_argument("--device", default="cpu", help=DEVICE_HELP)
    _trace_arguments(e)
    e.set_defaults(fn=cmd_export)
    x = sub.add_parser("explore", help="search the schedules of a scenario for failing interleavings")
    x.add_argument("scenario")
    x.add_argument("--preset")
    x.add_argument("--flag", action="append", metavar="NAME=VALUE")
    x.add_argument("--strategy", default="exhaustive", choices=["exhaustive", "random", "pct"])
    x.add_argument("--bound", type=int, default=None, help="preemption bound (exhaustive) / depth (pct)")
    x.add_argument("--seed", type=int, default=0)
    x.add_argument("--budget", type=int, default=None, help="most schedules to run")
    x.add_argument("--shrink", action="store_true", help="shrink the first failure to a minimal case")
    x.add_argument("--out", help="folder for the schedule, shrunk scenario, JSON trace and pytest file")
    x.add_argument("--jobs", type=int, default=1, help="worker processes")
    x.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    x.add_argument("--json", action="store_true")
    x.set_defaults(fn=cmd_explore)
    w = sub.add_parser("workload", help="crash rate per preset as host memory pressure rises")
    w.add_argument("--presets", nargs="+", default=["pre_fix", "merged_fix", "followup_fix"])
    w.add_argument("--pressures", nargs="+", type=float, default=[0.5, 1, 2, 4, 8],
                   help="working set / host KV slots")
    w.add_argument("--streams", type=int, default=50, help="request streams per preset and pressure")
    w.add_argument("--requests", type=int, default=64, help="chat turns per stream")
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--jobs", type=int, default=1, help="worker processes (results identical to serial)")
    w.add_argument("--progress", action="store_true")
    w.add_argument("--json", action="store_true")
    w.set_defaults(fn=cmd_workload)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    try:
        a = ap.parse_args(argv)
        if not getattr(a, "fn", None):
            raise UsageError("give a command: run, scenarios, explore, export or workload (see --help)")
        return a.fn(a)
    except SimcacheError as e:
        msg = str(e)
        print(f"simcache: {msg[0].lower() + msg[1:] if msg else 'bad input'}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("simcache: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
