"""Carry committed slots forward for Encode-or-Reuse nodes that did not execute.

A slot's node does not execute when ComfyUI serves it from its in-process cache, or when it
sits upstream of another Encode-or-Reuse node that hit (nested reuse). The slot is still
part of what this prompt used, so a commit keeps it, but only when the committed slot's key
equals the key the current graph computes for it: a stale slot is never carried.
"""
from __future__ import annotations

from . import host
from .graph_view import ENCODE_PREFIX, SLOT_IO_TYPES, GraphView, session_of, slot_key

log = host.log


def carry_unexecuted_slots(ctx, root: str, name: str, st) -> None:
    base = getattr(st.tx, "base", None)
    if base is None:
        return
    view = GraphView(ctx.prompt, resolved=ctx.resolved, extra_pnginfo=ctx.extra.get("extra_pnginfo"),
                     executing=True)
    for node_id, node in (ctx.prompt or {}).items():
        ct = node.get("class_type", "") if isinstance(node, dict) else ""
        if not ct.startswith(ENCODE_PREFIX):
            continue
        slot = (node.get("inputs") or {}).get("slot")
        if not isinstance(slot, str) or slot in st.staged_slots:
            continue
        sess = session_of(view, node_id)
        if not sess or sess.get("cache_name") != name or sess.get("reuse", "auto") == "off":
            continue
        entry = base.slot_entry(slot)
        if entry is None:
            continue
        try:
            key = slot_key(view, node_id, SLOT_IO_TYPES.get(ct, "*"))
        except Exception as e:  # a graph we cannot describe is simply not carried
            log.debug("seedreuse: not carrying slot %s: %s", slot, e)
            continue
        if (entry.get("key") or {}).get("digest") == key.digest:
            st.tx.carry_slot(slot)
            st.staged_slots.add(slot)
