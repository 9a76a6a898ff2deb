"""Is a lease file live or stale (lock.py): the judgement every role shares.

A lease file is stale when its owner is provably dead (same host and pid namespace: the pid is
gone or was reused) or when its heartbeat (the file's mtime) is older than its lease; a record
naming this very process is stale only when this process no longer holds it (the registry of
run ids whose lease files this process holds, ``_activate``).

What this does not guarantee: across hosts only the heartbeat's age speaks, so the clocks of hosts
sharing a cache must agree to within the lease (mtimes are set by the writer's clock or the
file server's).
"""
from __future__ import annotations

import os
import threading
import time
from collections import Counter

from .lock_file import read_lock
from .owner import hostname, pid_alive, pid_namespace, pid_start

_ACTIVE: Counter = Counter()  # run ids whose lock this process holds (or is creating) now
_ACTIVE_GUARD = threading.Lock()


def _activate(run_id: str, delta: int) -> None:
    with _ACTIVE_GUARD:
        _ACTIVE[run_id] += delta
        if _ACTIVE[run_id] <= 0:
            del _ACTIVE[run_id]


# Some filesystems store mtime in whole seconds (MooseFS): a heartbeat can look up to this much
# older than it is, so a lock is judged stale only past lease + MTIME_SLACK_S.
MTIME_SLACK_S = 1.0


def _own_lock(owner: dict) -> str | None:
    pid = owner["pid"]
    if owner.get("pid_start") == pid_start(pid) and owner.get("run_id") not in _ACTIVE:
        return f"owner is this process (pid {pid}) and no longer holds run {owner.get('run_id')}"
    return None


def judge(owner: dict | None, st: os.stat_result, default_lease_s: float, *, own=_own_lock,
          who: str = "owner") -> str | None:
    """Why this lock (or reader lease, readers.py: ``own``/``who``) is stale ("dead owner ...",
    "heartbeat ..."), or None when it is live. ``own(owner)`` judges a record naming this very
    process (does it still hold it?)."""
    # Death is provable only on this host and in this pid namespace (containers sharing a
    # host name, e.g. with host networking, have their own pids); elsewhere only the lease.
    if owner is not None and owner.get("host") == hostname() and isinstance(owner.get("pid"), int) \
            and owner.get("pid_ns") == pid_namespace():
        pid = owner["pid"]
        if pid == os.getpid():
            reason = own(owner)
            if reason:
                return reason
        elif not pid_alive(pid):
            return f"{who} pid {pid} on this host is gone"
        else:
            rec, now = owner.get("pid_start"), pid_start(pid)
            if rec is not None and now is not None and rec != now:
                return f"{who} pid {pid} was reused by another process"
    lease = owner.get("lease_s") if owner else None
    if not isinstance(lease, (int, float)) or isinstance(lease, bool) or lease <= 0:
        lease = default_lease_s
    age = time.time() - st.st_mtime
    if age > lease + MTIME_SLACK_S:
        return f"heartbeat is {age:.0f}s old (lease {lease:.0f}s)"
    return None


def lock_status(lock_path, lease_s: float = 120.0) -> dict:
    """{"state": "free" | "live" | "stale", "owner": dict|None, "reason": str|None}."""
    owner, st = read_lock(lock_path)
    if st is None:
        return {"state": "free", "owner": None, "reason": None}
    reason = judge(owner, st, lease_s)
    return {"state": "stale" if reason else "live", "owner": owner, "reason": reason}
