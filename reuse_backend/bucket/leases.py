"""Leases on a bucket: small objects (the ``LeaseMedium`` of store/lease.py).

A lease object holds its owner record as JSON (store/lease.py ``owner_record``: bounded and
validated before use, its lifetime capped; plus ``since``: the log number of the version it keeps,
and ``exact``); its heartbeat is its ``LastModified``, set by the store's clock at every rewrite
(``If-Match`` on the holder's own ETag), and it is judged against the store's clock
(``Client.server_now``), so the workers' clocks need not agree with each other or with the store.

* run lease ``leases/<run id>.json`` (a fresh name: a plain PUT): a run is alive; its ``since`` keeps
  every version from ``since`` on (collect.py) until the run has read its base, then ``exact``
  (``since`` is its base: that version is kept, and the records after it);
* reader lease ``readers/<id>.json``: a reader downloading files of version ``since``;
* claim ``claims/<slot>-<digest>.json``: created with ``If-None-Match: *`` (one holder), taken over
  from a stale holder with ``If-Match`` on the stale ETag (one taker); a holder that was taken over
  learns it at its next heartbeat.

Invariant (fencing does not rest on these): a lease says a run is alive, so that collections leave
its objects alone; whether a stalled run may publish is decided by the commit log (a fence record
naming it, commit.py), never by a lease's age alone. So ``holds`` (the check before every staged
write) asks nothing of the store; the commit's last look is ``verify`` (one HEAD).
"""
from __future__ import annotations

import logging

from ..errors import ObjectStoreError
from ..store import lease as leases, owner as owners
from ..store.lease import LeaseLost, Seen, Taken
from .client import Client, NotFound, Precondition, TooLarge
from .location import MAX_SEQ, RUN_ID

log = logging.getLogger("seedreuse")

# the fields of a bucket lease besides the owner record's, each checked before use
EXTRA_CHECKS = {"run_id": lambda v: bool(RUN_ID.fullmatch(v)),
                "since": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_SEQ,
                "exact": lambda v: isinstance(v, bool)}


def read(client: Client, key: str):
    """(owner or None when it is not a valid lease body, Obj) of a lease object, or (None, None)
    when absent. Bounded: a body over MAX_OWNER_BYTES is judged by its age alone."""
    try:
        obj = client.get(key, owners.MAX_OWNER_BYTES)
    except NotFound:
        return None, None
    except TooLarge:
        return None, client.head(key)
    owner = owners.parse_owner(obj.body, EXTRA_CHECKS)
    if owner is None:
        log.debug("seedreuse: %s is not a lease body: judged by its age", key)
    return owner, obj


class ObjectLeases:
    """The bucket's LeaseMedium: lease objects of one bucket."""

    def __init__(self, client: Client):
        self.client = client

    def where(self, name) -> str:
        return f"s3://{self.client.bucket}/{name}"

    def unreadable(self, name) -> str:
        return "its body is not a SeedReuse lease (JSON with a run id)"

    def now(self) -> float:
        return self.client.server_now()

    def create(self, name, body: bytes, *, exclusive: bool):
        try:
            return self.client.put(name, body, create_only=exclusive)
        except Precondition:
            raise Taken(name) from None

    def read(self, name) -> Seen | None:
        owner, obj = read(self.client, name)
        return None if obj is None else Seen(owner, obj.modified, obj.etag)

    def touch(self, name, token, body: bytes):
        try:
            return self.client.put(name, body, if_match=token)
        except (Precondition, NotFound) as e:        # taken over, or removed by a collection
            raise LeaseLost(f"{name} is no longer this run's") from e

    def take_over(self, name, seen: Seen, body: bytes, lease_s: float):
        """Replace a stale holder's object (If-Match on the ETag judged: one taker wins)."""
        try:
            return self.client.put(name, body, if_match=seen.token), ""
        except (Precondition, NotFound):
            return None, None

    def holds(self, name, token) -> bool:
        return True

    def verify(self, name, token) -> bool:
        try:
            return self.client.head(name).etag == token
        except NotFound:
            return False

    def remove(self, name, token) -> None:
        """Delete the object when it is still ours (a taken-over claim is left to its new holder);
        never raises for an unreachable store (it turns stale and is collected). Not guaranteed:
        between the look and the delete a stale holder's object may be taken over and then deleted
        here (a claim only saves work; a run lease's name is this run's alone)."""
        try:
            if self.client.head(name).etag == token:
                self.client.delete(name)
        except NotFound:
            pass
        except ObjectStoreError as e:
            log.warning("seedreuse: could not release %s (%s); it turns stale after its lease and is collected",
                        name, e.message)


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
        why = leases.stale_reason(owner, o.modified, now, default_lease_s)
        if why is None:
            alive.append({**(owner or {}), "key": o.key})
        else:
            stale.append((o.key, o.etag, why))
    return alive, stale
