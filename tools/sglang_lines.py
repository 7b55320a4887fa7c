"""Regenerate ``simcache/data/sglang_lines.json``: where each simulated function is defined in SGLang's real code.

The table holds facts only (a file's base name and a line number per function and commit), never SGLang text; the
code pane shows them as ``hi_mamba_radix_cache.py:603 @ 14e122cd``. Run it against a git mirror of SGLang:

    python tools/sglang_lines.py /work/.mirror/ziruiliu+sglang_exp/repo [OUT.json] [--wheel 0.5.17=DIR]

A release (``COMMITS`` names it by its version) is read from an unpacked wheel, ``DIR`` holding ``sglang/srt/...``
(``pip download --no-deps sglang==0.5.17``, then unzip). Without ``--wheel`` a release's rows are kept as the
current table has them, so the mirror alone regenerates the table identically.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcache.codepane import COMMITS  # noqa: E402
from simcache.trace_hooks import SIMULATED_CODE  # noqa: E402

# searched in this order: a name defined in several files is the one the hybrid hierarchical cache runs
FILES = ("python/sglang/srt/mem_cache/hi_mamba_radix_cache.py", "python/sglang/srt/mem_cache/mamba_radix_cache.py",
         "python/sglang/srt/mem_cache/hiradix_cache.py", "python/sglang/srt/mem_cache/radix_cache.py",
         "python/sglang/srt/managers/cache_controller.py")


def definitions(git_dir: str, commit: str, path: str, wheel: str | None = None) -> dict[str, int]:
    """Function name -> line of its first definition in ``path`` at ``commit`` (or in the unpacked ``wheel``, where
    the path drops its leading ``python/``); empty if the file is absent."""
    if wheel is not None:
        file = Path(wheel) / path.removeprefix("python/")
        if not file.is_file():
            return {}
        text = file.read_text()
    else:
        try:
            text = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], check=True,
                                  capture_output=True, text=True).stdout
        except subprocess.CalledProcessError:
            return {}
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(node.name, node.lineno)
    return out


def is_release(ref: str) -> bool:
    return not (len(ref) == 40 and all(c in "0123456789abcdef" for c in ref))


def main(git_dir: str, out: Path | None = None, wheels: dict[str, str] | None = None) -> None:
    import simcache.simulate  # noqa: F401 -- imports every module that marks a simulated function

    # HiMamba's functions: the unified model's (simcache/unified/) are tools/sglang_lines_unified.py's
    names = sorted({n for c, n in SIMULATED_CODE.items() if f"{Path('simcache') / 'unified'}" not in c.co_filename})
    table: dict[str, dict[str, list]] = {}
    out = out or ROOT / "simcache" / "data" / "sglang_lines.json"
    current = ROOT / "simcache" / "data" / "sglang_lines.json"
    kept = json.loads(current.read_text()) if current.is_file() else {}
    for commit in sorted(set(COMMITS.values())):
        if is_release(commit) and commit not in (wheels or {}):
            for name in names:
                if commit in kept.get(name, {}):
                    table.setdefault(name, {})[commit] = kept[name][commit]
            continue
        wheel = (wheels or {}).get(commit)
        defs = {path: definitions(git_dir, commit, path, wheel) for path in FILES}
        for name in names:
            hit = next(((Path(p).name, d[name]) for p, d in defs.items() if name in d), None)
            if hit is not None:
                table.setdefault(name, {})[commit] = list(hit)
    rows = [f"{json.dumps(name)}: {json.dumps(table[name], sort_keys=True)}" for name in sorted(table)]
    out.write_text("{\n" + ",\n".join(rows) + "\n}\n")
    print(f"wrote {out}: {len(table)} of {len(names)} functions located; not in SGLang: "
          f"{', '.join(n for n in names if n not in table)}")


if __name__ == "__main__":
    args = sys.argv[1:]
    wheels = {}
    while "--wheel" in args:
        i = args.index("--wheel")
        version, _, folder = args[i + 1].partition("=")
        wheels[version] = folder
        del args[i : i + 2]
    main(args[0] if args else "/work/.mirror/ziruiliu+sglang_exp/repo", Path(args[1]) if len(args) > 1 else None,
         wheels)
