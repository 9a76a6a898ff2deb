"""Leases on a bucket: run leases, reader leases and single-flight claims as small objects.

A lease object holds JSON {run_id, host, pid, role, since, exact, lease_s, started_at}; its
heartbeat is its ``LastModified``, set by the store's clock at every rewrite (every
``heartbeat_s``), and it is judged against the store's clock (``Client.server_now``): stale once
older than its lease plus one second, so the workers' clocks need not agree with each other or
with the store.

Invariant (a body is bounded and validated before use): a lease body is at most
``MAX_LEASE_BYTES``, nested at most ``MAX_DEPTH`` levels, and each field is checked (``owner_of``);
one that is not is nobody's and is judged by its age alone, with the judge's own lease. The
lifetime a body claims is trusted up to ``MAX_LEASE_S`` (an hour, or the judge's own lease when
longer): an object that says ``lease_s: 1e300`` is stale an hour after its last write.

* run lease ``leases/<run id>.json`` (unique name: created with a plain PUT): a run is alive; its
  ``since`` keeps every version from ``since`` on (collect.py) until the run has read its base,
  then ``exact`` (``since`` is its base: that version is kept, and the records after it);
* reader lease ``readers/<id>.json``: a reader downloading files of version ``since``;
* claim ``claims/<slot>-<digest>.json``: created with ``If-None-Match: *`` (one holder), taken over
  from a stale holder with ``If-Match`` on the stale ETag (one taker), rewritten by its holder with
  ``If-Match`` on its own ETag (a holder that was taken over learns it at its next beat).

Invariant (fencing does not rest on these): a lease says a run is alive, so that collections
leave its objects alone; whether a stalled run may publish is decided by the commit log (a
fence record naming it, commit.py), never by a lease's age alone.

What this does not guarantee: a heartbeat that keeps failing (the store unreachable) gives the
lease up after one lease; the run then publishes nothing (``held()`` is False).
"""
from __future__ import annotations

import json
import logging
import math
import os
import socket
import threading
import time

from ..errors import ObjectStoreError
from ..storage import strict_json
from .client import Client, NotFound, Precondition, TooLarge
from .location import MAX_SEQ, RUN_ID

log = logging.getLogger("seedreuse")

SLACK_S = 1.0
MAX_LEASE_BYTES = 64 << 10
MAX_DEPTH = 4
MAX_LEASE_S = 3600.0
_TEXT = {"host": 255, "role": 32}


def body(run_id: str, role: str, lease_s: float, since: int | None = None, **extra) -> dict:
    return {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(), "role": role,
            "since": since, "exact": False, "lease_s": float(lease_s), "started_at": time.time(), **extra}


def _number(v, lo: float, hi: float) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi


def owner_of(raw) -> dict | None:
    """The validated owner of a lease body (the fields this store reads, each checked), or None
    when the body is not one of ours."""
    if type(raw) is not dict or not isinstance(raw.get("run_id"), str) or not RUN_ID.fullmatch(raw["run_id"]):
        return None
    out = {"run_id": raw["run_id"]}
    for k, limit in _TEXT.items():
        v = raw.get(k)
        if v is not None and (not isinstance(v, str) or len(v) > limit):
            return None
        out[k] = v
    checks = {"pid": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 32,
              "since": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_SEQ,
              "exact": lambda v: isinstance(v, bool),
              "lease_s": lambda v: _number(v, 1e-3, 1e300) and v > 0,
              "started_at": lambda v: _number(v, 0, 1e11)}
    for k, ok in checks.items():
        v = raw.get(k)
        if v is not None and not ok(v):
            return None
        out[k] = v
    return out


def read(client: Client, key: str):
    """(owner or None when it is not a valid lease body, Obj) of a lease object, or (None, None)
    when absent. Bounded: a body over MAX_LEASE_BYTES or nested deeper than MAX_DEPTH is refused
    before it is parsed."""
    try:
        obj = client.get(key, MAX_LEASE_BYTES)
    except NotFound:
        return None, None
    except TooLarge:
        return None, client.head(key)
    try:
        owner = owner_of(strict_json.loads(obj.body, max_depth=MAX_DEPTH))
    except (ValueError, RecursionError) as e:
        log.debug("seedreuse: %s is not a lease body (%s): judged by its age", key, str(e)[:80])
        owner = None
    return owner, obj


def stale_reason(owner: dict | None, modified: float, now: float, default_lease_s: float) -> str | None:
    """Why the lease is stale (its heartbeat older than its lease plus SLACK_S), or None. The
    body's lifetime is trusted up to MAX_LEASE_S (or the judge's own lease when longer)."""
    lease = owner.get("lease_s") if isinstance(owner, dict) else None
    if not _number(lease, 1e-3, 1e300):
        lease = default_lease_s
    lease = min(lease, max(MAX_LEASE_S, default_lease_s))
    age = now - modified
    return f"heartbeat is {age:.0f}s old (lease {lease:.0f}s)" if age > lease + SLACK_S else None


class RemoteLease:
    """One lease object held by this process (acquire, beat, held, release)."""

    def __init__(self, client: Client, key: str, owner: dict, *, lease_s: float, heartbeat_s: float):
        self.client, self.key, self.path = client, key, key
        self.owner, self.lease_s, self.heartbeat_s = owner, float(lease_s), float(heartbeat_s)
        self.run_id = owner["run_id"]
        self.etag: str | None = None
        self.lost = False
        self.heartbeat_error: BaseException | None = None
        self.broke: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writing = threading.Lock()         # a rewrite by update() and one by the heartbeat: one at a time

    def _data(self) -> bytes:
        return json.dumps(self.owner, sort_keys=True).encode()

    def create(self, *, exclusive: bool) -> "RemoteLease":
        """Write it (``exclusive``: If-None-Match, Precondition when another holds the name)."""
        self.etag = self.client.put(self.key, self._data(), create_only=exclusive)
        self._start()
        return self

    def take_over(self, stale_etag: str, reason: str, who: str) -> "RemoteLease":
        """Replace a stale holder's object (If-Match on its ETag: one taker wins)."""
        self.etag = self.client.put(self.key, self._data(), if_match=stale_etag)
        self.broke.append(f"broke stale {self.owner.get('role')} of {who}: {reason}")
        self._start()
        return self

    def update(self, **fields) -> None:
        """Rewrite the body now (e.g. a claim's entry, a lease's narrowed ``since``)."""
        self.owner = {**self.owner, **fields}
        self._beat_once()

    def _start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"seedreuse-s3-heartbeat-{self.run_id}",
                                        daemon=True)
        self._thread.start()

    def _beat_once(self) -> None:
        with self._writing:
            self.etag = self.client.put(self.key, self._data(), if_match=self.etag)

    def _beat(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self.heartbeat_s):
            try:
                self._beat_once()
                last_ok = time.monotonic()
                continue
            except (Precondition, NotFound) as e:       # taken over or removed by a collection
                self.heartbeat_error = e
            except Exception as e:  # noqa: BLE001 - the store did not answer: retry within the lease
                self.heartbeat_error = e
                if time.monotonic() - last_ok < self.lease_s - self.heartbeat_s:
                    log.warning("seedreuse: heartbeat of %s failed (%s); retrying", self.key, e)
                    continue
            self.lost = True
            log.error("seedreuse: run %s lost its %s %s (%s); its writes are refused from now on",
                      self.run_id, self.owner.get("role"), self.key, self.heartbeat_error)
            return

    def held(self) -> bool:
        return self.etag is not None and not self.lost

    def abandon(self) -> None:
        """Stop beating and never delete the object: it turns stale and a collection fences this
        run before it removes anything of it (a commit whose outcome is unknown, commit.py)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=10)
        self._thread, self.etag = None, None

    def verify(self) -> bool:
        """One request: the object is still ours (the commit's last look before publishing)."""
        if not self.held():
            return False
        try:
            return self.client.head(self.key).etag == self.etag
        except NotFound:
            return False

    def release(self) -> None:
        """Stop beating; delete the object when it is still ours (a taken-over claim is left to
        its new holder); never raises for an unreachable store. Not guaranteed: between the look and the delete a stale holder's object
        may be taken over and then deleted here (a claim only saves work; a run lease's name is
        this run's alone)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=10)
        self._thread = None
        if self.etag is None:
            return
        etag, self.etag = self.etag, None
        try:
            if self.client.head(self.key).etag == etag:
                self.client.delete(self.key)
        except NotFound:
            pass
        except ObjectStoreError as e:        # unreachable: it turns stale and is collected
            log.warning("seedreuse: could not release %s (%s); it turns stale after %g s and is collected",
                        self.key, e.message, self.lease_s)


def live(client: Client, prefix: str, default_lease_s: float, parse=None) -> tuple[list[dict], list[tuple[str, str, str]]]:
    """The owners of the live leases under ``prefix``, and (key, etag, why) of the stale ones,
    judged on the store's clock; ``parse(key)`` (a CacheKeys parser): keys it refuses are
    nobody's lease, neither live nor stale."""
    objs, _ = client.list(prefix)
    now = client.server_now()
    alive, stale = [], []
    for o in objs:
        if parse is not None and parse(o.key) is None:
            continue
        owner = None
        try:
            owner, _ = read(client, o.key)
        except Exception as e:  # noqa: BLE001 - an unreadable lease is judged by its age alone
            log.debug("lease %s unreadable: %s", o.key, e)
        why = stale_reason(owner, o.modified, now, default_lease_s)
        if why is None:
            alive.append({**(owner or {}), "key": o.key})
        else:
            stale.append((o.key, o.etag, why))
    return alive, stale
