"""Durations and counts from the environment, one parsing for every SEEDREUSE_* setting of seconds."""
from __future__ import annotations

import logging
import os

log = logging.getLogger("seedreuse")


def seconds(name: str, default: float, *, allow_zero: bool = False) -> float:
    """``name`` as seconds (> 0, or >= 0 with ``allow_zero``; finite), else ``default`` (a bad
    value is logged and ignored)."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        v = float(raw)
        if v == v and v != float("inf") and (v > 0 or allow_zero and v == 0):
            return v
    except ValueError:
        pass
    log.warning("ignoring %s=%r (expected seconds %s 0)", name, raw, ">=" if allow_zero else ">")
    return default
