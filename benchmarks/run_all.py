"""One command for every benchmark: runs each script in turn and writes their tables to build/benchmarks.md.

    .venv/bin/python benchmarks/run_all.py [--quick]

The cache and trace benchmarks run the matrix (prompt lengths x page sizes x write policies, ``matrix.py``) and
also write ``build/bench_cache.md`` and ``build/bench_trace.md`` (worst cell first, then the whole matrix).

Each script measures its ratios within its own run (no numbers are compared across machines or runs). The soak
(benchmarks/soak.py, a million operations per preset) is long and runs only with --soak.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller workloads")
    ap.add_argument("--soak", action="store_true", help="also run the million-operation soak")
    a = ap.parse_args()
    quick = ["--quick"] if a.quick else []
    plan = [("cache: the matrix", ["bench_cache.py", *quick]),
            ("traces: the matrix", ["bench_trace.py", *quick]),
            ("exploration", ["bench_explore.py", *quick]),
            ("rendering", ["bench_render.py"]), ("gpu", ["bench_gpu.py"]),
            ("cache: the classic workload", ["bench_cache.py", "--classic", "--means", "50", "--page-sizes", "1",
                                             "--policies", "write_through_selective", "--out",
                                             os.path.join("build", "bench_cache_classic.md")]
             + (["--requests", "500", "--quick"] if a.quick else [])),
            ("traces: seek and export", ["bench_trace.py", "--classic"] + (["--requests", "300", "--scale", "3",
                                                                          "--seeks", "40"] if a.quick else [])),
            ("code pane", ["bench_codepane.py"] + (["--requests", "200", "--seeks", "30", "--repeat", "2"] if a.quick
                                                   else []))]
    if a.soak:
        plan.append(("soak", ["soak.py"] + (["--ops", "100000"] if a.quick else [])))
    out = [f"# simcache benchmarks ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load average "
           f"{os.getloadavg()[0]:.1f} at the start)\n"]
    status = 0
    for name, cmd in plan:
        path = os.path.join(HERE, cmd[0])
        if not os.path.exists(path):
            out.append(f"## {name}\n\nskipped: {cmd[0]} is missing\n")
            continue
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        p = subprocess.run([sys.executable, path, *cmd[1:]], capture_output=True, text=True)
        status |= p.returncode
        out.append(f"## {name}\n\n{p.stdout.strip()}\n" + (f"\n(stderr: {p.stderr.strip()[-500:]})\n"
                                                            if p.returncode else ""))
    os.makedirs("build", exist_ok=True)
    with open("build/benchmarks.md", "w") as f:
        f.write("\n".join(out))
    print("\n".join(out))
    return status


if __name__ == "__main__":
    sys.exit(main())
