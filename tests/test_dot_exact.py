"""The tree drawing's DOT, attribute by attribute, on a small hand-built snapshot where every kind of box appears.

Story (node ids as in the drawing):
- root #1 holds #2 ``1,2`` (device and host, Mamba on both, locked once, host ref 2/0) and #4 ``11,12`` (host
  only, a leaf); under #2 hangs #3 (a 7-token key, host only, tombstone, host Mamba ref only) with the device
  node #8 ``10`` below it;
- #5 ``13`` left the tree while the device leaf set and a resuming ``write_backup`` still hold it: STALE, and at
  this step it also WENT STALE and an invariant names it; its detached child #6 ``14`` is held only by the host
  leaf set (so it is stale too, though the snapshot's stale list does not name it), and #6's child #10 ``16`` is
  held by nothing (grey, ``detached``);
- #7 ``15`` was just cleaned up by a stale guard (green, double border); the host-only leaf #4 is named by an
  invariant violation (orange).
With ``hide_host`` the host-only leaf #4 disappears, #3 stays (a device node hangs below it) and reads "evicted".
Written for issue 19: the mutants of ``render/dot.py`` that survived the older tests (the issue's "stale nodes
drawn grey instead of red" among them).
"""
from __future__ import annotations

import re

import pytest

from simcache.render.dot import _attrs, abbreviate_key, child_key_text, legend_dot, snapshot_to_dot
from simcache.render.ghosts import Ghost
from simcache.snapshot import NodeView, Snapshot

RED, GREY, GREEN, GOLD, ORANGE, DARK_RED = "#dc2626", "#6b7280", "#15803d", "#d97706", "#c2410c", "#7f1d1d"


def nv(id, key, parent, children=(), attached=True, value=None, host=None, mamba=None, mamba_host=None, lock=0,
       host_ref=0, host_mamba_ref=0):
    return NodeView(id, key, parent, children, attached, value, host, mamba, mamba_host, lock, 0, host_ref,
                    host_mamba_ref, 0, 0.0)


NODES = [
    nv(1, (), None, (2, 4), value=(), lock=1),
    nv(2, (1, 2), 1, (3,), value=(0, 1), host=(0, 1), mamba=(0,), mamba_host=(0,), lock=1, host_ref=2),
    nv(3, (3, 4, 5, 6, 7, 8, 9), 2, (8,), host=(2, 3, 4, 5, 6, 7, 8), mamba_host=(1,), host_mamba_ref=1),
    nv(8, (10,), 3, value=(2,), mamba=(2,)),
    nv(4, (11, 12), 1, host=(9, 10), mamba_host=(3,)),
    nv(5, (13,), 1, (6,), attached=False, value=(3,), mamba=(4,)),
    nv(6, (14,), 5, (10,), attached=False),
    nv(10, (16,), 6, attached=False, value=(5,), mamba=(5,)),
    nv(7, (15,), 1, attached=False, host=(11,)),
]
HOLDERS = {5: ("evictable_full_device_leaves", "write_backup(node) resumes"), 6: ("evictable_full_host_leaves",)}
HIGHLIGHT = {"went_stale": [5], "cleaned": [7], "assertion": [], "ghosts": {},
             "violations": {4: ("host_value_matches",), 5: ("tree_reachable",)}}


def snapshot(nodes=NODES, holders=HOLDERS, stale=(5,)) -> Snapshot:
    views = {n.id: n for n in nodes}
    order = tuple(n.id for n in nodes if n.attached and n.id != 1)
    return Snapshot(1, views, order, {}, {}, {}, {}, {}, holders, stale)


def node_attrs(dot: str, nid: int) -> dict:
    """The attributes of node ``nid``'s line (its label as the list of texts it shows), or {} if not drawn."""
    lines = [ln for ln in dot.splitlines() if re.match(rf"\s*n{nid} \[", ln)]
    if not lines:
        return {}
    assert len(lines) == 1, lines
    head, label = lines[0].split(" label=", 1)
    attrs = dict(re.findall(r'(\w+)="([^"]*)"', head))
    attrs["texts"] = [t for t in re.findall(r">([^<>]+)<", label) if t.strip()]
    attrs["tags"] = re.findall(r'<TD COLSPAN="2" BGCOLOR="(#\w+)"><FONT COLOR="#ffffff"><B>([^<]*)</B>', label)
    return attrs


def edges(dot: str) -> list[str]:
    return [ln.strip() for ln in dot.splitlines() if " -> " in ln]


def test_every_kind_of_box_has_its_colours_classes_and_tags():
    dot = snapshot_to_dot(snapshot(), highlight=HIGHLIGHT)
    a = {nid: node_attrs(dot, nid) for nid in (1, 2, 3, 4, 5, 6, 7, 8, 10)}
    assert {k: v for k, v in a[1].items()} == dict(
        id="n1", fillcolor="#f3f4f6", color="#1d4ed8", penwidth="1.5", style="filled", **{"class": "node-box"},
        texts=["root", "  #1", "lock 1"], tags=[])
    assert a[2] == dict(id="n2", fillcolor="#dbeafe;0.5:#fef3c7", color="#1d4ed8", penwidth="1.5", style="striped",
                        **{"class": "node-box"}, texts=["1,2", "  #2", "KV: both", "M dev", "M host", "lock 1",
                                                        "host ref 2/0"], tags=[])
    assert a[3] == dict(id="n3", fillcolor="#fef3c7", color="#b45309", penwidth="1.5", style="filled",
                        **{"class": "node-box"}, texts=["3,4,5,…,9 (7)", "  #3", "KV: host", "tombstone", "M host",
                                                        "host ref 0/1"], tags=[])
    assert a[4] == dict(id="n4", fillcolor="#fef3c7", color=ORANGE, penwidth="4", style="filled",
                        **{"class": "node-box violation"},
                        texts=["11,12", "  #4", "KV: host", "tombstone", "M host", "VIOLATES host_value_matches"],
                        tags=[(ORANGE, "VIOLATES host_value_matches")])
    # the stale node: red and dashed; WENT STALE wins over the violation's orange, both tags are shown
    assert a[5] == dict(id="n5", fillcolor="#dbeafe", color=RED, penwidth="4.5", style="filled,dashed",
                        **{"class": "node-box stale violation went-stale"},
                        texts=["13", "  #5", "KV: device", "M dev", "M host", "VIOLATES tree_reachable",
                               "WENT STALE"], tags=[(ORANGE, "VIOLATES tree_reachable"), (RED, "WENT STALE")])
    # held by a leaf set only (no ghost, not in the stale list): still stale, still red
    assert a[6] == dict(id="n6", fillcolor="#ffffff", color=RED, penwidth="2.5", style="filled,dashed",
                        **{"class": "node-box stale"}, texts=["14", "  #6", "KV: none", "tombstone", "M host"],
                        tags=[])
    assert a[10] == dict(id="n10", fillcolor="#dbeafe", color=GREY, penwidth="2.5", style="filled,dashed",
                         **{"class": "node-box detached"}, texts=["16", "  #10", "KV: device", "M dev", "M host"],
                         tags=[])
    assert a[7] == dict(id="n7", fillcolor="#fef3c7", color=GREEN, penwidth="3", peripheries="2",
                        style="filled,dashed", **{"class": "node-box detached cleaned-up"},
                        texts=["15", "  #7", "KV: host", "tombstone", "M host", "CLEANED UP"],
                        tags=[(GREEN, "CLEANED UP")])
    assert a[8]["class"] == "node-box" and a[8]["texts"] == ["10", "  #8", "KV: device", "M dev", "M host"]
    # the host-ref cell is white bold text on brown; a lone lock cell gets an empty neighbour
    assert ('<TD COLSPAN="1" BGCOLOR="#1e3a8a"><FONT COLOR="#ffffff"><B>lock 1</B></FONT></TD>'
            '<TD COLSPAN="1" BGCOLOR="#92400e"><FONT COLOR="#ffffff"><B>host ref 2/0</B></FONT></TD></TR>') in dot
    assert '<B>host ref 0/1</B></FONT></TD><TD></TD></TR>' in dot and "<B>lock 1</B></FONT></TD><TD></TD>" in dot


def test_edges_tree_child_keys_ghost_edges_and_holders():
    dot = snapshot_to_dot(snapshot(), highlight=HIGHLIGHT)
    assert edges(dot) == [
        'n1 -> n2 [label=" 1 "];', 'n2 -> n3 [label=" 3 "];', 'n3 -> n8 [label=" 10 "];', 'n1 -> n4 [label=" 11 "];',
        'n1 -> n5 [label=" was 13 " style="dotted" color="#9ca3af" fontcolor="#6b7280" penwidth="2" '
        'arrowhead="none"];',
        'h5 -> n5 [style="dashed" color="#dc2626" penwidth="2" label=" holds " fontcolor="#dc2626"];',
        'n5 -> n6 [label=" 14 " color="#dc2626"];',  # a detached child still hangs from its detached parent
        'h6 -> n6 [style="dashed" color="#dc2626" penwidth="2" label=" holds " fontcolor="#dc2626"];',
        'n1 -> n7 [label=" was 15 " style="dotted" color="#9ca3af" fontcolor="#6b7280" penwidth="2" '
        'arrowhead="none"];',
        'n6 -> n10 [label=" 16 " color="#dc2626"];']
    assert '    label="detached, but still referenced: STALE"; fontcolor="#dc2626";' in dot
    holders = next(ln for ln in dot.splitlines() if ln.strip().startswith("h5 "))
    assert holders == (
        '    h5 [shape="plaintext" id="h5" label=<<TABLE BORDER="1" COLOR="#dc2626" CELLBORDER="0" CELLSPACING="1" '
        'CELLPADDING="3"><TR><TD BGCOLOR="#dc2626"><FONT COLOR="#ffffff"><B>still held by</B></FONT></TD></TR>'
        '<TR><TD ALIGN="LEFT" BGCOLOR="#fecaca">evictable_full_device_leaves</TD></TR>'
        '<TR><TD ALIGN="LEFT" BGCOLOR="#fff1f2">write_backup(node) resumes</TD></TR></TABLE>>];')
    assert not any(ln.strip().startswith(("h10 ", "h7 ")) for ln in dot.splitlines())  # nothing holds them


def test_page_size_two_labels_edges_by_the_first_page():
    dot = snapshot_to_dot(snapshot(), highlight=HIGHLIGHT, page_size=2)
    assert 'n1 -> n2 [label=" (1, 2) "];' in edges(dot) and 'n2 -> n3 [label=" (3, 4) "];' in edges(dot)
    assert 'n5 -> n6 [label=" (14,) " color="#dc2626"];' in edges(dot)
    assert edges(dot)[4].startswith('n1 -> n5 [label=" was (13,) " style="dotted"')


def test_defaults_show_host_mamba_the_legend_and_one_token_child_keys():
    dot = snapshot_to_dot(snapshot(), highlight=HIGHLIGHT)
    assert dot == snapshot_to_dot(snapshot(), None, highlight=HIGHLIGHT, hide_host=False, hide_mamba=False,
                                  page_size=1, legend=True)
    assert dot.endswith("  {rank=same; n1; legend;}\n}\n")
    legend = next(ln for ln in dot.splitlines() if ln.startswith("  legend ["))
    assert "\n" + legend + "\n" in legend_dot() and "host ref (storage / prefetch)" in legend
    no_legend = snapshot_to_dot(snapshot(), highlight=HIGHLIGHT, legend=False)
    assert "legend" not in no_legend and no_legend.endswith("];\n}\n")


def test_hide_host_keeps_only_device_paths_and_reads_evicted():
    dot = snapshot_to_dot(snapshot(), highlight=HIGHLIGHT, hide_host=True)
    assert node_attrs(dot, 4) == {} and "n1 -> n4" not in dot  # a host-only leaf is not drawn
    assert node_attrs(dot, 3) == dict(id="n3", fillcolor="#ffffff", color="#9ca3af", penwidth="1.5", style="filled",
                                      **{"class": "node-box"}, texts=["3,4,5,…,9 (7)", "  #3", "KV: evicted",
                                                                      "tombstone"], tags=[])
    assert node_attrs(dot, 2)["fillcolor"] == "#dbeafe" and node_attrs(dot, 2)["texts"] == [
        "1,2", "  #2", "KV: device", "M dev", "lock 1"]
    assert "<TD></TD></TR>" in dot and "host ref" not in dot and "M host" not in dot
    assert node_attrs(dot, 7)["texts"][2] == "KV: evicted" and node_attrs(dot, 7)["fillcolor"] == "#ffffff"
    assert [e.split(" [")[0] for e in edges(dot)][:3] == ["n1 -> n2", "n2 -> n3", "n3 -> n8"]
    # an all-host tree keeps the root alone
    bare = snapshot_to_dot(snapshot(nodes=[nv(1, (), None, (4,), value=()), nv(4, (11, 12), 1, host=(9, 10))],
                                    holders={}, stale=()), hide_host=True, legend=False)
    assert node_attrs(bare, 4) == {} and node_attrs(bare, 1)["id"] == "n1"


def test_hide_mamba_drops_the_mamba_row():
    dot = snapshot_to_dot(snapshot(), highlight=HIGHLIGHT, hide_mamba=True)
    assert node_attrs(dot, 2)["texts"] == ["1,2", "  #2", "KV: both", "lock 1", "host ref 2/0"]
    assert "tombstone" not in dot.split("  legend")[0] and "M dev" not in dot


def test_a_cluster_of_unheld_nodes_is_titled_detached():
    nodes = [nv(1, (), None, (), value=()), nv(7, (15,), 1, attached=False, host=(11,))]
    dot = snapshot_to_dot(snapshot(nodes=nodes, holders={}, stale=()), highlight={"cleaned": [7]}, legend=False)
    assert '    label="detached from the tree"; fontcolor="#dc2626";' in dot
    for key in ("went_stale", "assertion"):  # each highlight kind draws a detached node beside the tree
        drawn = snapshot_to_dot(snapshot(nodes=nodes, holders={}, stale=()), highlight={key: [7]}, legend=False)
        assert node_attrs(drawn, 7)["id"] == "n7"
    assert node_attrs(snapshot_to_dot(snapshot(nodes=nodes, holders={}, stale=()), legend=False), 7) == {}
    # an attached node is never drawn twice, whatever highlight names it
    twice = snapshot_to_dot(snapshot(), highlight={"went_stale": [2], "ghosts": {}}, legend=False)
    assert len([ln for ln in twice.splitlines() if ln.strip().startswith("n2 [")]) == 1


def test_a_detached_nodes_children_list_adds_only_detached_children_the_snapshot_holds():
    """A stale node's children may still name a child that hangs in the tree again (#8) and one the snapshot
    does not hold (#99, nothing refers to it): the first is drawn once, in the tree; the second not at all."""
    nodes = [n if n.id != 5 else nv(5, (13,), 1, (6, 8, 99), attached=False, value=(3,), mamba=(4,)) for n in NODES]
    dot = snapshot_to_dot(snapshot(nodes=nodes), highlight=HIGHLIGHT, legend=False)
    assert len([ln for ln in dot.splitlines() if ln.strip().startswith("n8 [")]) == 1
    cluster = dot.split("subgraph cluster_stale")[1]
    assert "n8 [" not in cluster and "n99" not in dot
    assert [ln.strip().split(" [")[0] for ln in cluster.splitlines() if re.match(r"\s+n\d+ \[", ln)] == \
        ["n5", "n6", "n7", "n10"]


@pytest.mark.parametrize("state, holders, color, cls", [
    ("stale", ("evictable_full_device_leaves",), RED, "stale ghost-stale"),
    ("unheld", (), GREY, "detached ghost-unheld"),
    ("deleted", ("_delete_tombstone_leaf() (deleting it)",), GREY, "detached ghost-deleted"),
    ("went-stale", ("x",), RED, "stale"),
    ("cleaned-up", ("x",), RED, "stale"),
])
def test_a_ghosts_state_decides_its_colour_class_and_badge(state, holders, color, cls):
    ghost = Ghost(7, state, 3, holders, f"badge of {state}")
    dot = snapshot_to_dot(snapshot(holders={}, stale=()), highlight={"ghosts": {7: ghost}}, legend=False)
    a = node_attrs(dot, 7)
    assert (a["color"], a["class"], a["penwidth"]) == (color, f"node-box {cls}", "2.5")
    shown = state not in ("went-stale", "cleaned-up")  # those two get their own tag from the highlight
    assert a["tags"] == ([(color, f"badge of {state}")] if shown else [])
    holder_line = [ln for ln in dot.splitlines() if ln.strip().startswith("h7 [")]
    assert len(holder_line) == (1 if holders else 0)
    title = "detached, but still referenced: STALE" if color == RED else "detached from the tree"
    assert f'label="{title}"' in dot
    if holders:  # the holder box and its edge take the node's colour: grey for a node the code is deleting
        assert f'COLOR="{color}"' in holder_line[0] and f'h7 -> n7 [style="dashed" color="{color}"' in dot
        assert ("still held by" if color == RED else "held by (while it is deleted)") in holder_line[0]


def test_new_and_changed_boxes_are_gold():
    before = snapshot(nodes=[n for n in NODES if n.id not in (8,)])
    changed = [nv(2, (1, 2), 1, (3,), value=(0, 1), host=(0, 1), mamba=(0,), mamba_host=(0,), lock=2, host_ref=2)]
    after = snapshot(nodes=[n if n.id != 2 else changed[0] for n in NODES])
    dot = snapshot_to_dot(after, before, legend=False)
    assert (node_attrs(dot, 8)["color"], node_attrs(dot, 8)["penwidth"], node_attrs(dot, 8)["tags"]) == \
        (GOLD, "3", [(GOLD, "NEW")])
    assert node_attrs(dot, 2)["class"] == "node-box changed" and node_attrs(dot, 2)["tags"] == [(GOLD, "changed")]
    assert node_attrs(dot, 1)["class"] == "node-box"  # the root is never marked
    assert node_attrs(dot, 3)["class"] == "node-box"  # unchanged


def test_assertion_box_is_dark_red_and_heaviest():
    dot = snapshot_to_dot(snapshot(), highlight={"assertion": [5]}, legend=False)
    a = node_attrs(dot, 5)
    assert (a["color"], a["penwidth"], a["class"], a["tags"]) == (
        DARK_RED, "6", "node-box stale assertion", [(DARK_RED, "ASSERTION FIRED HERE")])


def test_legend_lists_what_the_drawing_can_show():
    def rows(text):  # a two-colour swatch is two half cells inside the swatch (read as "a:b")
        text = re.sub(r'<TD WIDTH="18" BORDER="2" COLOR="([^"]+)" STYLE="(\w+)" CELLPADDING="0"><TABLE [^>]*><TR>'
                      r'<TD BGCOLOR="([^"]+)" WIDTH="9"> </TD><TD BGCOLOR="([^"]+)" WIDTH="9"> </TD></TR></TABLE></TD>',
                      r'<TD BGCOLOR="\3:\4" WIDTH="18" BORDER="2" COLOR="\1" STYLE="\2"> </TD>', text)
        return re.findall(r'<TD BGCOLOR="([^"]+)" WIDTH="18" BORDER="2" COLOR="([^"]+)" STYLE="(\w+)"> </TD>'
                          r'<TD ALIGN="LEFT">([^<]+)</TD>', text)

    full = legend_dot()
    assert full.startswith('digraph legend {\n  graph [pad="0.1"];\n  node [fontname="Helvetica"];\n  legend [')
    assert full.endswith('fontsize="11"];\n}\n') and full.count("\n") == 5
    assert rows(full) == [
        ("#dbeafe", "#1d4ed8", "solid", "device"), ("#fef3c7", "#b45309", "solid", "host"),
        ("#dbeafe:#fef3c7", "#1d4ed8", "solid", "device + host"), ("#c4b5fd", "#c4b5fd", "solid", "Mamba state"),
        ("#4b5563", "#4b5563", "solid", "tombstone (no Mamba on device)"),
        ("#1e3a8a", "#1e3a8a", "solid", "lock (in use by a request)"),
        ("#92400e", "#92400e", "solid", "host ref (storage / prefetch)"),
        ("#ffffff", GOLD, "solid", "new / changed"), ("#ffffff", RED, "dashed", "STALE: detached, still held"),
        ("#ffffff", GREY, "dashed", "detached, not stale: being deleted, or held by nothing"),
        ("#ffffff", GREEN, "solid", "cleaned up by a guard"),
        ("#ffffff", ORANGE, "solid", "named by an invariant violation"),
        ("#ffffff", DARK_RED, "solid", "assertion fired here")]
    assert '<TR><TD COLSPAN="2"><B>Legend</B></TD></TR>' in full
    assert [r[3] for r in rows(legend_dot(hide_host=True))] == [
        "device", "Mamba state", "tombstone (no Mamba on device)", "lock (in use by a request)", "new / changed",
        "STALE: detached, still held", "detached, not stale: being deleted, or held by nothing",
        "cleaned up by a guard", "named by an invariant violation", "assertion fired here"]
    assert [r[3] for r in rows(legend_dot(hide_mamba=True))][:4] == [
        "device", "host", "device + host", "lock (in use by a request)"]


def test_the_device_and_host_swatch_is_not_the_device_swatch():
    """Issue #40 §6: "device + host" showed a gradient that read as plain device blue; it is now two halves, the
    device fill beside the host fill, like the node's stripes."""
    full = legend_dot()
    row = full.split("device + host</TD>")[0].rsplit("<TR>", 1)[1]
    assert '<TD BGCOLOR="#dbeafe" WIDTH="9"> </TD><TD BGCOLOR="#fef3c7" WIDTH="9"> </TD>' in row
    device = full.split(">device</TD>")[0].rsplit("<TR>", 1)[1]
    assert row != device and "#fef3c7" not in device


def test_keys_child_keys_and_quoting():
    assert abbreviate_key((1, 2, 3, 4, 5, 6)) == "1,2,3,4,5,6"  # up to the limit, in full
    assert abbreviate_key((1, 2, 3, 4, 5, 6, 7)) == "1,2,3,…,7 (7)"
    assert abbreviate_key((1, 2, 3)) == "1,2,3"
    assert abbreviate_key((1, 2, 3, 4), limit=3) == "1,2,3,…,4 (4)"
    assert child_key_text(()) == "" and child_key_text((), 2) == ""
    assert child_key_text((7, 8)) == "7" and child_key_text((7, 8, 9), 2) == "(7, 8)"
    assert _attrs(label='say "hi" \\ bye', shape="box") == '[label="say \\"hi\\" \\\\ bye" shape="box"]'
    assert _attrs(label="<<B>x</B>>") == "[label=<<B>x</B>>]"  # an HTML label is not quoted
