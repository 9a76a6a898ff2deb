"""reuse_key: a canonical, versioned description of what a cached artifact depends on.

A key is a flat mapping ``field -> JSON value``. Its digest is the sha256 of the canonical
JSON (sorted keys, no whitespace, no NaN) together with the key schema and kind, so it is
the same in every process and on every host for the same inputs. The readable fields are
stored in the manifest next to the digest so a mismatch can name the fields that differ.

Seeds, reuse controls and output paths never enter a key: they are what the next request
is allowed to change (see graph_key.EXCLUDED_INPUTS).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

from ..errors import KeyMismatchError

KEY_SCHEMA = "seedreuse-key/1"
MAX_LISTED_FIELDS = 8


def canonical_value(v):
    """Map a value onto the JSON subset used in keys (floats without NaN/inf, str keys)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return {"float": repr(v)}
        if v.is_integer() and abs(v) < 2 ** 53:
            return {"float": repr(v)}  # keep 1.0 distinct from 1
        return v
    if isinstance(v, dict):
        return {str(k): canonical_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [canonical_value(x) for x in v]
    return {"repr": f"{type(v).__name__}:{v!r}"}


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class ReuseKey:
    kind: str
    fields: dict = field(default_factory=dict)

    @classmethod
    def build(cls, kind: str, fields: dict) -> "ReuseKey":
        return cls(kind, {str(k): canonical_value(v) for k, v in fields.items()})

    def canonical(self) -> str:
        return canonical_json({"schema": KEY_SCHEMA, "kind": self.kind, "fields": self.fields})

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()

    def to_dict(self) -> dict:
        return {"schema": KEY_SCHEMA, "kind": self.kind, "digest": self.digest, "fields": self.fields}


@dataclass(frozen=True)
class FieldDiff:
    field: str
    cached: object
    current: object

    def describe(self) -> str:
        def short(v):
            s = canonical_json(v) if v is not _MISSING else "<absent>"
            return s if len(s) <= 80 else s[:77] + "..."
        return f"{self.field}: cached {short(self.cached)} != current {short(self.current)}"


_MISSING = object()


def diff(cached: dict, current: ReuseKey) -> list[FieldDiff]:
    """Compare a stored key dict with a freshly computed key.

    Checks run in a fixed order: schema, kind, then every field name in sorted order
    (fields only in one of the two are reported with ``<absent>`` on the other side).
    """
    out: list[FieldDiff] = []
    if cached.get("schema") != KEY_SCHEMA:
        out.append(FieldDiff("(key schema)", cached.get("schema"), KEY_SCHEMA))
    if cached.get("kind") != current.kind:
        out.append(FieldDiff("(key kind)", cached.get("kind"), current.kind))
    cf = cached.get("fields") or {}
    for name in sorted(set(cf) | set(current.fields)):
        a = cf.get(name, _MISSING)
        b = current.fields.get(name, _MISSING)
        if a != b or (a is _MISSING) != (b is _MISSING):
            out.append(FieldDiff(name, a, b))
    return out


def ensure_match(cached: dict, current: ReuseKey, *, cache_name: str, what: str) -> None:
    """Raise KeyMismatchError naming the differing fields, or return when the keys match."""
    if cached.get("digest") == current.digest and cached.get("fields") == current.fields:
        return
    diffs = diff(cached, current)
    if not diffs:  # digest differs only: stored digest tampered or schema drift
        diffs = [FieldDiff("(digest)", cached.get("digest"), current.digest)]
    listed = "; ".join(d.describe() for d in diffs[:MAX_LISTED_FIELDS])
    more = f" (and {len(diffs) - MAX_LISTED_FIELDS} more)" if len(diffs) > MAX_LISTED_FIELDS else ""
    raise KeyMismatchError(
        f"cache '{cache_name}' holds {what} made from different inputs: {len(diffs)} field(s) differ: {listed}{more}",
        expected=f"cached key {cached.get('digest', '?')[:12]}",
        actual=f"current key {current.digest[:12]}",
        fix="set reuse to 'auto' (re-encode and replace the cache), run a normal request first, "
            "or use another cache name for this configuration",
        details={"fields": [{"field": d.field,
                             "cached": None if d.cached is _MISSING else d.cached,
                             "current": None if d.current is _MISSING else d.current} for d in diffs]},
    )
