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

import pytest

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


def test_undecorate_turns_fewer_collections_into_the_same_wrapping_after_the_def():
    source = ("import x\n\n\n@fewer_collections()\ndef search(a, b=1):\n    return a + b\n\n\nclass K:\n"
              "    @simulated\n    def step(self):\n        return 1\n")
    assert mutation.undecorate(source) == (
        "import x\n\n\ndef search(a, b=1):\n    return a + b\nsearch = fewer_collections()(search)\n\n\nclass K:\n"
        "    def step(self):\n        return 1\n    step = simulated(step)\n")
    # the explorer's and the replay's entry points are wrapped by the very same call after the rewrite
    for path in ("simcache/explore/shrink.py", "simcache/explore/search.py", "simcache/ops_run.py"):
        source = (ROOT / path).read_text()
        names = [n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.decorator_list]
        out = mutation.undecorate(source)
        assert "@fewer_collections()" not in out and names, path
        assert all(f"\n{n} = fewer_collections()({n})\n" in out for n in names), path


def test_undecorate_refuses_a_decorator_it_cannot_rewrite_as_one_line():
    for source in ("@fewer_collections(50)\ndef f():\n    pass\n", "@simulated\n@other\ndef f():\n    pass\n"):
        with pytest.raises(ValueError, match="only a lone '@simulated' or '@fewer_collections\\(\\)' line"):
            mutation.undecorate(source)


def test_a_system_device_a_mutant_replaced_is_named_with_the_command_that_puts_it_back(tmp_path, monkeypatch):
    (tmp_path / "null").write_text("")  # what a mutant renaming a temporary file over /dev/null leaves
    monkeypatch.setattr(mutation, "SYSTEM_DEVICES", {str(tmp_path / "null"): (1, 3), str(tmp_path / "gone"): (1, 5),
                                                     "/dev/null": (1, 3)})
    assert mutation.replaced_system_devices() == [
        f"{tmp_path / 'null'} is no longer a character device (a mutant replaced it); as root, put it back with: rm "
        f"{tmp_path / 'null'} && mknod -m 666 {tmp_path / 'null'} c 1 3"]


def test_the_copy_gets_the_shim_unless_the_hooks_themselves_are_mutated(tmp_path):
    hooks = (ROOT / "simcache" / "trace_hooks.py").read_text()
    for module, shim in (("simcache/lru.py", True), ("simcache/trace_hooks.py", False)):
        work = tmp_path / module.replace("/", "_")
        work.mkdir()
        assert mutation.prepare(work, module, ["tests/test_lru.py"], verify=False) is None
        copied = (work / "simcache" / "trace_hooks.py").read_text()
        assert copied == (hooks + mutation.TRACE_HOOKS_SHIM if shim else hooks), module
        assert f"only_mutate = [{json.dumps(module)}]" in (work / "pyproject.toml").read_text()
