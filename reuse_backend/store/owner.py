"""Who a process is, as far as a lock can tell: host name, pid, pid start time, pid namespace.

A lock owner's death is provable only on the same host and in the same pid namespace (pids of
containers sharing a host name are not comparable); elsewhere only the lease decides.
"""
from __future__ import annotations

import os
import platform


def hostname() -> str:
    return platform.node()


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
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True
