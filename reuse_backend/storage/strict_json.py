"""Strict JSON for everything read from a cache folder (manifest, tensor-file headers).

``loads`` refuses what ``json.loads`` silently accepts and a hostile writer could use to make
two readers disagree: duplicate keys (last one wins in Python, first in other parsers) and the
non-standard constants NaN / Infinity. Nesting is bounded by the interpreter (RecursionError is
reported as invalid, never as a crash), or by ``max_depth`` checked before parsing.
"""
from __future__ import annotations

import json
import re

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings skipped), without
    parsing it."""
    deepest = level = 0
    for b in _BRACKETS.findall(_STRING.sub("", text)):
        level += 1 if b in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def _no_duplicates(pairs: list) -> dict:
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def loads(text: str | bytes, *, max_depth: int | None = None):
    """``json.loads`` refusing duplicate keys and NaN/Infinity, and (``max_depth``) nesting
    deeper than that before parsing.

    Raises ValueError (also UnicodeDecodeError, a subclass) or RecursionError.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if max_depth is not None and depth(text) > max_depth:
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def brief(v: object, limit: int = 200) -> str:
    """A short repr for error messages."""
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "..."
