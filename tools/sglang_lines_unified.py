"""Regenerate ``simcache/data/sglang_lines_unified.json``: where each simulated function of the unified model
(``simcache.unified``) is defined in SGLang's ``UnifiedRadixCache`` at each version a unified preset models.

Facts only (a file's base name and a line number per function and version), never SGLang text; the code pane shows
them as ``unified_radix_cache.py:611 @ 0.5.16``. A function of the Full or Mamba component is keyed by its class
(``FullComponent.drive_eviction``), every other by its name; each is looked up in the files of its layout, in order:

- ``components`` (the mirror's 7f67965b4, releases up to 0.5.16): ``unified_radix_cache.py``, then
  ``unified_cache_components/{full,mamba}_component.py``;
- ``tree_core`` (0.5.17 on): the controller ``unified_radix_cache.py``, the tree core
  ``unified_cache/unified_tree_core.py``, then ``unified_cache/components/{full,mamba}_component.py``.

    python tools/sglang_lines_unified.py [--git MIRROR] [--wheel 0.5.16=DIR] [--wheel 0.5.17=DIR] [OUT.json]

``DIR`` holds ``sglang/srt/...`` (an unpacked wheel, or simcache's cache folder of that release:
``~/.cache/simcache/sglang/0.5.16``). A version neither given nor reachable keeps the current table's rows.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcache.trace_hooks import SIMULATED_CODE  # noqa: E402

MIRROR_COMMIT = "7f67965b4dbbbedbce470af5ead78ff0af0f00da"
MC = "sglang/srt/mem_cache"
LAYOUTS = {
    "components": {None: (f"{MC}/unified_radix_cache.py",),
                   "FullComponent": (f"{MC}/unified_cache_components/full_component.py",),
                   "MambaComponent": (f"{MC}/unified_cache_components/mamba_component.py",)},
    "tree_core": {None: (f"{MC}/unified_radix_cache.py", f"{MC}/unified_cache/unified_tree_core.py"),
                  "FullComponent": (f"{MC}/unified_cache/components/full_component.py",),
                  "MambaComponent": (f"{MC}/unified_cache/components/mamba_component.py",)},
}
# where the model keeps SGLang's older name or one place for what a release moved: the name SGLang defines there
ALIASES = {
    "components": {"_alloc_storage_hit": "_drain_and_alloc_storage_hit"},
    "tree_core": {"_alloc_storage_hit": "_drain_and_alloc_storage_hit", "_insert_helper_host": "insert_host",
                  "_insert_helper": "begin_insert", "write_backup": "_execute_kv_backup",
                  "_inc_hit_count": "_inc_hit_count_and_check", "_evict_to_host": "demote",
                  "FullComponent.drive_eviction": "_evict_components",
                  "MambaComponent.drive_eviction": "_evict_components"},
}
# the model's cache methods that are a component's in SGLang
OWNER = {"cleanup_after_caching_req": "MambaComponent"}
VERSIONS = {MIRROR_COMMIT: "components", "0.5.16": "components", "0.5.17": "tree_core"}
COMPONENTS = ("FullComponent", "MambaComponent")
OUT = ROOT / "simcache" / "data" / "sglang_lines_unified.json"


def model_functions() -> list[str]:
    """The unified model's simulated functions, as the table keys them."""
    import simcache.unified  # noqa: F401 -- marks every simulated function of the model

    out = set()
    for code, name in SIMULATED_CODE.items():
        if f"{Path('simcache') / 'unified'}" in code.co_filename:
            cls = code.co_qualname.split(".")[0]
            out.add(f"{cls}.{name}" if cls in COMPONENTS else name)
    return sorted(out)


def read(version: str, path: str, git_dir: str | None, wheels: dict[str, str]) -> str | None:
    if version in wheels:
        f = Path(wheels[version]) / path
        return f.read_text() if f.is_file() else None
    if git_dir is None or version != MIRROR_COMMIT:
        return None
    try:
        return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{version}:python/{path}"], check=True,
                              capture_output=True, text=True).stdout
    except subprocess.CalledProcessError:
        return None


def definitions(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(node.name, node.lineno)
    return out


def main(git_dir: str | None, wheels: dict[str, str], out: Path = OUT) -> None:
    names = model_functions()
    kept = json.loads(OUT.read_text()) if OUT.is_file() else {}
    table: dict[str, dict[str, list]] = {}
    for version, layout in VERSIONS.items():
        files = {p: read(version, p, git_dir, wheels) for paths in LAYOUTS[layout].values() for p in paths}
        if all(t is None for t in files.values()):
            for name in names:
                if version in kept.get(name, {}):
                    table.setdefault(name, {})[version] = kept[name][version]
            continue
        defs = {p: definitions(t) for p, t in files.items() if t is not None}
        for name in names:
            cls, _, fn = name.rpartition(".")
            fn = ALIASES[layout].get(name, fn)
            if "." not in ALIASES[layout].get(name, "") and fn == "_evict_components":
                cls = ""  # moved to the controller
            paths = LAYOUTS[layout][cls or OWNER.get(name)]
            hit = next(((Path(p).name, defs[p][fn]) for p in paths if fn in defs.get(p, {})), None)
            if hit is not None:
                table.setdefault(name, {})[version] = list(hit)
    rows = [f"{json.dumps(n)}: {json.dumps(table[n], sort_keys=True)}" for n in sorted(table)]
    out.write_text("{\n" + ",\n".join(rows) + "\n}\n")
    print(f"wrote {out}: {len(table)} of {len(names)} functions located; not in SGLang under that name: "
          f"{', '.join(n for n in names if n not in table)}")


if __name__ == "__main__":
    args, wheels, git = sys.argv[1:], {}, None
    while "--wheel" in args:
        i = args.index("--wheel")
        version, _, folder = args[i + 1].partition("=")
        wheels[version] = folder
        del args[i: i + 2]
    if "--git" in args:
        i = args.index("--git")
        git = args[i + 1]
        del args[i: i + 2]
    main(git, wheels, Path(args[0]) if args else OUT)
