"""Checks on the project's packaging and set-up files (no simcache code involved)."""

import os
import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _conda_spec(entry: str) -> tuple[str, str]:
    """Split a conda match spec like 'ipywidgets>=8' or 'python=3.11' into (name, version part)."""
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*$", entry)
    assert m, entry
    return m.group(1), m.group(2)


def _env():
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_parses_and_lists_conda_packages():
    env = _env()
    assert "conda-forge" in env["channels"]
    deps = env["dependencies"]
    specs = dict(_conda_spec(d) for d in deps if isinstance(d, str))
    assert specs.get("python") == "=3.11"
    assert specs.get("pytorch") == "", "pytorch should be unpinned in environment.yml"
    assert "torch" not in specs, "conda-forge calls it pytorch"
    assert "graphviz" in specs and "python-graphviz" in specs
    assert specs.get("ipywidgets") == ">=8"
    assert specs.get("jupyterlab") == ">=4"
    for name in ("matplotlib", "pyyaml", "jsonschema", "pip"):
        assert name in specs, name


def test_environment_yml_installs_project_with_pip():
    pip_sections = [d["pip"] for d in _env()["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1
    assert "-e ." in [p.strip() for p in pip_sections[0]]


def test_pyproject_dependencies():
    project = _pyproject()["project"]
    assert project["name"] == "simcache"
    assert project["requires-python"] == ">=3.11"
    reqs = {Requirement(r).name.lower(): Requirement(r) for r in project["dependencies"]}
    torch = reqs["torch"]
    assert str(torch.specifier) == ">=2.3", "torch must be a range in pyproject; pin only on the install line"
    assert torch.specifier.contains("2.13.0") and torch.specifier.contains("3.0")
    assert str(reqs["ipywidgets"].specifier) == ">=8"
    assert str(reqs["jupyterlab"].specifier) == ">=4"
    for name in ("graphviz", "matplotlib", "pyyaml", "jsonschema"):
        assert name in reqs, name


def test_pyproject_extras_script_and_tool_config():
    data = _pyproject()
    extras = data["project"]["optional-dependencies"]
    test_names = {Requirement(r).name.lower() for r in extras["test"]}
    assert {
        "pytest",
        "hypothesis",
        "nbmake",
        "nbformat",
        "nbclient",
        "ipykernel",
        "playwright",
        "pytest-timeout",
    } <= test_names
    dev = [Requirement(r) for r in extras["dev"]]
    assert any(r.name == "simcache" and "test" in r.extras for r in dev)
    assert "ruff" in {r.name for r in dev}
    assert data["project"]["scripts"]["simcache"] == "simcache.cli:main"
    assert data["tool"]["ruff"]["line-length"] == 120
    pytest_cfg = data["tool"]["pytest"]["ini_options"]
    assert pytest_cfg["testpaths"] == ["tests"]
    markers = {m.split(":")[0].strip() for m in pytest_cfg["markers"]}
    assert {"gpu", "browser"} <= markers


def test_setup_pins_torch_on_the_same_pip_line():
    lines = (ROOT / "scripts" / "setup.sh").read_text().splitlines()
    pip_lines = [ln for ln in lines if re.search(r"\bpip\"? install\b", ln) and "-e" in ln]
    assert pip_lines, "setup.sh must install the project with pip -e"
    for ln in pip_lines:
        assert "TORCH_PIN" in ln or "torch==2.13.0" in ln, ln
    assert 'TORCH_PIN="torch==2.13.0"' in "\n".join(lines)


def test_ci_run_invokes_test_script_only():
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK), ".ci/run must be executable"
    lines = [ln.strip() for ln in ci.read_text().splitlines()]
    commands = [ln for ln in lines if ln and not ln.startswith("#")]
    commands = [ln for ln in commands if not ln.startswith("cd ")]
    assert commands == ["exec bash scripts/test.sh"]


def test_readme_mentions_both_commands():
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/run.sh" in readme
    assert "bash scripts/test.sh" in readme


def test_apt_txt_lists_graphviz():
    pkgs = [ln.strip() for ln in (ROOT / "apt.txt").read_text().splitlines() if ln.strip()]
    assert "graphviz" in pkgs


def test_the_gallery_ships_in_the_wheel_and_loads_from_an_installed_package(tmp_path):
    """``load("crash_pr")`` from a wheel installed in an isolated folder, far from any checkout: the gallery is
    package data, found through ``importlib.resources`` (it used to be read from ``<checkout>/assets``)."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    shutil.copytree(ROOT / "simcache", src / "simcache", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel, = (tmp_path / "dist").glob("simcache-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    gallery = sorted(n for n in names if n.startswith("simcache/scenarios/"))
    scenarios = ROOT / "simcache" / "scenarios"  # HiMamba's gallery, and the unified family's in unified/
    assert gallery == sorted(f"simcache/scenarios/{p.relative_to(scenarios).as_posix()}"
                             for p in scenarios.rglob("*.yaml"))
    assert "simcache/scenarios/unified/unified_refill.yaml" in gallery
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import simcache, json; "
             "from simcache.scenario import gallery, load; sc = load('crash_pr'); "
             "u = load('unified_refill'); "
             "print(json.dumps([simcache.__file__, sc.source, sc.name, len(gallery()), u.source]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run([sys.executable, "-c", probe, str(site)], capture_output=True, text=True, cwd=tmp_path,
                         env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    import json

    module, source, name, count, unified_source = json.loads(ran.stdout)
    assert module == str(site / "simcache" / "__init__.py")
    assert source == str(site / "simcache" / "scenarios" / "crash_pr.yaml")
    assert (name, count) == ("crash_pr", len(list(scenarios.glob("*.yaml"))))
    assert unified_source == str(site / "simcache" / "scenarios" / "unified" / "unified_refill.yaml")
