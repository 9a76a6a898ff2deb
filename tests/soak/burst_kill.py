"""The kill inside the segment burst (tests/soak/burst.py): where the burst's requests run, the
victim request, and who recovers what the victim left.

Placement: the burst's requests go to the workers in an order that alternates hosts (hostA-w0,
hostB-w0, hostA-w1, ...), so on the two-host fleet (2 workers on hostA, 1 on hostB) the two
requests that must become takes commit from both hosts, and the victim runs on the spare worker
(hostA-w1). On one host: workers 0 and 1, the victim on worker 2.

The victim is held in its slow node after its last segment (Segment Loop End -> Prefix Merge:
every boundary and chunk staged under its run lease, nothing committed) and its worker is
SIGKILLed there. Who recovers its staging (folder/run_lease.py, store/lease.py):

* a run or a ``check --repair`` on the victim's own host, right away: its hostname is the
  lease's and its pid namespace the same, so the dead pid proves the owner dead. On the two-host
  fleet that is the burst's hostA request when its commit comes after the kill (the commit's
  recovery, under the writer lock), else ``python -m reuse_backend check segments --repair`` run
  as hostA (``unshare --uts`` with hostname hostA, in hostA's network namespace, the pid
  namespace shared: NetnsWorker.host_command);
* any other host (hostB's commit, the soak's own checks through the observer mount) only once
  the lease expired (its heartbeat older than the lease, 120 s): until then it calls the staging
  live and leaves it alone. The soak checks that too (the observer's check() reports no stale
  staging of the victim before the repair), without waiting for the expiry.

What the victim left must only ever be repairable (check()), the others still become takes
(burst.py), and after the repair nothing of the victim is left.

On a bucket (tests/soak/bucket_view.py) nothing of a run is shared until its commit record: the
victim leaves its run lease object and its host's local staging, which no check calls a problem
(only collectable garbage) and which a collection removes once the lease expired (the soak's
settle at its end); the burst does not count them as its own leftovers (``lingering``).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading


def placement(fleet, n: int, kill: bool) -> tuple[list[int], int | None]:
    """(worker index of each of the ``n`` requests, the victim's worker index or None)."""
    by_host: dict[str, list[int]] = {}
    for i, w in enumerate(fleet.workers):
        by_host.setdefault(fleet.host_of(w), []).append(i)
    order, queues = [], list(by_host.values())
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    reqs = [order[k % len(order)] for k in range(n)]
    victim = order[n] if kill and len(order) > n else None
    return reqs, victim


def victim(soak, idx: int, n: int, worker: int) -> dict:
    """The victim request on ``worker``, run on a thread beside the burst (started by the caller)."""
    from .soak import HOLD_S, S, SEG_CACHE
    req = soak._draw(idx * 100 + n, (SEG_CACHE, worker))
    req.mode, req.N, req.from_take, req.variant, req.segments = "auto", 0, 0, "", S
    # held after its last segment (Segment Loop End -> Prefix Merge): every boundary and chunk
    # is staged under its run lease, nothing is committed
    req.fault, req.kill_mode, req.where = "kill", "hold", ""
    prompt, last = soak._prompt(req)
    w = soak.fleet.workers[worker]
    v = {"req": req, "worker": w, "hold_s": HOLD_S, "out": {}}

    def run():
        try:
            v["out"]["result"] = soak._run(req, w, prompt, last)
        except BaseException as e:   # noqa: BLE001 - reported by settle
            v["out"]["error"] = f"{type(e).__name__}: {e}"

    v["thread"] = threading.Thread(target=run, name="soak-burst-victim", daemon=True)
    return v


def _tmp_entries(root, name: str) -> list[str]:
    """What is in the cache's ``<name>.tmp/`` (stagings, run leases, claims), sorted."""
    try:
        return sorted(os.listdir(root / f"{name}.tmp"))
    except FileNotFoundError:
        return []


def _repair_on_host(soak, w, name: str) -> tuple[str, list[str]]:
    """``check --repair`` where the dead owner is provable: this process when it runs on ``w``'s
    host (one-host fleet), else a process with ``w``'s hostname (NetnsWorker.host_command).
    Returns (who ran it, the problem codes it repaired)."""
    host = soak.fleet.host_of(w)
    if host == socket.gethostname():
        fixed = [p.code for p in soak.store.check(name, repair=True) if p.repaired]
        return "check --repair in the soak's process (the same host)", fixed
    from .soak import REPO_ROOT
    argv = [sys.executable, "-m", "reuse_backend", "--root", w.env["SEEDREUSE_CACHE_ROOT"], "check", name, "--repair"]
    p = subprocess.run(w.host_command(argv), capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    fixed = [line.split("]", 1)[0].lstrip("[") for line in p.stdout.splitlines() if "] (repaired)" in line]
    if p.returncode != 0:
        raise RuntimeError(f"check --repair as {host} exited {p.returncode}: {(p.stdout + p.stderr)[-800:]}")
    return f"check --repair run as {host} (unshare --uts, same pid namespace)", fixed


def settle(soak, v: dict, others: list) -> list[str]:
    """Wait for the victim's thread, restart its worker, check what the kill left behind (only
    repairable problems; on another host than the victim's, nothing of it called stale before its
    lease expired), have it recovered on its own host; the problems found."""
    from .burst import _wait_queue_empty
    from .soak import SEG_CACHE
    v["thread"].join(v["hold_s"] + soak.cfg.request_timeout_s)
    w, problems = v["worker"], []
    res, _events, info = v["out"].get("result") or (None, [], {})
    if v["out"].get("error") or not info.get("killed"):
        problems.append(f"the burst's kill did not happen: {v['out'].get('error') or 'the run ended unkilled'}")
    else:
        soak.c["burst_kills"] += 1
        soak._restart_in_background(w)
    for x in others:          # their run leases are released after execution_success
        _wait_queue_empty(x)
    host, here = soak.fleet.host_of(w), socket.gethostname()
    if soak.store.kind == "bucket":
        return _settle_on_bucket(soak, v, w, host, info, problems)
    left_files = _tmp_entries(soak.store.root, SEG_CACHE)
    left = soak.store.check(SEG_CACHE)
    bad = [str(p) for p in left if p.code not in soak.store.repairable]
    if bad:
        problems.append(f"the kill left non-repairable problems: {bad}")
    early = [str(p) for p in left if p.code == "stale_tmp" and os.path.basename(p.path) in left_files
             and "heartbeat" not in p.message]
    if host != here and early:
        problems.append(f"{here} (another host than the dead run's {host}) called its staging stale before "
                        f"its lease expired: {early}")
    if left_files:
        who, fixed = _repair_on_host(soak, w, SEG_CACHE)
        after = _tmp_entries(soak.store.root, SEG_CACHE)
        if after:
            problems.append(f"{who} left the dead run's {after}")
        recovered = f"{left_files}, recovered by {who} (repaired {sorted(set(fixed))})"
    else:
        # a commit on the victim's host after the kill recovered it under the writer lock
        # (folder/commit.py): no other host could have (its lease was live for them)
        recovered = f"nothing: a commit from {host} after the kill recovered its staging"
    v["report"] = {"worker": w.name, "host": host, "trigger": info.get("trigger"), "at_kill": info.get("fs_state"),
                   "left": sorted({p.code for p in left}), "left_files": left_files, "recovered": recovered}
    soak.log(f"[soak burst] killed {w.name} on {host} during the segment burst ({info.get('trigger')}; on disk "
             f"then: {info.get('fs_state')}); left after the others' commits: {recovered}; other hosts recover "
             f"it only once its lease expired")
    return problems


def _settle_on_bucket(soak, v: dict, w, host: str, info: dict, problems: list[str]) -> list[str]:
    """The victim on a bucket: no problem but collectable garbage, and what it left (its run lease
    object, its host's local staging) kept aside for the soak's settle, which collects it once
    the lease expired."""
    from .soak import SEG_CACHE
    left = soak.store.problems(SEG_CACHE)
    if left:
        problems.append(f"the kill left problems on the bucket: {[str(p) for p in left]}")
    v["lingering"] = soak.store.left_behind([SEG_CACHE])
    v["report"] = {"worker": w.name, "host": host, "trigger": info.get("trigger"), "left": [],
                   "left_files": v["lingering"], "recovered": "by a collection once its lease expired"}
    soak.log(f"[soak burst] killed {w.name} on {host} during the segment burst ({info.get('trigger')}); it left "
             f"{v['lingering'] or 'nothing'} (nothing shared: no commit record), collected once its lease expired")
    return problems
