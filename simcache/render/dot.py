"""Snapshot -> Graphviz DOT, and DOT -> SVG: the picture of the radix tree at one micro-step.

Vocabulary (what a box shows; the legend in every drawing repeats it)
- One box per node: its key (long keys abbreviated ``1,2,3,…,64 (64)``), its id ``#8``, where its KV lives
  (*device*, *host*, *both*, or *none* once both copies are gone), its Mamba state (``M dev`` / ``M host``
  cells; a node without a device Mamba state is a *tombstone*), its lock count and host refs.
- Fill colour is the KV residency: blue device, amber host, both striped; white when neither.
- Border says what happened: gold **new** / **changed** since ``prev``; red dashed **stale** (detached from the
  tree while something still holds it), thicker with a WENT STALE tag at the micro-step where it happened and a
  ``STALE since step N`` tag afterwards; grey dashed for a detached *ghost* nothing holds right now (it stays
  drawn until it is cleaned up, re-attached or the run ends, see ``ghosts.py``); green double **cleaned up** by a
  stale guard; orange **VIOLATES** on a node an invariant violation names; dark red heavy **assertion** where
  the simulated cache raised.
- Detached nodes are drawn beside the tree in a dashed cluster, with a dotted grey *ghost* edge to the parent
  they used to hang from and a dashed edge from a box listing every holder that still refers to them.

``snapshot_to_dot`` is a pure function of plain data; its output is deterministic (nodes in canonical preorder,
stale nodes sorted), so tests compare it with golden files. ``render_svg`` (in ``svg.py``, re-exported here) runs
the ``dot`` program, cached by DOT text.
"""
from __future__ import annotations

from html import escape

from ..snapshot import NodeView, Snapshot
from .focus import focus_tree
from .words import KEY_LIMIT, short_key

FILL = {"device": "#dbeafe", "host": "#fef3c7", "both": "#dbeafe;0.5:#fef3c7", "none": "#ffffff"}
BORDER = {"device": "#1d4ed8", "host": "#b45309", "both": "#1d4ed8", "none": "#9ca3af"}
RED, GREEN, GOLD, DARK_RED, MAMBA, GREY = "#dc2626", "#15803d", "#d97706", "#7f1d1d", "#c4b5fd", "#6b7280"
ORANGE = "#c2410c"
LOCK, HOSTREF, TOMB = "#1e3a8a", "#92400e", "#4b5563"
_CHANGE_FIELDS = ("key", "parent", "children", "attached", "value", "host_value", "mamba_value", "mamba_host_value",
                  "full_lock_ref", "mamba_lock_ref", "host_ref", "host_mamba_ref")


def abbreviate_key(key: tuple[int, ...], limit: int = KEY_LIMIT) -> str:
    """``1,2,3`` or, past ``limit`` tokens, ``1,2,3,…,64 (64)`` (``words.short_key``: every view's one rule)."""
    return short_key(key, limit)


def child_key_text(key: tuple[int, ...], page_size: int = 1) -> str:
    """The slot a key occupies in its parent, as SGLang's assertion prints it: ``1`` or ``(1, 2)``."""
    if not key:
        return ""
    return str(key[0]) if page_size == 1 else str(tuple(key[:page_size]))


def _q(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _attrs(**kw) -> str:
    return "[" + " ".join(f"{k}={_q(v) if not str(v).startswith('<') else v}" for k, v in kw.items()) + "]"


def _cell(text: str, bg: str | None = None, color: str = "#111827", bold: bool = False, span: int = 1) -> str:
    body = escape(text)
    body = f"<B>{body}</B>" if bold else body
    bgattr = f' BGCOLOR="{bg}"' if bg else ""
    return f'<TD COLSPAN="{span}"{bgattr}><FONT COLOR="{color}">{body}</FONT></TD>'


def _label(n: NodeView, root: bool, tags: list[tuple[str, str]], hide_host: bool, hide_mamba: bool) -> str:
    title = "root" if root else abbreviate_key(n.key)
    rows = [f'<TR><TD ALIGN="LEFT" COLSPAN="2"><FONT POINT-SIZE="15"><B>{escape(title)}</B></FONT>'
            f'<FONT COLOR="{GREY}">  #{n.id}</FONT></TD></TR>']
    if not root:
        where = n.residency if not hide_host else ("device" if n.value is not None else "evicted")
        rows.append(f"<TR>{_cell('KV: ' + where, span=2)}</TR>")
        if not hide_mamba:
            dev = _cell("M dev", MAMBA) if n.mamba_value is not None else _cell("tombstone", TOMB, "#ffffff")
            host = _cell("M host", MAMBA if n.mamba_host_value is not None else None,
                          "#111827" if n.mamba_host_value is not None else "#9ca3af")
            rows.append(f"<TR>{dev}{host}</TR>" if not hide_host else f"<TR>{dev}<TD></TD></TR>")
    refs = []
    if n.full_lock_ref:
        refs.append(_cell(f"lock {n.full_lock_ref}", LOCK, "#ffffff", bold=True))
    if not hide_host and (n.host_ref or n.host_mamba_ref):
        refs.append(_cell(f"host ref {n.host_ref}/{n.host_mamba_ref}", HOSTREF, "#ffffff", bold=True))
    if refs:
        rows.append("<TR>" + "".join(refs) + ("<TD></TD>" if len(refs) == 1 else "") + "</TR>")
    for text, bg in tags:
        rows.append(f"<TR>{_cell(text, bg, '#ffffff', bold=True, span=2)}</TR>")
    return ('<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="2">' + "".join(rows) + "</TABLE>>")


def _holder_label(names: tuple[str, ...], stale: bool = True) -> str:
    """The box of a detached node's holders: red "still held by" for a stale node, grey "held by" for one the
    code is deleting (the same colour as the node it points at, so the legend never contradicts it)."""
    def row(name: str) -> str:  # call frames pale, structures (sets, lists, in-flight maps) stronger
        bg = ("#fff1f2" if "(" in name else "#fecaca") if stale else "#f3f4f6"
        return f'<TR><TD ALIGN="LEFT" BGCOLOR="{bg}">{escape(name)}</TD></TR>'

    rows = "".join(row(name) for name in names)
    color, head = (RED, "still held by") if stale else (GREY, "held by (while it is deleted)")
    return (f'<<TABLE BORDER="1" COLOR="{color}" CELLBORDER="0" CELLSPACING="1" CELLPADDING="3">'
            f'<TR><TD BGCOLOR="{color}"><FONT COLOR="#ffffff"><B>{head}</B></FONT></TD></TR>{rows}</TABLE>>')


def _changed(n: NodeView, prev: Snapshot | None) -> str | None:
    if prev is None:
        return None
    old = prev.nodes.get(n.id)
    if old is None:
        return "new"
    return "changed" if any(getattr(old, f) != getattr(n, f) for f in _CHANGE_FIELDS) else None


def _node_line(n: NodeView, snap: Snapshot, prev: Snapshot | None, hl: dict, hide_host: bool, hide_mamba: bool) -> str:
    residency = n.residency if not hide_host else ("device" if n.value is not None else "none")
    root = n.id == snap.root
    fill = "#f3f4f6" if root else FILL[residency]
    attrs = dict(id=f"n{n.id}", fillcolor=fill, color=BORDER[residency], penwidth="1.5",
                 style="striped" if ";" in fill else "filled")
    classes, tags = ["node-box"], []
    change = None if root else _changed(n, prev)
    if change:
        attrs.update(color=GOLD, penwidth="3")
        classes.append(change)
        tags.append(("NEW" if change == "new" else "changed", GOLD))
    ghost = hl.get("ghosts", {}).get(n.id)
    if not n.attached and not root:  # stale if something still holds it, else only drawn for a highlight
        stale = n.id in snap.stale or (ghost.stale if ghost is not None else bool(snap.holders.get(n.id)))
        attrs.update(color=RED if stale else GREY, penwidth="2.5", style=attrs["style"] + ",dashed")
        classes.append("stale" if stale else "detached")
        if ghost is not None and ghost.state not in ("went-stale", "cleaned-up"):  # those two get their tag below
            classes.append(f"ghost-{ghost.state}")
            tags.append((ghost.badge, RED if stale else GREY))
    for name in hl.get("violations", {}).get(n.id, ()):  # the node an invariant violation names
        attrs.update(color=ORANGE, penwidth="4")
        classes.append("violation")
        tags.append((f"VIOLATES {name}", ORANGE))
    if n.id in hl.get("went_stale", ()):
        attrs.update(color=RED, penwidth="4.5")
        classes.append("went-stale")
        tags.append(("WENT STALE", RED))
    if n.id in hl.get("cleaned", ()):
        attrs.update(color=GREEN, penwidth="3", peripheries="2")
        classes.append("cleaned-up")
        tags.append(("CLEANED UP", GREEN))
    if n.id in hl.get("assertion", ()):
        attrs.update(color=DARK_RED, penwidth="6")
        classes.append("assertion")
        tags.append(("ASSERTION FIRED HERE", DARK_RED))
    attrs["class"] = " ".join(classes)
    attrs["label"] = _label(n, root, tags, hide_host, hide_mamba)
    return f"  n{n.id} {_attrs(**attrs)};"


def _visible_tree(snap: Snapshot, hide_host: bool) -> list[int]:
    if not hide_host:
        return [snap.root, *snap.order]
    keep: set[int] = set()
    for nid in reversed(snap.order):  # postorder-ish: children come after parents in preorder
        n = snap.nodes[nid]
        if n.value is not None or any(c in keep for c in n.children):
            keep.add(nid)
    return [snap.root] + [nid for nid in snap.order if nid in keep]


def _detached(snap: Snapshot, hl: dict) -> list[int]:
    """Stale nodes, plus highlighted detached ones (cleaned up, assertion), plus their detached descendants."""
    want = set(snap.stale) | set(hl.get("ghosts", ())) | \
        {i for k in ("went_stale", "cleaned", "assertion") for i in hl.get(k, ())}
    want = {i for i in want if i in snap.nodes and not snap.nodes[i].attached and i != snap.root}
    stack = list(want)
    while stack:
        for c in snap.nodes[stack.pop()].children:
            if c in snap.nodes and not snap.nodes[c].attached and c not in want:
                want.add(c)
                stack.append(c)
    return sorted(want)


def _legend(hide_host: bool, hide_mamba: bool) -> list[str]:
    rows = [("device", FILL["device"], BORDER["device"])]
    if not hide_host:
        rows += [("host", FILL["host"], BORDER["host"]), ("device + host", "#dbeafe:#fef3c7", BORDER["both"])]
    if not hide_mamba:
        rows += [("Mamba state", MAMBA, MAMBA), ("tombstone (no Mamba on device)", TOMB, TOMB)]
    rows += [("lock (in use by a request)", LOCK, LOCK)]
    rows += [] if hide_host else [("host ref (storage / prefetch)", HOSTREF, HOSTREF)]
    rows += [("new / changed", "#ffffff", GOLD), ("STALE: detached, still held", "#ffffff", RED),
             ("detached, not stale: being deleted, or held by nothing", "#ffffff", GREY),
             ("cleaned up by a guard", "#ffffff", GREEN), ("named by an invariant violation", "#ffffff", ORANGE),
             ("assertion fired here", "#ffffff", DARK_RED)]

    def swatch(fill: str, border: str) -> str:
        style = "dashed" if border in (RED, GREY) else "solid"
        if ":" not in fill:
            return f'<TD BGCOLOR="{fill}" WIDTH="18" BORDER="2" COLOR="{border}" STYLE="{style}"> </TD>'
        # device + host: the two fills side by side, as the node's stripes are (a gradient read as "device")
        halves = "".join(f'<TD BGCOLOR="{c}" WIDTH="9"> </TD>' for c in fill.split(":"))
        return (f'<TD WIDTH="18" BORDER="2" COLOR="{border}" STYLE="{style}" CELLPADDING="0">'
                f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0"><TR>{halves}</TR></TABLE></TD>')

    cells = "".join(f'<TR>{swatch(fill, border)}<TD ALIGN="LEFT">{escape(text)}</TD></TR>'
                    for text, fill, border in rows)
    label = (f'<<TABLE BORDER="1" COLOR="#d1d5db" STYLE="rounded" CELLBORDER="0" CELLSPACING="3" CELLPADDING="2">'
             f'<TR><TD COLSPAN="2"><B>Legend</B></TD></TR>{cells}</TABLE>>')
    return [f"  legend {_attrs(shape='plaintext', id='legend', label=label, fontsize='11')};"]


def legend_dot(hide_host: bool = False, hide_mamba: bool = False) -> str:
    """DOT for the legend alone (a page that shows many drawings can show it once)."""
    return ('digraph legend {\n  graph [pad="0.1"];\n  node [fontname="Helvetica"];\n'
            + "\n".join(_legend(hide_host, hide_mamba)) + "\n}\n")


def snapshot_to_dot(snap: Snapshot, prev: Snapshot | None = None, *, highlight: dict | None = None,
                    hide_host: bool = False, hide_mamba: bool = False, page_size: int = 1,
                    legend: bool = True, focus: set[int] | None = None) -> str:
    """DOT source for ``snap``; ``highlight``: ``{"went_stale": ids, "cleaned": ids, "assertion": ids,
    "ghosts": {id: Ghost}, "violations": {id: invariant names}}`` (see ``ghosts.highlight_at``). ``focus``: the
    subjects of a focus view (``focus.py``): only they, their ancestors and siblings are drawn, each other
    subtree folded into one box."""
    hl = highlight or {}
    tree = _visible_tree(snap, hide_host)
    folds: dict[int, int] = {}
    if focus is not None:
        tree, folds = focus_tree(snap, tree, focus)
    detached = _detached(snap, hl)
    drawn = set(tree) | set(detached)
    out = ["digraph cache {", '  graph [rankdir="TB" fontname="Helvetica" nodesep="0.35" ranksep="0.5" '
           'bgcolor="white" pad="0.2"];', '  node [shape="box" fontname="Helvetica" fontsize="12" margin="0.05"];',
           '  edge [fontname="Helvetica" fontsize="12" color="#374151"];']
    out += [_node_line(snap.nodes[i], snap, prev, hl, hide_host, hide_mamba) for i in tree]
    for i in tree:
        n = snap.nodes[i]
        if n.parent in drawn and n.id != snap.root:
            out.append(f"  n{n.parent} -> n{i} {_attrs(label=' ' + child_key_text(n.key, page_size) + ' ')};")
    for i, hidden in sorted(folds.items()):
        box = _attrs(id=f"fold{i}", label=f"▸ {hidden} node{'s' if hidden != 1 else ''} folded", style="dashed,rounded",
                     color=GREY, fontcolor=GREY, fontsize="12", **{"class": "fold"})
        out += [f"  fold{i} {box};", f"  n{i} -> fold{i} {_attrs(style='dashed', color=GREY, arrowhead='none')};"]
    ghosts = hl.get("ghosts", {})

    def holders(i: int) -> tuple[str, ...]:  # a ghost lists every holder (calls too); else the snapshot's
        return ghosts[i].holders if i in ghosts else snap.holders.get(i, ())

    def is_stale(i: int) -> bool:
        return i in snap.stale or (ghosts[i].stale if i in ghosts else bool(snap.holders.get(i)))

    if detached:
        title = "detached, but still referenced: STALE" if any(map(is_stale, detached)) else "detached from the tree"
        out += ["  subgraph cluster_stale {", f'    label="{title}"; fontcolor="#dc2626";',
                '    style="dashed,rounded"; color="#dc2626"; fontname="Helvetica"; fontsize="13";']
        out += ["  " + _node_line(snap.nodes[i], snap, prev, hl, hide_host, hide_mamba) for i in detached]
        out += [f"    h{i} {_attrs(shape='plaintext', id=f'h{i}', label=_holder_label(holders(i), is_stale(i)))};"
                for i in detached if holders(i)]
        out.append("  }")
        for i in detached:
            n = snap.nodes[i]
            ck = child_key_text(n.key, page_size)
            if n.parent in drawn and not snap.nodes[n.parent].attached and i in snap.nodes[n.parent].children:
                out.append(f"  n{n.parent} -> n{i} {_attrs(label=' ' + ck + ' ', color=RED)};")
            elif n.parent in drawn:
                ghost = _attrs(label=f" was {ck} ", style="dotted", color="#9ca3af", fontcolor=GREY, penwidth="2",
                               arrowhead="none")
                out.append(f"  n{n.parent} -> n{i} {ghost};")
            if holders(i):
                c = RED if is_stale(i) else GREY
                holds = _attrs(style="dashed", color=c, penwidth="2", label=" holds ", fontcolor=c)
                out.append(f"  h{i} -> n{i} {holds};")
    if legend:
        out += _legend(hide_host, hide_mamba) + [f"  {{rank=same; n{snap.root}; legend;}}"]
    out.append("}")
    return "\n".join(out) + "\n"


# rendering lives beside, in svg.py; re-exported here so ``dot.render_svg`` works as documented
from .svg import SVG_CACHE, render_many, render_png, render_svg  # noqa: E402,F401
