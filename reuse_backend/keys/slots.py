"""Encoder Reuse decisions: reuse a cached slot, or encode and stage it.

``decide_slot`` is the single place where the reuse modes are interpreted:

- ``off``     a normal request: always encode; with a cache configured the run still stages
              its outputs, so a successful run creates the cache for its successor;
- ``auto``    reuse when the committed slot's key matches, else encode and replace;
- ``require`` reuse, or fail before any sampling with the differing key fields
              (or "no successful run in cache X yet").

A committed slot is reused only when it is also usable: an unreadable cache version
(``snapshot_error``), a slot file that does not load, or a value of the wrong dtype/shape or
with NaN/Inf (``inspect``, see ``value_checks.inspect_slot``) is rebuilt under ``auto`` (the
encoder runs; the prompt's commit replaces the broken version) and fails under ``require``
with what is broken and how to fix it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CorruptCacheError, InvalidRequestError, KeyMismatchError, NoCommittedCacheError
from .key import ReuseKey, ensure_match
from .value_checks import unreadable_cache_error

MODES = ("off", "auto", "require")


@dataclass
class SlotDecision:
    slot: str
    action: str            # "reuse" | "encode"
    reason: str
    key: ReuseKey
    cached_meta: dict = field(default_factory=dict)
    mismatch: list = field(default_factory=list)   # differing fields when a key did not match
    value: object = field(default=None, repr=False)  # the checked value inspect() loaded (reuse)
    load_seconds: float = 0.0
    # the value is another run's fresh encoding of this key (single flight), not this prompt's
    # committed version: the run stages it as its own (nodes/encode_nodes.py)
    adopted: bool = False

    def to_dict(self) -> dict:
        return {"slot": self.slot, "action": self.action, "reason": self.reason,
                "key": self.key.digest, "cached_meta": self.cached_meta, "mismatch": self.mismatch}


def depends_note(key: ReuseKey) -> str:
    """The seeds and samplers a slot's key depends on, in words ("" when none): a value that
    depends on one is reused only while it is unchanged (keys/graph_key.py: what a key covers)."""
    deps = list(key.depends)
    if not deps:
        return ""
    more = f" (and {len(deps) - 2} more)" if len(deps) > 2 else ""
    return "; " + "; ".join(d.describe() for d in deps[:2]) + more


def validate_mode(mode: str) -> str:
    if mode not in MODES:
        raise InvalidRequestError("unknown reuse mode", expected=" | ".join(MODES), actual=mode,
                                  fix="pick off, auto or require")
    return mode


def decide_slot(snapshot, *, cache_name: str, slot: str, key: ReuseKey, mode: str,
                snapshot_error: CorruptCacheError | None = None, inspect=None,
                gone: str | None = None) -> SlotDecision:
    """Decide for one slot against a committed snapshot (None when the cache is empty, or when
    its committed version is unreadable: then ``snapshot_error`` says why; or when it was
    removed while being read: then ``gone``, ``Cache.gone``, says how).

    ``inspect(snapshot)``, called only when the key matches, checks that the committed slot is
    usable: it returns ``(value, load_seconds)`` (value None when it only validated) or raises
    ``CorruptCacheError`` carrying the ``require`` message and ``details['reason']`` for auto."""
    validate_mode(mode)
    if mode == "off":
        return SlotDecision(slot, "encode", "reuse is off: encoding (the cache is refreshed when the run succeeds)", key)
    if snapshot is None and snapshot_error is not None:
        err = unreadable_cache_error(cache_name, snapshot_error)
        if mode == "require":
            raise err
        return SlotDecision(slot, "encode", err.details["reason"], key)
    if snapshot is None and gone:
        if mode == "require":
            raise NoCommittedCacheError(
                f"cache '{cache_name}' was removed while being read: {gone}",
                expected="a committed cache", actual="removed (cleared, deleted or evicted) just now",
                fix="queue the prompt again with reuse 'auto' (it encodes and creates the cache again); "
                    "see who removed it: python -m reuse_backend clear, the cache browser's delete, "
                    "gc or the size budget (SEEDREUSE_MAX_BYTES)")
        return SlotDecision(slot, "encode", f"cache '{cache_name}' was removed while being read: encoding", key)
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
        fields = [f"{d['field']} ({d['where']})" if d.get("where") else d["field"]
                  for d in e.details.get("fields", [])]
        return SlotDecision(slot, "encode", f"inputs changed ({', '.join(fields[:4])}"
                            f"{' …' if len(fields) > 4 else ''}): encoding{depends_note(key)}", key,
                            mismatch=e.details.get("fields", []))
    value, load_s = None, 0.0
    if inspect is not None:
        try:
            value, load_s = inspect(snapshot)
        except CorruptCacheError as e:
            if mode == "require":
                raise
            return SlotDecision(slot, "encode", e.details.get("reason") or f"cache slot unreadable: {e.message}", key)
    return SlotDecision(slot, "reuse", f"key matches the last successful run in '{cache_name}'{depends_note(key)}", key,
                        cached_meta=dict(entry.get("meta") or {}), value=value, load_seconds=load_s)
