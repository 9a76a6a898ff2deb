"""Encoder Reuse decisions: reuse a cached slot, or encode and stage it.

``decide_slot`` is the single place where the reuse modes are interpreted:

- ``off``     a normal request: always encode; with a cache configured the run still stages
              its outputs, so a successful run creates the cache for its successor;
- ``auto``    reuse when the committed slot's key matches, else encode and replace;
- ``require`` reuse, or fail before any sampling with the differing key fields
              (or "no successful run in cache X yet").
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InvalidRequestError, KeyMismatchError, NoCommittedCacheError
from .key import ReuseKey, ensure_match

MODES = ("off", "auto", "require")


@dataclass
class SlotDecision:
    slot: str
    action: str            # "reuse" | "encode"
    reason: str
    key: ReuseKey
    cached_meta: dict = field(default_factory=dict)
    mismatch: list = field(default_factory=list)   # differing fields when a key did not match

    def to_dict(self) -> dict:
        return {"slot": self.slot, "action": self.action, "reason": self.reason,
                "key": self.key.digest, "cached_meta": self.cached_meta, "mismatch": self.mismatch}


def validate_mode(mode: str) -> str:
    if mode not in MODES:
        raise InvalidRequestError("unknown reuse mode", expected=" | ".join(MODES), actual=mode,
                                  fix="pick off, auto or require")
    return mode


def decide_slot(snapshot, *, cache_name: str, slot: str, key: ReuseKey, mode: str) -> SlotDecision:
    """Decide for one slot against a committed snapshot (None when the cache is empty)."""
    validate_mode(mode)
    if mode == "off":
        return SlotDecision(slot, "encode", "reuse is off: encoding (the cache is refreshed when the run succeeds)", key)
    if snapshot is None:
        if mode == "require":
            raise NoCommittedCacheError(
                f"no successful run in cache '{cache_name}' yet",
                expected="a committed cache", actual="none",
                fix="run the workflow once with reuse 'off' or 'auto' and let it finish successfully")
        return SlotDecision(slot, "encode", f"no successful run in cache '{cache_name}' yet", key)
    entry = snapshot.slot_entry(slot)
    if entry is None:
        present = sorted((snapshot.manifest.get("slots") or {}).keys())
        if mode == "require":
            raise NoCommittedCacheError(
                f"cache '{cache_name}' has no slot '{slot}'",
                expected=f"slot '{slot}'", actual=f"slots {present}",
                fix="check the slot name, or run once with reuse 'auto' to add it")
        return SlotDecision(slot, "encode", f"slot '{slot}' is not in cache '{cache_name}' yet", key)
    try:
        ensure_match(entry["key"], key, cache_name=cache_name, what=f"slot '{slot}'")
    except KeyMismatchError as e:
        if mode == "require":
            raise
        fields = [d["field"] for d in e.details.get("fields", [])]
        return SlotDecision(slot, "encode", f"inputs changed ({', '.join(fields[:4])}"
                            f"{' …' if len(fields) > 4 else ''}): encoding", key,
                            mismatch=e.details.get("fields", []))
    return SlotDecision(slot, "reuse", f"key matches the last successful run in '{cache_name}'", key,
                        cached_meta=dict(entry.get("meta") or {}))
