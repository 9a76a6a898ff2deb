"""Where the nodes of a shipped example are drawn, estimated from the UI workflow alone, and the
rule every builder keeps: no two nodes meet, title bars included, in either canvas mode.

A node's box is its title bar (30) and its body as the taller of the two modes draws it right
after loading, and after what grows it later:

- LiteGraph canvas: the saved size, or the size the node computes (a DOM widget's minimum:
  Segment Loop Start's timeline grows it from the saved 402 to 492 on frontend 1.58.1);
- Vue nodes ("Nodes 2.0"): at least the saved size and a border, more for a node that shows an
  uploaded image (frontend 1.32.9 draws the preview below the widgets), or what its rows need: one
  row per socket pair, a taller one per widget (the audio player too; one more for a stock node
  whose widgets grew on a newer host: portable_examples.py), the badge row of a custom node (the
  host's source badge), the footer of a stock node (the frontend's "missing model" and "show
  advanced" bars), the timeline;
- the pack's badges: a reuse node's badge lines that do not fit beside each other take lines of
  their own (web/seedreuse.css: up to two more in a Vue node; on the canvas they stack above the
  title, inside the gap below the node above).

The heights are measured on frontends 1.32.9, 1.49.6 and 1.58.1 (tests/browser/test_frontends.py
loads every example in both modes and compares the real boxes): an estimate errs on the tall
side, and the builders keep GAP between boxes. Only the standard library.
"""
from __future__ import annotations

from .portable_examples import SAVED_SPECS

TITLE_H = 30.0          # LiteGraph.NODE_TITLE_HEIGHT; a Vue node's header is as tall
GAP = 40.0              # between two boxes (a canvas badge row above a title takes 22 of it)
PADDING = 8.0           # a Vue node's body padding
SOCKET_ROW = 20.0       # a Vue row of sockets (an input beside an output)
WIDGET_ROW = 32.0       # a Vue widget row (LiteGraph's are 24)
BADGE_ROW = 34.0        # a Vue custom node's badge row (the host's source badge)
FOOTER = 54.0           # a Vue stock node's footer bars (missing model, advanced inputs)
BORDER = 6.0            # what a Vue node adds to its saved size (1.32.9)
PREVIEW = 70.0          # what 1.32.9's Vue node adds for an uploaded image's preview (LoadImage)
PACK_LINES = 2          # more lines a reuse node's badges may take in a Vue node (a failed run:
BADGE_LINE = 28.0       # "failed: …", "fix: …", "next: …"), each this tall
TIMELINE_H = 162.0      # Segment Loop Start's timeline (web/seedreuse/timeline.js) with its margin
NOTES = ("MarkdownNote", "Note")
# what the frontend adds to a node beyond its inputs, in a Vue node: PreviewAny's text box
# (measured on 1.49.6: 56 px beyond the rows above)
FRONTEND_ADDED = {"PreviewAny": 2 * WIDGET_ROW}
REUSE_PREFIXES = ("SeedReuseEncode", "SeedReuseSegmentLoopStart")


def _is_pack(node: dict) -> bool:
    return str(node.get("type", "")).startswith("SeedReuse")


def _is_reuse(node: dict) -> bool:
    return str(node.get("type", "")).startswith(REUSE_PREFIXES)


def body_height(node: dict) -> float:
    """The node's body (below its title) in the taller mode, with what grows it later."""
    saved = float(node["size"][1]) + BORDER
    if node.get("type") in NOTES:
        return saved
    inputs = node.get("inputs") or []
    if any(i.get("type") == "IMAGEUPLOAD" for i in inputs):
        saved += PREVIEW
    sockets = sum(1 for i in inputs if "widget" not in i)
    widgets = sum(1 for i in inputs if "widget" in i and i.get("name") != "upload")
    rows = max(sockets, len(node.get("outputs") or []))
    newer = 1 if node.get("type") in SAVED_SPECS else 0
    vue = PADDING + SOCKET_ROW * rows + WIDGET_ROW * (widgets + newer) + (BADGE_ROW if _is_pack(node) else FOOTER)
    vue += FRONTEND_ADDED.get(node.get("type"), 0.0)
    if node.get("type") == "SeedReuseSegmentLoopStart":
        vue += TIMELINE_H
    grown = PACK_LINES * BADGE_LINE if _is_reuse(node) else 0.0
    return max(saved, vue) + grown


def box(node: dict) -> tuple[float, float, float, float]:
    """(x, y, width, height) of the node with its title bar, in graph units."""
    x, y = float(node["pos"][0]), float(node["pos"][1])
    return x, y - TITLE_H, float(node["size"][0]), TITLE_H + body_height(node)


def _meet(a, b, gap: float) -> bool:
    return not (a[0] + a[2] + gap <= b[0] or b[0] + b[2] + gap <= a[0]
                or a[1] + a[3] + gap <= b[1] or b[1] + b[3] + gap <= a[1])


def overlaps(nodes: list[dict], gap: float = 0.0) -> list[tuple]:
    """Pairs (id, id) of nodes whose boxes meet (closer than `gap`)."""
    boxes = [(n["id"], box(n)) for n in nodes]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if _meet(ba, bb, gap)]


def settle(nodes: list[dict], gap: float = GAP) -> None:
    """Moves nodes down (top to bottom, in place) until no two boxes are closer than `gap`: a
    node that meets one above it goes below that one; the nodes above stay where they are."""
    placed: list[dict] = []
    for n in sorted(nodes, key=lambda n: (box(n)[1], float(n["pos"][0]))):
        moved = True
        while moved:
            moved = False
            for p in placed:
                if _meet(box(p), box(n), gap):
                    bp = box(p)
                    n["pos"][1] = float(bp[1] + bp[3] + gap + TITLE_H)
                    moved = True
        placed.append(n)

