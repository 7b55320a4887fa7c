"""The focus view of a large tree: what the micro-step is about, drawn; every other subtree folded into one box.

Vocabulary
- The *subjects* of a frame: the detached nodes it draws (stale nodes, nodes being deleted, their holders' boxes),
  the node the micro-step touches, the nodes the code pane's frames hold in their locals, the node the assertion
  fired on and the nodes an invariant violation names.
- The *spine*: every subject's attached ancestors, up to the root (a detached subject counts from the parent it
  used to hang from).
- *Kept*: the spine, the subjects, and each spine node's children (the siblings), at most ``SIBLINGS`` of them
  besides those on the spine.
- A *fold*: under a kept node, its children that are not kept, with everything below them, drawn as one box that
  says how many nodes it holds (``▸ 31 nodes folded``).
- A tree is *large* when it has more than ``FOCUS_LIMIT`` visible nodes: then the focus view is the default, and
  "show all nodes" draws everything.
"""
from __future__ import annotations

FOCUS_LIMIT = 24  # visible tree nodes that fit one screen beside the code pane
SIBLINGS = 3  # children of a spine node drawn besides the spine itself


def subjects(trace, step: int, highlight: dict, locals_ids=()) -> set[int]:
    """The node ids a frame of ``trace`` at ``step`` is about (see the module doc)."""
    out = set(highlight.get("ghosts", ())) | set(highlight.get("violations", ()))
    for k in ("went_stale", "cleaned", "assertion"):
        out.update(highlight.get(k, ()))
    node = trace.steps[step].node
    if node is not None:
        out.add(node)
    out.update(locals_ids)
    return out


def focus_tree(snap, tree: list[int], subject_ids: set[int]) -> tuple[list[int], dict[int, int]]:
    """``(kept, folds)``: the nodes of ``tree`` (preorder) the focus view draws, in preorder, and per kept node the
    number of nodes folded under it."""
    on_tree = set(tree)
    spine = {snap.root}
    for nid in subject_ids:
        n = snap.nodes.get(nid)
        seen = set()
        while n is not None and n.id not in seen:  # a detached node climbs from the parent it hung from
            seen.add(n.id)
            if n.id in on_tree:
                spine.add(n.id)
            n = snap.nodes.get(n.parent) if n.parent is not None else None
    kept = set(spine) | (subject_ids & on_tree)
    for nid in spine:
        others = [c for c in snap.nodes[nid].children if c in on_tree and c not in kept]
        kept.update(others[:SIBLINGS])
    size: dict[int, int] = {}
    for nid in reversed(tree):  # preorder reversed: children before parents
        size[nid] = 1 + sum(size.get(c, 0) for c in snap.nodes[nid].children if c in on_tree)
    folds = {}
    for nid in kept:
        hidden = sum(size[c] for c in snap.nodes[nid].children if c in on_tree and c not in kept)
        if hidden:
            folds[nid] = hidden
    return [nid for nid in tree if nid in kept], folds
