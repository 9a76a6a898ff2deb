"""The size budget (``SEEDREUSE_MAX_BYTES``): which caches make room, in which order, written once
for both media (a folder evicts a cache by renaming it out under its writer lock, folder/evict.py;
a bucket clears it with a record, bucket/budget.py).

The budget applies to each namespace on its own (each user's, each ``.auto`` folder of automatic
caches: those always have one, ``DEFAULT_AUTO_BUDGET`` without the setting). The policy: caches in
order of last use, oldest first, are evicted until the namespace is within its budget (and, on a
full disk, until enough is free); never the cache that asked for room, never one in use (a live
run lease, writer lock or reader lease: the medium's ``in_use``), and one that fails to go is
reported and skipped. A report (``Report``) says, per cache, what was done and why.

What this does not guarantee: the budget is a target, not a quota (what is in flight or in use can
keep a namespace over it until the next enforcement); two hosts enforcing at once may each evict a
cache where one would have been enough.
"""
from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field

from .. import settings
from ..errors import ReuseError
from .namespaces import is_auto_root

log = logging.getLogger("seedreuse")

# automatic caches are made for every distinct prompt without anyone naming them: never unbounded
DEFAULT_AUTO_BUDGET = 20 << 30


def budget_for(root) -> int | None:
    """The budget of one namespace: ``SEEDREUSE_MAX_BYTES``; for a folder of automatic caches
    (``<namespace>/.auto``) that, else DEFAULT_AUTO_BUDGET."""
    budget = settings.max_bytes()
    if budget is None and is_auto_root(os.path.normpath(os.fspath(root))):
        return DEFAULT_AUTO_BUDGET
    return budget


def auto_budget_source() -> tuple[int, str]:
    """(budget of the automatic caches, where it comes from) for the startup log."""
    budget = settings.max_bytes()
    return (budget, settings.MAX_BYTES) if budget is not None else (DEFAULT_AUTO_BUDGET, "the default for automatic caches")


@dataclass
class Entry:
    name: str
    bytes: int
    last_used: float | None
    action: str = "keep"            # evicted | would_evict | keep | skipped | error
    why: str = ""


@dataclass
class Report:
    root: str
    budget: int | None
    bytes_before: int
    bytes_after: int
    dry_run: bool = False
    caches: list = field(default_factory=list)       # Entry, oldest use first
    cleaned: list = field(default_factory=list)      # leftovers finished before the pass

    @property
    def evicted(self) -> list[str]:
        return [e.name for e in self.caches if e.action in ("evicted", "would_evict")]

    @property
    def over_budget(self) -> bool:
        return self.budget is not None and self.bytes_after > self.budget

    def to_dict(self) -> dict:
        return {"root": self.root, "budget": self.budget, "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "dry_run": self.dry_run,
                "over_budget": self.over_budget, "evicted": self.evicted,
                "cleaned": self.cleaned, "caches": [asdict(e) for e in self.caches]}


def least_recently_used(entries) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.last_used if e.last_used is not None else 0.0, e.name))


def make_room(rep: Report, entries, *, exclude=(), in_use, evict, remeasure=None, need_free=None) -> Report:
    """Evict from ``entries`` (least recently used first) until ``rep`` is within its budget (and,
    with ``need_free()``, until it says enough is free). ``in_use(name)``: why a cache is in use (a
    dry run's look); ``evict(name)``: (True, what) or (False, why kept); ``remeasure()``: the bytes
    after an eviction (others write too), else the entry's bytes are taken off. Entries marked
    "error" beforehand are reported, never evicted."""
    def satisfied() -> bool:
        within = rep.budget is None or rep.bytes_after <= rep.budget
        return within and (need_free is None or need_free())

    for e in least_recently_used(entries):
        rep.caches.append(e)
        if e.action == "error":
            continue
        if satisfied():
            e.why = "within its budget"
            continue
        if e.name in exclude:
            e.why = "the cache that asked for room (it just committed or is being written)"
            continue
        over = (f"least recently used; {rep.bytes_after} bytes"
                + (f", budget {rep.budget}" if rep.budget is not None else "")
                + (", more room needed" if need_free is not None else ""))
        if rep.dry_run:
            why = in_use(e.name)
            if why:
                e.action, e.why = "skipped", why
            else:
                e.action, e.why = "would_evict", over
                rep.bytes_after -= e.bytes
            continue
        try:
            ok, why = evict(e.name)
        except (OSError, ReuseError) as err:      # one cache failing never stops the pass
            e.action, e.why = "error", str(err).splitlines()[0]
            log.warning("seedreuse: evicting cache '%s' failed: %s", e.name, err)
            continue
        if not ok:
            e.action, e.why = "skipped", why
            continue
        e.action, e.why = "evicted", over
        log.info("seedreuse: evicted cache '%s' of %s (%s): %s", e.name, rep.root, why, over)
        rep.bytes_after = remeasure() if remeasure is not None else rep.bytes_after - e.bytes
    return rep
