"""How the cache tool prints a time and a size (cli.py on a folder, bucket/commands.py on a bucket):
one format for both stores, so their listings read the same."""
from __future__ import annotations

import time


def when(ts) -> str:
    """A Unix time as local ``YYYY-mm-dd HH:MM:SS``; ``?`` when it is not a number."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) else "?"


def size(n) -> str:
    """A byte count in B, KiB, MiB or GiB; ``?`` when it is not a number."""
    if not isinstance(n, (int, float)):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
