"""Who a process is, as a lease records it: the owner record (run id, role, host, pid, pid start time,
pid namespace, when, for how long), and the bounded, validated reading of one written by anyone
(store/lease.py judges it). A pid is comparable only on its host and in its pid namespace
(containers sharing a host name have their own pids)."""
from __future__ import annotations

import math
import os
import platform
import time

from ..storage import strict_json

MAX_OWNER_BYTES = 64 << 10
MAX_OWNER_DEPTH = 4
_TEXT_FIELDS = {"run_id": 128, "role": 32, "host": 255, "pid_ns": 64, "cache": 64}

hostname = platform.node


def pid_start(pid: int) -> int | None:
    """Start time of ``pid`` (clock ticks since boot, /proc/<pid>/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_namespace() -> str | None:
    """Identity of this process's pid namespace: pids are only comparable within one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    return True


def owner_record(run_id: str, role: str, lease_s: float, **extra) -> dict:
    """The owner record of a lease (and of a run's local staging) taken by this process now."""
    pid = os.getpid()
    return {"run_id": str(run_id), "role": role, "host": hostname(), "pid": pid, "pid_start": pid_start(pid),
            "pid_ns": pid_namespace(), "started_at": time.time(), "lease_s": float(lease_s), **extra}


def _number(v, lo: float, hi: float) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi


_CHECKS = {"pid": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 32,
           "pid_start": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
           "lease_s": lambda v: _number(v, 1e-3, 1e300),
           "started_at": lambda v: _number(v, 0, 1e11)}


def parse_owner(data: bytes, extra_checks: dict | None = None) -> dict | None:
    """The owner record in ``data`` (a lease written by anyone), bounded before it is parsed and
    validated field by field (``extra_checks``: a medium's own, name -> predicate), or None: then the
    lease is nobody's and judged by its age alone."""
    if len(data) > MAX_OWNER_BYTES:
        return None
    try:
        raw = strict_json.loads(data, max_depth=MAX_OWNER_DEPTH)
    except (ValueError, RecursionError):
        return None
    if type(raw) is not dict or not isinstance(raw.get("run_id"), str) or not raw["run_id"]:
        return None
    out = {}
    for k, limit in _TEXT_FIELDS.items():
        v = raw.get(k)
        if v is not None and (not isinstance(v, str) or len(v) > limit):
            return None
        out[k] = v
    for k, ok in {**_CHECKS, **(extra_checks or {})}.items():
        v = raw.get(k)
        if v is not None and not ok(v):
            return None
        out[k] = v
    return out


def describe(owner: dict | None) -> str:
    """Who holds a lease, for messages."""
    if not owner:
        return "an unknown run (unreadable lease)"
    started = owner.get("started_at")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return f"run {owner.get('run_id')} on host {owner.get('host')} (pid {owner.get('pid')}) since {when}"
