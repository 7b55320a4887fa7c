"""Mutation testing as a benchmark-style command (not in CI): how many small deliberate bugs the tests catch.

    python benchmarks/mutation.py [MODULE ...] [--out build/mutation.json] [--max-children 2]

For each module (default: every one in ``MODULES``) it copies the project into a temporary folder, writes a
``[mutmut]`` section that mutates only that module and runs only the tests that exercise it (the fast, targeted
selection in ``MODULES``: a full-suite run per mutant does not fit a shared 2-core machine), runs ``mutmut run``
under ``nice``, and reads every mutant's status back with ``mutmut results --all true``. It writes, per module,
the score (killed / (killed + survived); timeouts count as killed, as mutmut does) and the surviving mutants'
names and diffs, to ``--out`` (JSON) and as a table on stdout. Survivors are either killed by a new test or
listed in the README's benchmarks section with why they are equivalent.

Targets (issue 19): >= 90% killed in simcache/ core modules, >= 80% in render/ and export.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# module -> the tests that exercise it (targeted, so one mutant's run takes seconds)
MODULES = {
    "simcache/versions.py": ["tests/test_flags.py", "tests/test_parse_flag_table.py", "tests/test_race_property.py"],
    "simcache/evict_host.py": ["tests/test_flags.py", "tests/test_eviction.py", "tests/test_followup_unit.py",
                               "tests/test_race_property.py"],
    "simcache/evict_device.py": ["tests/test_flags.py", "tests/test_eviction.py", "tests/test_race_property.py"],
    "simcache/cache.py": ["tests/test_flags.py", "tests/test_tree.py", "tests/test_eviction.py"],
    "simcache/lru.py": ["tests/test_lru.py", "tests/test_eviction.py"],
    "simcache/explore/shrink.py": ["tests/test_explore.py", "tests/test_minimality.py"],
    "simcache/explore/shrink_passes.py": ["tests/test_explore.py", "tests/test_minimality.py"],
    "simcache/trace.py": ["tests/test_trace.py", "tests/test_render.py"],
    "simcache/render/dot.py": ["tests/test_render.py"],
    "simcache/export.py": ["tests/test_render.py", "tests/test_export_browser.py"],
}
COPY = ("simcache", "tests", "pyproject.toml", "README.md")


def run_module(module: str, tests: list[str], max_children: int, timeout_s: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="simcache-mutation-") as tmp:
        work = Path(tmp)
        for name in COPY:
            src = ROOT / name
            (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
        with open(work / "pyproject.toml", "a") as f:  # mutmut's own section, for this module only
            f.write("\n[tool.mutmut]\n"
                    'source_paths = ["simcache"]\n'
                    f"only_mutate = [{json.dumps(module)}]\n"
                    f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
                    'pytest_add_cli_args = ["-x", "-q", "-p", "no:cacheprovider"]\n'
                    'also_copy = ["tests"]\n')
        mutmut = [sys.executable, "-m", "mutmut"]
        t0 = time.monotonic()
        done = subprocess.run(["nice", "-n", "10", *mutmut, "run", "--max-children", str(max_children)], cwd=work,
                              capture_output=True, text=True, timeout=timeout_s)
        seconds = time.monotonic() - t0
        res = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, capture_output=True, text=True)
        status: dict[str, str] = {}
        for line in res.stdout.splitlines():
            m = re.match(r"\s*(\S+):\s*(\w[\w ]*)$", line)
            if m:
                status[m.group(1)] = m.group(2).strip()
        killed = sum(s in ("killed", "timeout") for s in status.values())
        survived = sorted(k for k, s in status.items() if s == "survived")
        other = {k: s for k, s in status.items() if s not in ("killed", "timeout", "survived")}
        diffs = {k: subprocess.run([*mutmut, "show", k], cwd=work, capture_output=True, text=True).stdout
                 for k in survived}  # what each survivor changed, for deciding: new test, or equivalent
        return dict(module=module, tests=tests, mutants=len(status), killed=killed, survived=len(survived),
                    score=round(killed / max(1, killed + len(survived)), 3), survivors=survived, diffs=diffs,
                    other=other,
                    seconds=round(seconds, 1), returncode=done.returncode, log_tail=done.stdout[-600:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help=f"modules to mutate (default: all of {', '.join(MODULES)})")
    ap.add_argument("--out", default=str(ROOT / "build" / "mutation.json"),
                    help="where to write the scores and survivors (JSON)")
    ap.add_argument("--max-children", type=int, default=2, help="parallel mutant runs (default 2)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds allowed per module (default 3600)")
    args = ap.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        print(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}", file=sys.stderr)
        return 2
    out = []
    for module in args.modules or list(MODULES):
        print(f"mutating {module} ...", flush=True)
        r = run_module(module, MODULES[module], args.max_children, args.timeout)
        out.append(r)
        print(f"  {r['killed']}/{r['killed'] + r['survived']} killed ({r['score']:.0%}), {r['mutants']} mutants, "
              f"{r['seconds']} s; survivors: {', '.join(r['survivors']) or 'none'}", flush=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
