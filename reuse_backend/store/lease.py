"""The lease: the one mechanism behind the writer lock, the run lease, the claim and the reader lease,
on a folder and on a bucket (docs/ARCHITECTURE.md, "Glossary").

A lease is an **owner record** (who holds it: run id, role, host, pid, pid start time, pid
namespace, when, for how long) stored under a name, kept fresh by a **heartbeat** (a file's mtime,
an object's LastModified) while its holder lives, and **judged** stale by one rule (``stale_reason``):
its owner is provably dead (the same host and pid namespace: the pid is gone or was reused, or it
names this very process, which no longer holds it), or its heartbeat is older than its lease plus
``SLACK_S``. A medium gives the few primitives (``LeaseMedium``: create, read, touch, take over,
remove); this module does the rest once: the owner record, the bounded reading of a record written
by anyone, the acquire loop with its one take-over, the heartbeat loop, the judge.

Invariant (what is held is known): every lease this process holds is registered (``_HELD``) from
before its name exists until a moment after it is gone, so no judge here takes it for abandoned.

What this does not guarantee: across hosts only the heartbeat's age speaks, on the medium's clock
(a folder: this host's clock against the file's mtime, so hosts sharing one keep their clocks in
sync; a bucket: the store's own); a holder paused past its lease learns it at its next check.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from typing import NamedTuple, Protocol

from ..errors import CacheBusyError, TransactionError
from .owner import _number, describe, hostname, owner_record, pid_alive, pid_namespace, pid_start

log = logging.getLogger("seedreuse")

WRITER_LOCK, RUN_LEASE, CLAIM, READER_LEASE = "writer lock", "run lease", "claim", "reader lease"
ROLES = (WRITER_LOCK, RUN_LEASE, CLAIM, READER_LEASE)
# whole-second mtimes (MooseFS) and LastModified: a heartbeat can look up to this much older
SLACK_S = 1.0
# the longest lifetime a record written by someone else is trusted to claim (or the judge's own
# lease when longer): a record saying lease_s 1e300 is stale an hour after its last heartbeat
MAX_LEASE_S = 3600.0


# ---------------------------------------------------------------------- the judge
_HELD: Counter = Counter()   # run ids whose leases this process holds (or is creating) now
_RELEASED: dict = {}         # (run id, started_at) -> when this process removed that lease (a judge may have read it)
_HELD_GUARD = threading.Lock()
RELEASE_GRACE_S = 5.0


def _hold(run_id: str, delta: int, removed: tuple | None = None) -> None:
    with _HELD_GUARD:
        _HELD[run_id] += delta
        if _HELD[run_id] <= 0:
            del _HELD[run_id]
        now = time.monotonic()
        if removed:
            _RELEASED[removed] = now
        for r in [r for r, t in _RELEASED.items() if now - t > RELEASE_GRACE_S]:
            del _RELEASED[r]


def _after_fork_in_child() -> None:
    global _HELD_GUARD    # a fork while another thread held the guard must not deadlock the child
    _HELD_GUARD = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def holds(run_id, started_at=None) -> bool:
    """This process holds (or is creating) a lease of ``run_id``, or removed that very lease a moment
    ago (a judge that read it first must not take it for abandoned: a fence for nothing)."""
    with _HELD_GUARD:
        return run_id in _HELD or time.monotonic() - _RELEASED.get((run_id, started_at), -1e9) <= RELEASE_GRACE_S


def owner_dead(owner: dict | None, who: str = "owner") -> str | None:
    """Why the owner of this record is provably dead, or None. Death is provable only on this host
    and in this pid namespace (containers sharing a host name have their own pids)."""
    if not owner or owner.get("host") != hostname() or not isinstance(owner.get("pid"), int) \
            or owner.get("pid_ns") != pid_namespace():
        return None
    pid = owner["pid"]
    if pid == os.getpid():
        if owner.get("pid_start") == pid_start(pid) and not holds(owner.get("run_id"), owner.get("started_at")):
            return f"{who} is this process (pid {pid}) and no longer holds run {owner.get('run_id')}"
        return None
    if not pid_alive(pid):
        return f"{who} pid {pid} on this host is gone"
    rec, now = owner.get("pid_start"), pid_start(pid)
    if rec is not None and now is not None and rec != now:
        return f"{who} pid {pid} was reused by another process"
    return None


def stale_reason(owner: dict | None, modified: float, now: float, default_lease_s: float,
                 who: str = "owner") -> str | None:
    """Why a lease is stale ("... is gone", "heartbeat is ..."), or None when it is live. The
    lifetime a record claims is trusted up to MAX_LEASE_S (or ``default_lease_s`` when longer)."""
    dead = owner_dead(owner, who)
    if dead:
        return dead
    lease = owner.get("lease_s") if owner and _number(owner.get("lease_s"), 1e-3, 1e300) else default_lease_s
    lease = min(lease, max(MAX_LEASE_S, default_lease_s))
    age = now - modified
    return f"heartbeat is {age:.0f}s old (lease {lease:.0f}s)" if age > lease + SLACK_S else None


# ---------------------------------------------------------------------- what a medium gives
class Seen(NamedTuple):
    """A lease as read: its owner (None: unreadable), its heartbeat on the medium's clock, the
    medium's token of that very copy (an inode, an ETag)."""
    owner: dict | None
    modified: float
    token: object


class Taken(Exception):
    """An exclusive create found the name taken."""


class LeaseLost(Exception):
    """A heartbeat found the lease no longer its own (taken over, removed, refused for good)."""


class LeaseMedium(Protocol):
    """The primitives a medium gives for leases (folder/lease_files.py, bucket/leases.py). ``name``
    is a path or a key; tokens are the medium's own (a descriptor and inode, an ETag).

    create: store ``body`` under ``name`` complete or not at all (``exclusive``: Taken when it
    exists); returns the token. read: the Seen lease (None: absent), never blocking, bounded; a name
    that can never be a lease (a folder where a lock file belongs) is refused at once (a typed
    ReuseError). now: the clock ``Seen.modified`` is judged against. touch: the heartbeat (LeaseLost
    once not ours; another error may pass). take_over: replace a lease judged stale, only if it is
    still the copy judged and still stale: (our token, or None: create again; None when it was not
    taken, else "" or what happened instead). holds: the fencing check, as cheap as the medium
    allows; verify: a fresh look. remove: only while ours, releasing the token. where, unreadable:
    for messages."""

    def create(self, name, body: bytes, *, exclusive: bool) -> object: ...
    def read(self, name) -> Seen | None: ...
    def now(self) -> float: ...
    def touch(self, name, token, body: bytes) -> object: ...
    def take_over(self, name, seen: Seen, body: bytes, lease_s: float) -> tuple[object, str | None]: ...
    def holds(self, name, token) -> bool: ...
    def verify(self, name, token) -> bool: ...
    def remove(self, name, token) -> None: ...
    def where(self, name) -> str: ...
    def unreadable(self, name) -> str: ...


# ---------------------------------------------------------------------- one lease
class Lease:
    """One lease in one role: ``acquire`` (create, or take over a stale one once), the heartbeat,
    ``held`` (the fencing check), ``verify``, ``release``. ``broke`` says what acquire took over."""

    def __init__(self, medium: LeaseMedium, name, run_id: str, role: str, *, lease_s: float,
                 heartbeat_s: float | None = None, cache_name: str | None = None, extra: dict | None = None):
        if role not in ROLES:
            raise ValueError(f"unknown lease role {role!r}")
        self.medium, self.name, self.run_id, self.role = medium, name, str(run_id), role
        self.lease_s = float(lease_s)
        self.heartbeat_s = float(heartbeat_s) if heartbeat_s is not None else min(10.0, self.lease_s / 4)
        self.cache_name = cache_name or "?"
        self.owner = owner_record(self.run_id, role, self.lease_s, **(extra or {}))
        self.broke: list[str] = []
        self.heartbeat_error: BaseException | None = None
        self.lost = False
        self._token = None
        self._guard = threading.Lock()       # the heartbeat and update() rewrite one after the other
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    path = property(lambda self: self.name, doc="the lease's name (a path, a key)")
    token = property(lambda self: self._token, doc="the medium's token of the held lease (None: not held)")

    def _body(self) -> bytes:
        return json.dumps(self.owner, sort_keys=True).encode()

    # -- acquire ---------------------------------------------------------------------------
    def acquire(self, *, exclusive: bool = True) -> "Lease":
        """Hold the lease. ``exclusive``: a live holder is a CacheBusyError, a stale one is taken
        over once; else (a fresh name) it is created. A failure leaves nothing of ours behind."""
        if self._token is not None:
            raise TransactionError(f"{self.role} acquired twice", expected="one acquire per lease",
                                   actual="acquire() on a held lease", fix="release() it first")
        self.owner["started_at"] = time.time()
        _hold(self.run_id, 1)      # registered before the name exists: never judged abandoned by us
        try:
            self._token = self._create(exclusive)
        except BaseException:
            _hold(self.run_id, -1)
            raise
        self._start()
        return self

    def _create(self, exclusive: bool):
        if not exclusive:
            return self.medium.create(self.name, self._body(), exclusive=False)
        broke = False
        for _ in range(8):                       # bounded: a lease that keeps vanishing is busy
            try:
                return self.medium.create(self.name, self._body(), exclusive=True)
            except Taken:
                pass
            seen = self.medium.read(self.name)
            if seen is None:
                continue                         # released between the create and the read
            why = stale_reason(seen.owner, seen.modified, self.medium.now(), self.lease_s)
            if why is None or broke:
                raise self.busy(seen.owner)
            token, note = self.medium.take_over(self.name, seen, self._body(), self.lease_s)
            if note is None:
                raise self.busy((self.medium.read(self.name) or seen).owner)
            self.broke.append(f"stale {self.role} of {describe(seen.owner)} ({why}) {note}" if note
                              else f"broke stale {self.role} of {describe(seen.owner)}: {why}")
            if token is not None:
                return token
            broke = True                         # one take-over per acquire, then create again
        raise self.busy((self.medium.read(self.name) or Seen(None, 0.0, None)).owner)

    def busy(self, owner: dict | None) -> CacheBusyError:
        who = describe(owner) if owner else \
            f"an unknown run (unreadable {self.role} {self.medium.where(self.name)}: {self.medium.unreadable(self.name)})"
        fix = "wait for the other run to finish (or fail), or give this run another cache name"
        if not owner:
            fix = (f"if a run is writing cache '{self.cache_name}', wait for it; otherwise it is not a lease of a "
                   f"live run: it is taken over once unchanged for {self.lease_s:.0f} s (SEEDREUSE_LEASE_S), or "
                   f"remove {self.medium.where(self.name)} by hand (or give this run another cache name)")
        return CacheBusyError(
            f"cache '{self.cache_name}' is being written by {who}; wait for it to finish or use another cache name",
            expected=f"no other holder of the {self.role}", actual=who, fix=fix,
            details={"owner": owner or {}, "lock": str(self.medium.where(self.name)), "role": self.role})

    # -- heartbeat, fencing, release ---------------------------------------------------------
    def _start(self) -> None:
        self._stop.clear()
        self.heartbeat_error, self.lost = None, False
        self._thread = threading.Thread(target=self._beat, name=f"seedreuse-heartbeat-{self.run_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        """Refresh the lease every heartbeat_s. An error that may pass (a network hiccup) is retried
        while the lease can still be kept (the lease minus one interval since the last good beat);
        after that, or once the medium says it is not ours (LeaseLost), it is lost: logged once, and
        held() is False from then on, which fences every later write."""
        last_ok = time.monotonic()
        while not self._stop.wait(self.heartbeat_s):
            try:
                with self._guard:
                    if self._token is None:
                        return
                    self._token = self.medium.touch(self.name, self._token, self._body())
                last_ok = time.monotonic()
                continue
            except LeaseLost as e:
                self.heartbeat_error = e.__cause__ or e
            except Exception as e:  # noqa: BLE001 - recorded; held() reports the loss
                self.heartbeat_error = e
                if time.monotonic() - last_ok < self.lease_s - self.heartbeat_s:
                    log.warning("seedreuse: heartbeat of %s %s failed (%s); retrying", self.role,
                                self.medium.where(self.name), e)
                    continue
            self.lost = True
            log.error("seedreuse: run %s lost its %s %s (heartbeat failing since %.0f s: %s); its writes are "
                      "refused from now on", self.run_id, self.role, self.medium.where(self.name),
                      time.monotonic() - last_ok, self.heartbeat_error)
            return

    def update(self, **fields) -> None:
        """Rewrite the owner record now (a bucket run lease narrowed to its base)."""
        self.owner = {**self.owner, **fields}
        with self._guard:
            self._token = self.medium.touch(self.name, self._token, self._body())

    def abandon(self) -> None:
        """Stop the heartbeat, never remove the lease (a bucket commit whose outcome is unknown: a
        collection fences the run first). It stays registered here: only its age judges it."""
        self.stop_heartbeat()
        self._token = None

    def stop_heartbeat(self) -> None:
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=10)

    def held(self) -> bool:
        """The fencing check: the lease is still ours and the heartbeat has not given it up."""
        return self._token is not None and not self.lost and self.medium.holds(self.name, self._token)

    def verify(self) -> bool:
        """A fresh look at the medium: the lease is still ours now."""
        return self._token is not None and not self.lost and self.medium.verify(self.name, self._token)

    def release(self) -> None:
        """Stop the heartbeat; remove the lease only while it is ours (the medium decides safely)."""
        if self._token is None:
            return
        self.stop_heartbeat()
        token, self._token = self._token, None
        removed = None
        try:
            self.medium.remove(self.name, token)
            removed = (self.run_id, self.owner["started_at"])
        finally:
            _hold(self.run_id, -1, removed)

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()
