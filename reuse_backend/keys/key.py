"""reuse_key: a canonical, versioned description of what a cached artifact depends on.

A key is a flat mapping ``field -> JSON value``. Its digest is the sha256 of the canonical
JSON (sorted keys, no whitespace, no NaN) together with the key schema and kind, so it is
the same in every process and on every host for the same inputs. The readable fields are
stored in the manifest next to the digest so a mismatch can name the fields that differ.

What the fields of a graph's key cover is stated once, in keys/graph_key.py. A key also
carries, outside its fields and digest, where each field came from (node id and class) and the
seeds and samplers it depends on, so a mismatch names the node and input that changed.
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
    # not part of the key (neither digest nor equality): node path -> (node id, class_type), and
    # the graph_key.Dependency list of what a user re-rolls that this key covers
    origins: dict = field(default_factory=dict, compare=False, repr=False)
    depends: tuple = field(default=(), compare=False, repr=False)

    @classmethod
    def build(cls, kind: str, fields: dict, *, origins: dict | None = None, depends=()) -> "ReuseKey":
        return cls(kind, {str(k): canonical_value(v) for k, v in fields.items()}, dict(origins or {}),
                   tuple(depends))

    def origin_of(self, field_name: str) -> str | None:
        """Where a field comes from, in words ("input `seed` of node 12 (Wildcard)"), or None."""
        path, sep, rest = field_name, "", ""
        for mark in (":", "#"):
            if mark in field_name:
                cut = field_name.index(mark)
                if cut < len(path):
                    path, sep, rest = field_name[:cut], mark, field_name[cut + 1:]
        got = self.origins.get(path)
        if got is None:
            return None
        node, ct = got
        if sep == ":":
            name = rest.split("@", 1)[0]
            return f"input `{name}` of node {node} ({ct})"
        if sep == "#":
            return f"the {rest} of node {node} ({ct})"
        return f"node {node} ({ct})"

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
    origin: str | None = None      # where the field comes from in the current graph, in words

    def describe(self) -> str:
        def short(v):
            s = canonical_json(v) if v is not _MISSING else "<absent>"
            return s if len(s) <= 80 else s[:77] + "..."
        where = f" ({self.origin})" if self.origin else ""
        return f"{self.field}{where}: cached {short(self.cached)} != current {short(self.current)}"


_MISSING = object()


def diff(cached: dict, current: ReuseKey) -> list[FieldDiff]:
    """Compare a stored key dict with a freshly computed key.

    Checks run in a fixed order: schema, kind, then every field name in sorted order
    (fields only in one of the two are reported with ``<absent>`` on the other side: a field the
    cached key lacks is a difference, so a cache written before keys covered an input never
    matches a graph where that input is present).
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
            out.append(FieldDiff(name, a, b, current.origin_of(name)))
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
        details={"fields": [{"field": d.field, "where": d.origin,
                             "cached": None if d.cached is _MISSING else d.cached,
                             "current": None if d.current is _MISSING else d.current} for d in diffs],
                 "depends_on": [dep.describe() for dep in current.depends]},
    )
