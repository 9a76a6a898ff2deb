"""Leases on a bucket: run leases, reader leases and single-flight claims as small objects.

A lease object holds JSON {run_id, host, pid, role, since, lease_s, started_at}; its heartbeat is
its ``LastModified``, set by the store's clock at every rewrite (every ``heartbeat_s``), and it is
judged against the store's clock (``Client.server_now``): stale once older than its lease plus
one second, so the workers' clocks need not agree with each other or with the store.

* run lease ``leases/<run id>.json`` (unique name: created with a plain PUT): a run is alive; its
  ``since`` (the log number of its base) keeps every version from ``since`` on (collect.py);
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
import os
import threading
import time

from ..errors import ObjectStoreError
from ..store.owner import hostname
from .client import Client, NotFound, Precondition, TooLarge

log = logging.getLogger("seedreuse")

SLACK_S = 1.0
MAX_LEASE_BYTES = 64 << 10


def body(run_id: str, role: str, lease_s: float, since: int | None = None, **extra) -> dict:
    return {"run_id": run_id, "host": hostname(), "pid": os.getpid(), "role": role,
            "since": since, "lease_s": float(lease_s), "started_at": time.time(), **extra}


def read(client: Client, key: str):
    """(owner dict or None when unreadable, Obj) of a lease object, or (None, None) when absent."""
    try:
        obj = client.get(key, MAX_LEASE_BYTES)
    except NotFound:
        return None, None
    except TooLarge:
        return None, client.head(key)
    try:
        owner = json.loads(obj.body)
    except ValueError:
        owner = None
    return (owner if isinstance(owner, dict) else None), obj


def stale_reason(owner: dict | None, modified: float, now: float, default_lease_s: float) -> str | None:
    lease = owner.get("lease_s") if isinstance(owner, dict) else None
    if isinstance(lease, bool) or not isinstance(lease, (int, float)) or lease <= 0:
        lease = default_lease_s
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


def live(client: Client, prefix: str, default_lease_s: float) -> tuple[list[dict], list[tuple[str, str, str]]]:
    """The owners of the live leases under ``prefix``, and (key, etag, why) of the stale ones,
    judged on the store's clock."""
    objs, _ = client.list(prefix)
    now = client.server_now()
    alive, stale = [], []
    for o in objs:
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
