"""Helpers shared by the family tests."""
from __future__ import annotations

import json
from pathlib import Path


def slot_events(res) -> dict:
    return {e["data"]["slot"]: e["data"] for e in res.events_of("seedreuse.slot")}


def manifest(root: Path, name: str) -> dict:
    return json.loads((root / name / "manifest.json").read_text())


def executed_display(res, node_id: str) -> int:
    """How many times node_id (or a loop copy of it) started executing."""
    return sum(1 for e in res.events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == str(node_id))


def ui_of(res, node_id: str, key: str) -> list:
    """The ui[key] payloads of node_id and of every loop copy of it, in execution order."""
    out = []
    for e in res.events:
        d = e.get("data") or {}
        if e.get("type") == "executed" and d.get("display_node") == str(node_id) and d.get("output"):
            out.extend(d["output"].get(key, []))
    return out


def inspected(res, node_id: str) -> dict:
    """describe(value) recorded by SeedReuseTestInspect / SeedReuseTestTap node_id (the first copy)."""
    vals = ui_of(res, node_id, "inspect")
    assert vals, f"node {node_id} recorded nothing"
    return vals[0]["value"]


def nonzero(counts: dict, *names: str) -> dict:
    return {n: counts.get(n, 0) for n in names if counts.get(n, 0)}
