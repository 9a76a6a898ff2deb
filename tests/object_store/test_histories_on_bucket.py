"""Randomized histories against the real gateway (issue 41, "a model-checked protocol"): several
writers, readers and a janitor (collections, ``clear``), each a process of its own
(history_actor.py) on two simulated hosts (a local tier each, shared by that host's processes),
with SIGKILLs of writers at random instants and a wipe of the cache's prefix, every operation
recorded as it was invoked and completed; after each history these properties are checked (by
name: the numbers are the store's invariants, store/interface.py):

- only successful runs (Invariant 1): every version a reader got was staged whole by a run whose
  commit succeeded or whose outcome is unknown (killed, or the endpoint stopped answering), never
  by a run that failed, and it is the version that run reported;
- only named objects (Invariant 2): a reader never gets an object its version does not name: both
  slots it loaded hold the markers its run staged (slot image: its own, or the one it carried from
  its base);
- nothing lost (Invariant 6): no read fails for a missing or replaced object unless the prefix was
  wiped during it, and after a wipe (or a successful ``clear``) no reader is served a version
  committed before it;
- usable at the end: once every actor stopped and the killed runs' leases expired,
  ``check --repair`` leaves nothing to report, and a new run commits and is read back whole.

Bounded and seeded: ``SEEDREUSE_HISTORY_SEED`` (default 41; each history's seed is derived from it
and printed), ``SEEDREUSE_HISTORIES`` (3), ``SEEDREUSE_HISTORY_SECONDS`` (20 s of operations
each); about two minutes in all on the project's 2-core machine. The totals are printed.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from reuse_backend.bucket import location
from reuse_backend.bucket.store import BucketStore

from . import history_check
from .bucket_help import REPO, commit, read_back

pytestmark = pytest.mark.hostfree
SEED = int(os.environ.get("SEEDREUSE_HISTORY_SEED") or 41)
HISTORIES = int(os.environ.get("SEEDREUSE_HISTORIES") or 3)
SECONDS = float(os.environ.get("SEEDREUSE_HISTORY_SECONDS") or 20)
LEASE_S = 3.0
ROLES = ("writer", "writer", "writer", "reader", "reader", "janitor")


class Actor:
    def __init__(self, role, url, name, root, actor, number, seed, env, sink):
        self.role, self.id, self.sink = role, actor, sink
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.object_store.history_actor", role, url, name, str(root), actor,
             str(number), str(seed)], cwd=REPO, env={**os.environ, **env}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            self.sink.append({**ev, "actor": self.id})

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self.reader.join(10)
        self.sink.append({"t": time.time(), "op": f"{self.id}/killed", "kind": "killed", "phase": "note",
                          "actor": self.id})

    def stop(self, bound: float = 30.0):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(bound)
        except subprocess.TimeoutExpired:
            self.kill()
            return
        self.reader.join(10)


def run_history(url: str, name: str, base, seed: int, env: dict) -> list[dict]:
    rng = random.Random(seed)
    events: list[dict] = []
    hosts = [base / "host-a", base / "host-b"]
    actors, numbers = [], iter(range(1, 10_000))

    def start(role):
        n = next(numbers)
        a = Actor(role, url, name, hosts[n % 2], f"{role[0]}{n}", n, rng.randrange(1 << 30), env, events)
        actors.append(a)
        return a
    for role in ROLES:
        start(role)
    t0 = time.time()
    kills = sorted(t0 + 4 + rng.random() * (SECONDS - 4) for _ in range(rng.randint(2, 4)))
    wipe_at = t0 + 6 + rng.random() * (SECONDS - 8) if rng.random() < 0.7 else None
    keys = location.parse(url).cache(name)
    while time.time() < t0 + SECONDS:
        if kills and time.time() >= kills[0]:
            kills.pop(0)
            live = [a for a in actors if a.role == "writer" and a.proc.poll() is None]
            if live:
                victim = rng.choice(live)
                victim.kill()
                start("writer")
        if wipe_at is not None and time.time() >= wipe_at:
            wipe_at = None
            events.append({"t": time.time(), "op": "wipe", "kind": "wipe", "phase": "invoke", "actor": "harness"})
            from reuse_backend.bucket import client as clients       # noqa: PLC0415 - the harness's own hand
            c = clients.for_bucket(keys.loc.bucket)
            gone = [o.key for o in c.list(keys.base)[0]]
            c.delete_many(gone)
            events.append({"t": time.time(), "op": "wipe", "kind": "wipe", "phase": "ok", "actor": "harness",
                           "deleted": len(gone)})
        time.sleep(0.05)
    for a in actors:                             # each finishes the operation it is in, then ends
        if a.proc.poll() is None:
            a.proc.stdin.close()
    for a in actors:
        if a.proc.poll() is None:
            a.stop()
    return events


def _final(url, name, base) -> list[str]:
    """Invariant 4, after every lease expired."""
    store = BucketStore(url, base / "checker")
    store.check(name, repair=True)
    left = store.check(name)
    out = [f"usable at the end: after repair, check reports {p.code} {p.path}" for p in left]
    try:
        _, v = commit(url, base / "final-writer", 4242, name=name)
        got = read_back(url, base / "final-reader", name=name)
        if got != (v, 4242.0):
            out.append(f"usable at the end: the final run's version {v} read back as {got}")
    except Exception as e:  # noqa: BLE001 - a violation, reported with the others
        out.append(f"usable at the end: the final run failed: {type(e).__name__}: {e}")
    return out


def test_randomized_histories_keep_the_invariants(bucket_url, s3env, tmp_path):
    env = {**s3env, "SEEDREUSE_LEASE_S": str(LEASE_S)}
    master = random.Random(SEED)
    totals: Counter = Counter()
    violations = []
    print(f"\n[histories] seed {SEED}: {HISTORIES} histories of {SECONDS:g} s of operations "
          f"(SEEDREUSE_HISTORY_SEED / SEEDREUSE_HISTORIES / SEEDREUSE_HISTORY_SECONDS)")
    for i in range(HISTORIES):
        seed = master.randrange(1 << 30)
        name = f"h{i}"
        events = run_history(bucket_url, name, tmp_path / name, seed, env)
        time.sleep(LEASE_S + 2)                  # the killed runs' leases expire
        bad, counts = history_check.check(events)
        bad += _final(bucket_url, name, tmp_path / name)
        kills = sum(1 for e in events if e["kind"] == "killed")
        wipes = sum(1 for e in events if e["kind"] == "wipe" and e["phase"] == "ok")
        print(f"[histories] history {i} (seed {seed}): {sum(counts.values())} operations "
              f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}), {kills} kills, {wipes} wipes, "
              f"{len(bad)} violations")
        durations = {}
        for k in ("commit", "read", "collect"):
            d = sorted(x["done"] - x["invoke"] for x in history_check.operations(events) if x["kind"] == k and x["done"] != float("inf"))
            durations[k] = f"{d[len(d) // 2]:.2f} s" if d else "-"
        print(f"[histories] median time per operation: {durations}")
        totals.update(counts)
        totals["kills"] += kills
        totals["wipes"] += wipes
        violations += [f"history {i} (seed {seed}): {b}" for b in bad]
    ops = sum(v for k, v in totals.items() if k not in ("kills", "wipes"))
    print(f"[histories] totals: {HISTORIES} histories, {ops} operations checked "
          f"({', '.join(f'{k} {v}' for k, v in sorted(totals.items()))}), {len(violations)} violations")
    assert not violations, "\n".join(violations[:20])
