"""Strict JSON for everything read from a cache folder (manifest, tensor-file headers).

``loads`` refuses what ``json.loads`` silently accepts and a hostile writer could use to make
two readers disagree: duplicate keys (last one wins in Python, first in other parsers) and the
non-standard constants NaN / Infinity. Nesting is bounded by the interpreter (RecursionError is
reported as invalid, never as a crash).
"""
from __future__ import annotations

import json


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def _no_duplicates(pairs: list) -> dict:
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def loads(text: str | bytes):
    """``json.loads`` refusing duplicate keys and NaN/Infinity.

    Raises ValueError (also UnicodeDecodeError, a subclass) or RecursionError.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def brief(v: object, limit: int = 200) -> str:
    """A short repr for error messages."""
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "..."
