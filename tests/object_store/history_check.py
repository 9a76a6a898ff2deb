"""The invariants of a recorded history (test_histories_on_bucket.py): each operation as invoked
and completed by the actors (history_actor.py) and the harness (kills, wipes), checked after the
history. The invariants are stated in test_histories_on_bucket.py; tests/backend/
test_history_checker.py shows that this finds a violation of each.
"""
from __future__ import annotations

from collections import Counter

# the properties checked, by name (the numbers are the store's invariants, store/interface.py)
SUCCESSFUL_ONLY = "only successful runs (Invariant 1)"
NAMED_ONLY = "only named objects (Invariant 2)"
NOTHING_LOST = "nothing lost (Invariant 6)"


def operations(events: list[dict]) -> list[dict]:
    """Every operation with its invoke and completion (a killed actor's open one: outcome info)."""
    ops: dict[str, dict] = {}
    for e in sorted(events, key=lambda e: e["t"]):
        if e["phase"] == "invoke":
            ops[e["op"]] = {"kind": e["kind"], "invoke": e["t"], "outcome": None, **e}
        elif e["phase"] in ("ok", "fail", "info") and e["op"] in ops:
            ops[e["op"]].update({**e, "outcome": e["phase"], "done": e["t"]})
        elif e["kind"] == "staged" and e["op"] in ops:
            ops[e["op"]]["staged"] = e
        elif e["kind"] == "killed":
            for o in ops.values():
                if o["actor"] == e["actor"] and o["outcome"] is None:
                    o.update(outcome="info", done=e["t"])
    for o in ops.values():
        if o["outcome"] is None:
            o.update(outcome="info", done=float("inf"))
    return list(ops.values())


def check(events: list[dict]) -> tuple[list[str], Counter]:
    """(violations, operations checked by kind and outcome)."""
    ops = {o["op"]: o for o in operations(events)}
    counts = Counter(f"{o['kind']} {o['outcome']}" for o in ops.values())
    runs = {o["staged"]["text"]: o for o in ops.values() if o["kind"] == "commit" and "staged" in o}
    resets = [o for o in ops.values() if o["kind"] == "wipe"] + \
        [o for o in ops.values() if o["kind"] == "clear" and o["outcome"] == "ok"]
    wipes = [o for o in ops.values() if o["kind"] == "wipe"]
    bad = []
    for r in (o for o in ops.values() if o["kind"] == "read"):
        if r["outcome"] == "fail" and r.get("missing"):
            if not any(w["invoke"] <= r["done"] and w["done"] >= r["invoke"] for w in wipes):
                bad.append(f"{NOTHING_LOST}: read {r['op']} failed for a missing object with no wipe during it: "
                           f"{r['message']}")
            continue
        if r["outcome"] != "ok" or r.get("version") is None:
            continue
        w = runs.get(r["text"])
        if w is None:
            bad.append(f"{SUCCESSFUL_ONLY}: read {r['op']} got text {r['text']} that no run staged")
            continue
        staged = w["staged"]
        if w["outcome"] == "fail":
            bad.append(f"{SUCCESSFUL_ONLY}: read {r['op']} got the version of run {w['run']}, whose commit failed "
                       f"({w.get('message')})")
        if w["outcome"] == "ok" and r["version"] != w["version"]:
            bad.append(f"{SUCCESSFUL_ONLY}: read {r['op']} got version {r['version']} for run {w['run']}, which "
                       f"committed {w['version']}")
        if r["run"] != w["run"] or r["image"] != staged["image"]:
            bad.append(f"{NAMED_ONLY}: read {r['op']} got text {r['text']} image {r['image']} of run {r['run']}; "
                       f"run {w['run']} staged image {staged['image']}")
        for x in resets:
            if x["done"] < r["invoke"] and w["outcome"] == "ok" and w["done"] < x["invoke"]:
                bad.append(f"{NOTHING_LOST}: read {r['op']} got run {w['run']}'s version, committed before the "
                           f"{x['kind']} {x['op']} that completed before the read began")
    return bad, counts
