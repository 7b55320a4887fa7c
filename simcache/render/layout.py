"""Stable node positions across frames: lay out the union of a window's drawings once, then pin every frame to it.

Vocabulary
- A *window* is a run of consecutive frames drawn together (a short run whole; a long page a few operations).
- Its *union* holds every box any of its frames draws (each with its largest label: the most rows it ever has)
  and every edge; Graphviz ``dot`` lays the union out once.
- Each frame's DOT is then *pinned*: every box at its union position (``pos="x,y!"``, drawn by the ``neato``
  engine, which keeps pinned positions and routes the edges around the boxes), with two invisible corner points
  holding the union's bounding box, so every frame of the window has the same size and scale: a node never moves
  when something else appears, and a node that leaves the tree stays where it was (as RaftScope keeps its
  servers in place).
- A window whose union would be too large to lay out well (``MAX_UNION`` boxes) keeps each frame's own layout.
- The union is *measured*: its box would take the largest label by rows, which need not be the widest (a
  holders' box of three long call names is wider than one of four short ones: laid out at the narrower one, the
  wider frame's box overlapped its neighbours in 11 of the gallery's 1,919 pinned frames); measuring every label a
  box has in the window (one more ``dot`` run, only where a box's label changes) gives each union box the largest
  width and height, so no box of any frame overlaps another. The boxes detached in any frame stay in one cluster,
  laid out together as each frame draws them (without it the union spreads them out, up to a third wider than any
  frame). ``measure=False`` gives the plain union (kept to show the overlap it makes).
- ``splines=True`` routes each pinned edge around the boxes (the GIF, ``stale_gif.py``); pages draw straight edges
  (cheaper in the browser's Graphviz).

Pure text in, text out (DOT as ``dot.snapshot_to_dot`` writes it); one or two ``dot`` runs per window.
"""
from __future__ import annotations

import json
import re

MAX_UNION = 120  # boxes in a window's union; a larger one is not worth pinning (each frame keeps its layout)
_NODE = re.compile(r"^\s*((?:n|h|fold)\d+) \[(.*)\];$")
_EDGE = re.compile(r"^\s*(\w+) -> (\w+) \[(.*)\];$")
_ROWS = re.compile(r"<TR>")


def _parts(dot: str) -> tuple[list[str], dict[str, str], dict[tuple[str, str], str]]:
    """(the graph's attribute lines, name -> node line, (tail, head) -> edge line) of one frame's DOT."""
    head, nodes, edges = [], {}, {}
    for line in dot.splitlines():
        m = _NODE.match(line)
        if m:
            nodes[m.group(1)] = line.strip()
            continue
        m = _EDGE.match(line)
        if m:
            edges.setdefault((m.group(1), m.group(2)), line.strip())
            continue
        if line.strip().startswith(("graph [", "node [", "edge [")):
            head.append(line.strip())
    return head, nodes, edges


def _size(line: str) -> tuple[int, int]:
    """How big a box's label is: its rows, then its length (the union keeps each box's biggest)."""
    return len(_ROWS.findall(line)), len(line)


def _clustered(dot: str) -> set[str]:
    """The boxes ``dot`` draws inside a cluster (the detached nodes and their holders' boxes)."""
    out, inside = set(), False
    for line in dot.splitlines():
        if line.strip().startswith("subgraph cluster_"):
            inside = True
        elif inside and line.rstrip() == "  }":
            inside = False
        elif inside and (m := _NODE.match(line)):
            out.add(m.group(1))
    return out


def _measured(head: list[str], variants: dict[str, set[str]]) -> dict[str, tuple[float, float]]:
    """Box name -> the largest (width, height) in inches of its labels in ``variants`` (one ``dot`` run)."""
    import graphviz

    lines, names = [], []
    for name, seen in variants.items():
        for line in sorted(seen):
            lines.append(f"  _v{len(names)} {line[line.index('['):]}")
            names.append(name)
    out = json.loads(graphviz.pipe("dot", "json", ("digraph m {\n" + "\n".join(["  " + h for h in head] + lines)
                                                   + "\n}\n").encode("utf-8")))
    size: dict[str, tuple[float, float]] = {}
    for o in out.get("objects", ()):
        if o.get("name", "").startswith("_v") and "width" in o:
            name = names[int(o["name"][2:])]
            w, h = size.get(name, (0.0, 0.0))
            size[name] = (max(w, float(o["width"])), max(h, float(o["height"])))
    return size


def union_dot(dots: list[str], measure: bool = True) -> str | None:
    """The DOT of the union of ``dots``, or None when there is nothing to pin; with ``measure``, each box as large as
    its largest label in ``dots`` and the detached boxes in one cluster (see the module doc), else a plain graph."""
    head, nodes, edges = None, {}, {}
    variants: dict[str, set[str]] = {}
    for dot in dots:
        h, ns, es = _parts(dot)
        head = head or h
        for name, line in ns.items():
            variants.setdefault(name, set()).add(line)
            if name not in nodes or _size(line) > _size(nodes[name]):
                nodes[name] = line
        for key, line in es.items():
            edges.setdefault(key, line)
    if not nodes or len(nodes) > MAX_UNION:
        return None
    lines = [*head, *nodes.values(), *edges.values()]
    if measure:
        many = {n: v for n, v in variants.items() if len(v) > 1}
        for name, (w, h) in (_measured(head, many) if many else {}).items():
            line = nodes[name]
            nodes[name] = f'{line[: line.rindex("];")]} width="{w:.3f}" height="{h:.3f}"];'
        inside = set().union(*map(_clustered, dots))
        lines = [*head, *(nodes[n] for n in nodes if n not in inside), *edges.values()]
        if inside:
            lines += ["subgraph cluster_detached {", *("  " + nodes[n] for n in nodes if n in inside), "}"]
    return "digraph union {\n" + "\n".join("  " + x for x in lines) + "\n}\n"


def positions(union: str) -> tuple[dict[str, tuple[float, float]], tuple[float, float]]:
    """Node name -> (x, y) in points, and the (width, height) of the bounding box, from one ``dot`` run."""
    import graphviz

    out = json.loads(graphviz.pipe("dot", "json", union.encode("utf-8")))
    pos = {o["name"]: tuple(map(float, o["pos"].split(","))) for o in out.get("objects", ()) if "pos" in o}
    bb = [float(v) for v in out["bb"].split(",")]
    return pos, (bb[2], bb[3])


def pin(dot: str, pos: dict[str, tuple[float, float]], size: tuple[float, float], splines: str = "false") -> str:
    """``dot`` with every box at ``pos`` (drawn by neato), the cluster dropped, and the bounding box held;
    ``splines="true"`` routes each edge around the boxes (slower to draw: the GIF's few frames afford it)."""
    out = []
    for line in dot.splitlines():
        s = line.strip()
        m = _NODE.match(line)
        if m and m.group(1) in pos:
            x, y = pos[m.group(1)]
            line = f'{line[: line.rindex("];")]} pos="{x:.1f},{y:.1f}!"];'
        elif s.startswith("subgraph cluster_") or s == "}" and line.startswith("  }") or \
                (line.startswith("    ") and not _NODE.match(line) and "=" in s and s.endswith(";")):
            continue  # the detached nodes' cluster: a pinned node stays where it hung
        elif s.startswith("graph ["):
            line = line.replace("graph [", f'graph [layout="neato" inputscale="72" splines="{splines}" '
                                           'overlap="true" ', 1)
        out.append(line)
    corners = (f'  _bb0 [shape="point" style="invis" width="0" height="0" pos="0,0!"];\n'
               f'  _bb1 [shape="point" style="invis" width="0" height="0" pos="{size[0]:.1f},{size[1]:.1f}!"];')
    text = "\n".join(out)
    return text[: text.rindex("}")] + corners + "\n}\n"


def stable(dots: list[str], measure: bool = True, splines: bool = False) -> list[str]:
    """``dots`` pinned to their union's layout (see the module doc: ``measure``, ``splines``); unchanged when the
    union is too large, or when they are all one drawing (nothing can move: no ``dot`` run)."""
    if len(set(dots)) < 2:
        return list(dots)
    union = union_dot(dots, measure)
    if union is None:
        return list(dots)
    pos, size = positions(union)
    return [pin(d, pos, size, "true" if splines else "false") for d in dots]
