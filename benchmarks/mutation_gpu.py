"""Mutants only a GPU reaches, tested on a machine with CUDA (not in CI): the CUDA half of a kept mutation copy.

    python benchmarks/mutation_gpu.py build/mutation/simcache_streams.py --only '*CudaStreams*' [--jobs 8]

``benchmarks/mutation.py MODULE --keep`` leaves mutmut's copy of the project in ``build/mutation/<module>``: its
``mutants/`` folder holds the module with every mutant behind mutmut's trampolines, which run the mutant that the
``MUTANT_UNDER_TEST`` variable names. Some code runs only where CUDA is present (``CudaStreams``, the ``cuda``
branches of ``resolve_device``), so on a machine without a GPU no test reaches its mutants. mutmut itself cannot
test them on a GPU machine either: it runs the tests once in its own process, then forks a child per mutant, and a
process forked after CUDA has started cannot use CUDA. So this script tests each chosen mutant in a fresh Python
process: pytest over the module's selection in ``benchmarks/mutation.py`` with ``tests/test_gpu.py`` first,
stopping at the first failure. mutmut must be importable (its trampolines import it), nothing else of it runs.

By default only the mutants the CPU run left unkilled are tested (the copy's ``mutation-status.json``, or every
mutant when the copy has none; ``--all`` tests every one), and the report joins the two: a mutant is killed when a
test on either machine fails on it. First the copy runs unmutated and must pass, with the CUDA tests run (not
skipped); otherwise nothing is scored. A mutant whose run fails is killed; one that outlasts ``--mutant-timeout``
counts as killed, as mutmut counts a timeout. It writes each mutant's status and the test that killed it to
``--out`` (JSON) and a summary on stdout.
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutation import MODULES, UNKILLED  # noqa: E402

DEF = re.compile(r"^\s*def ((?:x_|xǁ)[^\s(]+__mutmut_\d+)\(", re.M)


def mutant_names(mutants: Path, module: str) -> list[str]:
    """Every mutant of ``module`` in mutmut's copy, as ``MUTANT_UNDER_TEST`` names them (``pkg.mod.x_fn__mutmut_3``)."""
    dotted = module.removesuffix(".py").replace("/", ".")
    return [f"{dotted}.{name}" for name in DEF.findall((mutants / module).read_text(encoding="utf-8"))]


def run_tests(mutants: Path, tests: list[str], mutant: str, timeout_s: float) -> tuple[str, float, str, str]:
    """(status, seconds, the first failing test or the summary line, the output) of the selection with ``mutant``
    active."""
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant, "PYTHONPATH": os.pathsep.join(
        [str(mutants), *filter(None, [os.environ.get("PYTHONPATH")])])}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-x", "-rfEs", "-p", "no:cacheprovider", *tests],
                            cwd=mutants, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", time.monotonic() - t0, f"still running after {timeout_s:.0f} s", ""
    seconds = time.monotonic() - t0
    if proc.returncode == 0:
        return "survived", seconds, out.strip().splitlines()[-1] if out.strip() else "", out
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)
    return "killed", seconds, failed[0] if failed else f"exit {proc.returncode}: {out.strip()[-300:]}", out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kept", help="a copy kept by benchmarks/mutation.py --keep (build/mutation/simcache_streams.py)")
    ap.add_argument("--module", default="simcache/streams.py", choices=sorted(MODULES),
                    help="the module that copy mutates (default simcache/streams.py)")
    ap.add_argument("--only", action="append", default=[], metavar="GLOB",
                    help="test only the mutants whose names match GLOB (fnmatch; repeatable); default: all")
    ap.add_argument("--all", action="store_true",
                    help="test every mutant, not only those the CPU run left unkilled")
    ap.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) - 2)),
                    help="mutants tested at once, each in its own process (default: cores - 2, at most 8)")
    ap.add_argument("--mutant-timeout", type=float, default=0,
                    help="seconds one mutant's run may take (default: 3 x the unmutated run + 30)")
    ap.add_argument("--budget", type=float, default=0,
                    help="stop starting mutants after this many seconds (default 0: no limit); the rest are "
                         "reported as not checked")
    ap.add_argument("--out", default="build/mutation_gpu.json", help="where to write the statuses (JSON)")
    ap.add_argument("--without-cuda", action="store_true",
                    help="run even without CUDA, to try the script: the CUDA tests then skip, so the result says "
                         "nothing about the CUDA code")
    args = ap.parse_args(argv)
    mutants = Path(args.kept) / "mutants"
    if not (mutants / args.module).is_file():
        print(f"no mutmut copy of {args.module} under {mutants}; make one with "
              f"benchmarks/mutation.py {args.module} --keep", file=sys.stderr)
        return 2
    if args.jobs < 1 or args.mutant_timeout < 0 or args.budget < 0:
        print("--jobs must be at least 1, and --mutant-timeout and --budget not negative", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available() and not args.without_cuda:
        print("this machine has no CUDA, so the mutants' CUDA code would not run; run this on a GPU machine "
              "(or pass --without-cuda to try the script)", file=sys.stderr)
        return 2
    if importlib.util.find_spec("mutmut") is None:
        print("mutmut is not importable here (its trampolines import it); pip install mutmut, or put a copy of "
              "its package on PYTHONPATH", file=sys.stderr)
        return 2
    tests = ["tests/test_gpu.py", *MODULES[args.module]]
    saved = Path(args.kept) / "mutation-status.json"
    cpu = json.loads(saved.read_text()) if saved.is_file() else {}
    every = mutant_names(mutants, args.module)
    names = [n for n in every if (args.all or cpu.get(n, "survived") in (*UNKILLED, "not checked", "segfault"))
             and (not args.only or any(fnmatch.fnmatch(n, p) for p in args.only))]
    print(f"{len(names)} mutants of {args.module}; {args.jobs} at a time; tests: {' '.join(tests)}", flush=True)
    status, seconds, detail, out = run_tests(mutants, tests, "", 3600)
    skips = re.findall(r"^SKIPPED .*$", out, re.M)
    print(f"unmutated: {detail} in {seconds:.0f} s", *skips, sep="\n", flush=True)
    if status != "survived":
        print(f"the unmutated copy does not pass its tests here ({detail}); nothing is scored", file=sys.stderr)
        return 1
    if torch.cuda.is_available() and any("needs CUDA" in s for s in skips):
        print("the GPU tests skipped although CUDA is present; nothing is scored", file=sys.stderr)
        return 1
    limit = args.mutant_timeout or 3 * seconds + 30
    t0 = time.monotonic()
    results: dict[str, dict] = {}

    def one(name: str) -> None:
        if args.budget and time.monotonic() - t0 > args.budget:
            results[name] = dict(status="not checked", seconds=0, detail=f"past --budget {args.budget:.0f} s")
            return
        s, sec, why, _ = run_tests(mutants, tests, name, limit)
        results[name] = dict(status=s, seconds=round(sec, 1), detail=why)
        print(f"  {len(results)}/{len(names)} {name}: {s} ({why}, {sec:.0f} s)", flush=True)

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, names))
    killed = sum(r["status"] in ("killed", "timeout") for r in results.values())
    survived = sorted(n for n, r in results.items() if r["status"] == "survived")
    both = {n: "killed" if cpu.get(n) in ("killed", "timeout") or results.get(n, {}).get("status") in (
        "killed", "timeout") else results.get(n, {}).get("status") or cpu.get(n, "not checked") for n in every}
    joined = dict(killed=sum(v == "killed" for v in both.values()),
                  unkilled=sorted(n for n, v in both.items() if v in UNKILLED),
                  not_checked=sorted(n for n, v in both.items() if v not in ("killed", *UNKILLED)))
    report = dict(module=args.module, tests=tests, cuda=torch.cuda.is_available(),
                  device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                  unmutated_seconds=round(seconds, 1), mutants=len(names), killed=killed, survived=len(survived),
                  not_checked=sum(r["status"] == "not checked" for r in results.values()),
                  survivors=survived, results=dict(sorted(results.items())), with_the_cpu_run=joined,
                  seconds=round(time.monotonic() - t0, 1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(f"{killed}/{killed + len(survived)} killed on {report['device']} in {report['seconds']} s; "
          f"survivors: {', '.join(survived) or 'none'}", flush=True)
    if cpu:
        print(f"with the CPU run: {joined['killed']}/{joined['killed'] + len(joined['unkilled'])} of {len(every)} "
              f"mutants killed ({len(joined['not_checked'])} not checked)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
