"""``python -m reuse_backend probe s3://bucket/prefix``: does this endpoint keep what the store needs?

Checked under ``<prefix>.seedreuse-probe/<random>/`` (a name no cache can have) and removed after:

* create race: 8 clients create one key with ``If-None-Match: *`` at once, 3 rounds: exactly one
  wins each round and the object holds the winner's bytes (the commit log depends on it);
* compare-and-swap: a write with ``If-Match`` on the current ETag succeeds, one on a stale ETag is
  refused (412); which ETag form the endpoint takes (RGW refuses quoted ETags) is remembered;
* read-after-write: an overwritten object reads back new at once, from another client;
* listing: a created object is listed at once, a deleted one is gone from the listing at once.

At first use in a process (BucketCache), ``ensure`` runs it once per bucket and refuses an
endpoint that fails (``UnsupportedEndpointError`` naming the check); results are also what
``probe`` prints. What this does not guarantee: a probe is a sample; the races of the real load
are the suite's RGW tier's business (tests/object_store/).
"""
from __future__ import annotations

import threading
import uuid

from ..errors import ReuseError, UnsupportedEndpointError
from ..store.check import ProbeReport
from . import client as clients, location
from .client import Client, NotFound, Precondition

_DONE: dict[str, list] = {}
_GUARD = threading.Lock()


def _race(client: Client, racers: list, key: str) -> str | None:
    wins, errors = [], []

    def go(i):
        c = racers[i]
        try:
            c.put(key, f"writer-{i}".encode(), create_only=True)
            wins.append(i)
        except Precondition:
            pass
        except ReuseError as e:
            errors.append(e.message)
    ts = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        return f"conditional creates failed: {errors[0]}"
    body = client.get(key, 1 << 10).body
    if len(wins) != 1 or body != f"writer-{wins[0]}".encode():
        return f"{len(wins)} of 8 racing If-None-Match creates succeeded (exactly 1 must)"
    return None


def _cas(client: Client, key: str) -> str | None:
    e1 = client.put(key, b"one")
    e2 = None
    for quoted in (False, True):
        client.quoted_if_match = quoted
        try:
            e2 = client.put(key, b"two", if_match=e1)
            break
        except Precondition:
            continue
    if e2 is None:
        return "a write with If-Match on the current ETag was refused (both ETag forms)"
    try:
        client.put(key, b"three", if_match=e1)
        return "a write with If-Match on a stale ETag succeeded (compare-and-swap does not hold)"
    except Precondition:
        pass
    if client.get(key, 1 << 10).body != b"two":
        return "the object does not hold the last successful compare-and-swap"
    return None


def _read_after_write(client: Client, other: Client, key: str) -> str | None:
    for i in range(5):
        client.put(key, f"v{i}".encode())
        if other.get(key, 1 << 10).body != f"v{i}".encode():
            return "another client read an older object right after an overwrite"
    return None


def _listing(client: Client, base: str) -> str | None:
    key = f"{base}listed"
    client.put(key, b"x")
    if key not in {o.key for o in client.list(base)[0]}:
        return "a created object was not listed at once"
    client.delete(key)
    if key in {o.key for o in client.list(base)[0]}:
        return "a deleted object was still listed"
    try:
        client.head(key)
        return "a deleted object could still be read"
    except NotFound:
        return None


def run(client: Client, loc) -> list[dict]:
    """[{check, ok, detail}], cleaning up what it wrote."""
    base = f"{loc.prefix}.seedreuse-probe/{uuid.uuid4().hex}/"
    out = []
    racers = [client.twin() for _ in range(8)]      # independent connections and sessions
    try:
        for check, fn in (("create race", lambda: next((r for r in (_race(client, racers, f"{base}race{i}")
                                                                     for i in range(3)) if r), None)),
                          ("compare-and-swap", lambda: _cas(client, f"{base}cas")),
                          ("read-after-write", lambda: _read_after_write(client, racers[0], f"{base}raw")),
                          ("listing", lambda: _listing(client, base))):
            try:
                why, unanswered = fn(), False
            except ReuseError as e:            # the endpoint did not answer: no verdict
                why, unanswered = e.message, True
            out.append({"check": check, "ok": why is None, "detail": why or "ok", "unanswered": unanswered})
    finally:
        try:
            for o in client.list(base)[0]:
                client.delete(o.key)
        except ReuseError:
            pass
    return out


def ensure(client: Client, loc) -> None:
    """The probe once per process and bucket; UnsupportedEndpointError when it failed."""
    k = f"{client.endpoint}|{client.bucket}"
    with _GUARD:
        results = _DONE.get(k)
        if results is None:
            results = run(client, loc)
            if not any(r["unanswered"] for r in results):   # an unreachable endpoint is asked again
                _DONE[k] = results
    failed = [r for r in results if not r["ok"]]
    if failed:
        raise UnsupportedEndpointError(
            f"the object store at {client.endpoint} (bucket {client.bucket}) cannot hold a SeedReuse cache: "
            + "; ".join(f"{r['check']}: {r['detail']}" for r in failed),
            expected="atomic If-None-Match creates, If-Match compare-and-swap, read-after-write, current "
                     "listings", actual=[r["check"] for r in failed],
            fix="use an S3 endpoint that keeps them (docs/OBJECT_STORAGE.md lists providers; run python -m "
                "reuse_backend probe s3://BUCKET/PREFIX), or unset SEEDREUSE_CACHE_URL to use a local folder",
            details={"endpoint": client.endpoint, "results": results})


def report(url: str) -> ProbeReport:
    """The probe of ``url`` as the cache tool prints it (a ProbeReport, store/check.py)."""
    loc = location.parse(url)
    client = clients.for_bucket(loc.bucket)
    rep = ProbeReport(loc.url, None, f"object store at {client.endpoint}")
    for r in run(client, loc):
        rep.add(r["check"], "ok" if r["ok"] else "unanswered" if r["unanswered"] else "unsafe",
                "" if r["ok"] else r["detail"])
    return rep


def forget() -> None:
    with _GUARD:
        _DONE.clear()
