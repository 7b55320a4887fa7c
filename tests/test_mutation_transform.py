"""``benchmarks/mutation.py`` mutates a copy in which ``@simulated`` is rewritten as an assignment after the def
(mutmut skips decorated functions) and ``trace_hooks`` gets a shim for mutmut's renamed copies. The copy must
behave exactly like the project, or the mutation scores measure something else: here the whole package is
transformed and every gallery case is replayed in another process, trace hash, outcome and call stack compared.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from simcache.scenario import gallery
from simcache.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("mutation_bench", ROOT / "benchmarks" / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)

PROBE = ("import json, simcache; assert simcache.__file__.startswith(%r), simcache.__file__; "
         "from simcache.simulate import simulate; from simcache.scenario import gallery; "
         "print(json.dumps({f'{n} {p}': [r.trace.sha256(), r.outcome, r.crash and list(r.crash.stack), "
         "r.cache.warnings] for n in gallery() for p in ('pre_fix', 'described_fix') "
         "for r in [simulate(n, p, snapshots=False)]}))")


def decorated(source: str) -> list[str]:
    return [n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)
            and any(isinstance(d, ast.Name) and d.id == "simulated" for d in n.decorator_list)]


def test_undecorate_turns_every_simulated_decorator_into_the_assignment_after_its_def():
    total = lines = 0
    for path in sorted((ROOT / "simcache").glob("*.py")):
        source = path.read_text()
        names = decorated(source)
        out = mutation.undecorate(source)
        assert decorated(out) == []
        assigned = [n.targets[0].id for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Assign)
                    and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", None) == "simulated"]
        assert sorted(assigned) == sorted(names), path.name
        total += len(names)
        lines += sum(line.strip() == "@simulated" for line in source.splitlines())
    assert total == lines and total > 0  # 49 SGLang-named cache methods when this was written


def test_the_transformed_package_replays_the_gallery_exactly(tmp_path):
    copy = tmp_path / "simcache"
    shutil.copytree(ROOT / "simcache", copy)
    for path in copy.glob("*.py"):
        path.write_text(mutation.undecorate(path.read_text()))
    with open(copy / "trace_hooks.py", "a") as f:
        f.write(mutation.TRACE_HOOKS_SHIM)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", PROBE % str(tmp_path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    expected = {}
    for n in gallery():
        for p in ("pre_fix", "described_fix"):
            r = simulate(n, p, snapshots=False)
            expected[f"{n} {p}"] = [r.trace.sha256(), r.outcome, r.crash and list(r.crash.stack), r.cache.warnings]
    assert json.loads(out) == expected
