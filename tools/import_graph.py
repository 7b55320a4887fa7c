"""The package's import graph, read from the source with ``ast`` (nothing is imported): layers, cycles and the
longest import chain.

    python tools/import_graph.py [PACKAGE_DIR] [--top-level]

Every ``import`` counts, those inside functions too (a lazy import is still a dependency; ``--top-level`` keeps only
the ones that run at import time), except under ``if __name__ == "__main__":`` (a script entry, never run when the
module is imported: ``python -m simcache.workload`` calls the CLI from there). A module's *layer* is 0 when it
imports nothing of the package, else one more than the highest layer it imports; the modules of an import cycle
share a layer. ``from .x import y`` where ``y`` is a submodule counts as importing ``x.y``; importing a package
counts as importing its ``__init__``.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

Graph = dict[str, set[str]]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name of a (maybe relative) ``from ... import`` target."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _is_main_block(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``: code a module runs as a script only, never when imported."""
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def _imports(tree: ast.AST, top_level: bool):
    """Yield the import nodes of ``tree`` (only those outside functions with ``top_level``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _is_main_block(child):
                continue
            if top_level and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def build(package_dir: Path, top_level: bool = False) -> Graph:
    """Module -> the package's modules it imports."""
    root = package_dir.resolve()
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: Graph = {m: set() for m in files}
    pkg = root.name
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for node in _imports(tree, top_level):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _resolve(name, is_package, node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # ``import simcache.render.dot as d`` -> the module itself
                    t = t.rpartition(".")[0]
                if t and (t == pkg or t.startswith(pkg + ".")) and t != name:
                    graph[name].add(t)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (-len(c), c))


def layers(graph: Graph) -> tuple[dict[str, int], list[str]]:
    """Each module's layer, and one longest import chain (importer first), over the graph with cycles collapsed."""
    comp_of = {m: i for i, c in enumerate(cycles(graph)) for m in c}
    members: dict[object, list[str]] = {}
    for m in graph:
        members.setdefault(comp_of.get(m, m), []).append(m)
    deps = {k: {comp_of.get(d, d) for m in ms for d in graph[m]} - {k} for k, ms in members.items()}
    depth: dict[object, int] = {}
    below: dict[object, object] = {}

    def walk(k) -> int:
        if k not in depth:
            best, pick = 0, None
            for d in sorted(deps[k], key=str):
                if walk(d) + 1 > best:
                    best, pick = depth[d] + 1, d
            depth[k], below[k] = best, pick
        return depth[k]

    for k in members:
        walk(k)
    top = max(members, key=lambda k: (depth[k], str(k)))
    chain, k = [], top
    while k is not None:
        chain.append(" / ".join(sorted(members[k])))
        k = below[k]
    return {m: depth[comp_of.get(m, m)] for m in graph}, chain


def imports_above(graph: Graph, low: set[str], high_prefixes: tuple[str, ...]) -> list[tuple[str, str]]:
    """(module, imported) pairs where a module of ``low`` imports one named by ``high_prefixes``."""
    return sorted((m, d) for m in low for d in graph.get(m, ()) if any(d == h or d.startswith(h + ".")
                                                                      for h in high_prefixes))


def report(graph: Graph) -> str:
    layer, chain = layers(graph)
    lines = [f"{len(graph)} modules, {sum(map(len, graph.values()))} imports, {max(layer.values()) + 1} layers"]
    for n in range(max(layer.values()) + 1):
        lines.append(f"layer {n}: " + ", ".join(sorted(m for m, v in layer.items() if v == n)))
    found = cycles(graph)
    lines.append(f"cycles: {len(found)}")
    lines += ["  " + " <-> ".join(c) for c in found]
    lines.append(f"longest import chain ({len(chain)} modules): " + " -> ".join(chain))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", nargs="?", default=str(Path(__file__).resolve().parent.parent / "simcache"),
                    help="the package folder (default: this checkout's simcache/)")
    ap.add_argument("--top-level", action="store_true", help="count only imports that run at import time")
    a = ap.parse_args(argv)
    print(report(build(Path(a.package), a.top_level)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
