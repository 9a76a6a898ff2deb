"""Where the instrumenter puts the nodes it adds to a UI-format graph: on free canvas.

A node the edit adds (an Encode-or-Reuse wrapper, the Session) goes to the free spot nearest to
where it belongs (right of its producer, above the graph), never over an existing node (its
title bar included), another added node, a group's title bar or a subgraph's input/output node:
a wrapper dropped on a sampler hides the sampler's widgets. The search is a bounded grid around
the wanted spot; past it, the node goes below everything the graph holds (always free).
Coordinates are LiteGraph's: ``pos`` is the body's top-left corner, the title bar lies above it.
"""
from __future__ import annotations

TITLE_H = 30.0          # LiteGraph.NODE_TITLE_HEIGHT: the title bar above pos
GROUP_TITLE_H = 34.0    # a group's title bar (font 24 px * 1.4)
GAP = 20.0              # free space kept around a placed node
STEP = 40.0             # the search grid
COLUMNS = 12            # grid columns right of the wanted spot
ROWS = 40               # grid rows below (and ROWS // 4 above) the wanted spot
DEFAULT_SIZE = (200.0, 100.0)


def _num(v, default: float) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def node_box(n: dict) -> tuple[float, float, float, float] | None:
    """(x, y, w, h) of a node on the canvas, its title bar included; None without a position."""
    pos, size = n.get("pos"), n.get("size")
    if isinstance(pos, dict):                               # {"0": x, "1": y} in some old files
        pos = [pos.get("0"), pos.get("1")]
    if not isinstance(pos, (list, tuple)) or len(pos) < 2:
        return None
    if isinstance(size, dict):
        size = [size.get("0"), size.get("1")]
    if not isinstance(size, (list, tuple)) or len(size) < 2:
        size = DEFAULT_SIZE
    x, y = _num(pos[0], 0.0), _num(pos[1], 0.0)
    w, h = _num(size[0], DEFAULT_SIZE[0]), _num(size[1], DEFAULT_SIZE[1])
    return (x, y - TITLE_H, w, h + TITLE_H)


def _overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


class Canvas:
    """The occupied boxes of one graph (a root or a subgraph definition document)."""

    def __init__(self, doc: dict):
        self.boxes: list[tuple] = []
        for n in doc.get("nodes") or []:
            b = node_box(n) if isinstance(n, dict) else None
            if b:
                self.boxes.append(b)
        for g in doc.get("groups") or []:
            bd = g.get("bounding") if isinstance(g, dict) else None
            if isinstance(bd, (list, tuple)) and len(bd) >= 3:
                self.boxes.append((_num(bd[0], 0.0), _num(bd[1], 0.0), _num(bd[2], 0.0), GROUP_TITLE_H))
        for side in ("inputNode", "outputNode"):               # a subgraph's io nodes
            bd = (doc.get(side) or {}).get("bounding") if isinstance(doc.get(side), dict) else None
            if isinstance(bd, (list, tuple)) and len(bd) >= 4:
                self.boxes.append(tuple(_num(v, 0.0) for v in bd[:4]))

    def free(self, box) -> bool:
        grown = (box[0] - GAP, box[1] - GAP, box[2] + 2 * GAP, box[3] + 2 * GAP)
        return not any(_overlap(grown, b) for b in self.boxes)

    def place(self, want_x: float, want_y: float, size) -> list[float]:
        """The free ``pos`` nearest to (want_x, want_y) for a node of ``size``; marks it taken."""
        w, h = _num(size[0], DEFAULT_SIZE[0]), _num(size[1], DEFAULT_SIZE[1]) + TITLE_H
        spots = sorted(((i, j) for i in range(COLUMNS) for j in range(-(ROWS // 4), ROWS)),
                       key=lambda ij: (abs(ij[0]) + abs(ij[1]), abs(ij[1]), ij[0]))
        for i, j in spots:
            x, y = want_x + i * STEP, want_y + j * STEP
            if self.free((x, y - TITLE_H, w, h)):
                return self._take(x, y, w, h)
        bottom = max((b[1] + b[3] for b in self.boxes), default=want_y)
        return self._take(want_x, bottom + 2 * GAP + TITLE_H, w, h)

    def _take(self, x: float, y: float, w: float, h: float) -> list[float]:
        self.boxes.append((x, y - TITLE_H, w, h))
        return [x, y]

    def above(self, size) -> list[float]:
        """A free ``pos`` above everything, at the left edge of the graph (the Session's spot)."""
        h = _num(size[1], DEFAULT_SIZE[1])
        left = min((b[0] for b in self.boxes), default=0.0)
        top = min((b[1] for b in self.boxes), default=2 * GAP + h)
        return self.place(left, top - 2 * GAP - h, size)
