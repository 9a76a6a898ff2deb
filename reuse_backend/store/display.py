"""How the cache tool (cli.py) prints a time and a size, on either medium."""
from __future__ import annotations

import time


def when(ts) -> str:
    """A Unix time as local ``YYYY-mm-dd HH:MM:SS``; ``?`` when it is not a number."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) else "?"


def size(n) -> str:
    """A byte count in B, KiB, MiB or GiB; ``?`` when it is not a number."""
    if not isinstance(n, (int, float)):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
