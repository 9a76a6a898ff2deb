"""The shipped examples' layout by the builders' own estimate (seedreuse_lab/tools/example_layout.py):
every example_workflows/*.json, whatever the folder holds, keeps its nodes apart as the taller
canvas mode draws them (title bars, the Vue rows, the timeline, the pack's badge lines). No worker
and no browser: the fast lane's early word; tests/browser/test_frontends.py measures the real boxes
in both modes on the frontends the suite runs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedreuse_lab.tools import example_layout

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "example_workflows").glob("*.json"))


def test_there_are_examples():
    assert EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_no_two_nodes_meet_by_estimate(path):
    nodes = json.loads(path.read_text())["nodes"]
    assert example_layout.overlaps(nodes, example_layout.GAP) == []


def _node(nid, type_, pos, size, sockets=0, widgets=0, outputs=1):
    inputs = [{"name": f"s{i}", "type": "X", "link": None} for i in range(sockets)]
    inputs += [{"name": f"w{i}", "type": "INT", "widget": {"name": f"w{i}"}, "link": None} for i in range(widgets)]
    return {"id": nid, "type": type_, "pos": list(pos), "size": list(size), "inputs": inputs,
            "outputs": [{"name": f"o{i}", "type": "X"} for i in range(outputs)]}


def test_the_estimate_counts_the_title_bar_the_rows_and_what_grows_a_node():
    loader = _node(1, "VAELoader", (0, 0), (340, 78), widgets=1)
    start = _node(2, "SeedReuseSegmentLoopStart", (0, 0), (380, 402), sockets=5, widgets=5, outputs=9)
    encode = _node(3, "SeedReuseEncodeConditioning", (0, 0), (340, 100), sockets=2, widgets=1, outputs=2)
    # a Vue stock node: its rows and footer are taller than the 78 it saves
    assert example_layout.box(loader) == (0.0, -30.0, 340.0, 30.0 + example_layout.body_height(loader))
    assert example_layout.body_height(loader) > 78
    # the timeline and the badge lines: taller than the 492 the canvas draws (measured, 1.58.1)
    assert example_layout.body_height(start) > 492 + example_layout.PACK_LINES * example_layout.BADGE_LINE
    assert example_layout.body_height(encode) >= 114 + example_layout.PACK_LINES * example_layout.BADGE_LINE


def test_settle_moves_a_node_below_the_one_it_meets_and_leaves_the_others():
    above = _node(1, "SeedReuseSession", (0, 0), (340, 130), sockets=1, widgets=3)
    below = _node(2, "SeedReuseEncodeConditioning", (0, 100), (340, 100), sockets=2, widgets=1, outputs=2)
    aside = _node(3, "KSampler", (400, 100), (340, 300), sockets=4, widgets=6)
    assert example_layout.overlaps([above, below, aside]) == [(1, 2)]
    example_layout.settle([above, below, aside])
    assert above["pos"] == [0, 0] and aside["pos"] == [400, 100]
    assert example_layout.overlaps([above, below, aside], example_layout.GAP) == []
    assert example_layout.box(below)[1] == example_layout.box(above)[1] + example_layout.box(above)[3] + example_layout.GAP
