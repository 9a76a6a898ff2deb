"""A commit whose base changed: another run committed since this run began (runs stage side by
side; their commits are serialized: a folder's writer lock, a bucket's conditional create).

Called by each medium's commit (``rebase_if_changed``) with the version that is current now; it
works on the run's public staged version (``tx.staged``, staged.py) and carries through
``tx.carry_from`` (fenced like every write). Invariant 3's rules, each enforced here:

* the run commits its own complete version: its staging holds every file it staged or carried
  (carries are hard links made while staging, or copies from the pinned base, staging.py), so
  nothing it publishes depends on the base still existing;
* nothing another run committed meanwhile is lost: for a segment cache (a take index,
  take_index.py) the take list is merged with the current version's: every take of the current
  version (its latest under ``take-<k>.*`` names, hard links from it) is kept, newest first, up to
  the run's take limit; this run's new take is renumbered above all of them. Never a stale copy
  of the list: the current version's records are the history, this run only adds its take;
* slots are the run's own (what its prompt used): a slot whose key differs from the current
  version's is replaced by this run's, and the note returned says which.

What this does not guarantee: slots the current version holds that this run's prompt did not
use are not carried (as before: a commit is the version of the prompt that made it).
"""
from __future__ import annotations

import logging

from . import take_index

log = logging.getLogger("seedreuse")


def _numbers(recs: list[dict]) -> set[int]:
    return {r["take"] for r in recs}


def _carry_take(tx, current, rec: dict, latest: bool) -> dict:
    """Carry one take of the current version into the staging; the latest take's classic names
    become the take's own ``take-<k>.*`` names. Returns its record in the new version."""
    k = rec["take"]
    if latest:
        result = take_index.result_file(k)
        bounds = {i: take_index.boundary_file(k, int(i)) for i in rec["boundaries"]}
        seg = rec["segments"]
        if isinstance(seg, dict) and set(seg) == {"in_section"}:
            seg = (current.manifest.get("sections") or {}).get(seg["in_section"]) or {}
        pairs = [(result, rec["result"])] + [(bounds[i], rec["boundaries"][i]) for i in rec["boundaries"]]
        rec = {"take": k, "result": result, "boundaries": bounds, "segments": seg}
    else:
        pairs = [(f, f) for f in [rec["result"], *rec["boundaries"].values()]]
    for dst, src in pairs:
        if dst not in tx.staged.files:
            tx.carry_from(dst, src, current)
    return rec


def merge_takes(tx, current) -> str:
    staged = tx.staged
    body = staged.sections.get(take_index.SECTION)
    mine = list(body["takes"])
    new, kept = mine[0], mine[1:]
    cur = (take_index.records(current.manifest) or []) if current is not None else []
    keep = max(1, int(tx.keep_takes or len(mine)))
    # the history is the current version's take list (newer than this run's base: it already
    # holds what the base held, minus what its limit dropped); without one (the cache was
    # cleared, or holds no segment run now) the takes this run carried from its base
    history = [_carry_take(tx, current, r, n == 0) for n, r in enumerate(cur)] if cur else kept
    history = history[:keep - 1]
    number = max(_numbers(history) | _numbers(cur) | _numbers(kept), default=0) + 1
    old_number = new["take"]
    new = dict(new, take=number)
    sec = new.get("segments")
    if isinstance(sec, dict) and set(sec) == {"in_section"} and isinstance(staged.sections.get(sec["in_section"]), dict):
        staged.sections[sec["in_section"]] = dict(staged.sections[sec["in_section"]], take=number)
    # files of takes that are no longer listed leave the staging (never a file the new list names)
    named = {f for r in [new] + history for f in [r["result"], *r["boundaries"].values()]}
    for fname in [f for f in staged.files if take_index.is_kept_take_file(f) and f not in named]:
        staged.drop(fname)
    staged.sections[take_index.SECTION] = {"schema": take_index.SCHEMA, "takes": [new] + history}
    return (f"take list merged with the {len(cur)} take(s) committed meanwhile: this run's take is "
            f"{number} (planned as {old_number}), kept {[r['take'] for r in history]}")


def rebase(tx, current) -> str:
    """Make the staging this run's complete version on top of ``current``; returns what was done,
    for the run's warnings and the log."""
    was = tx.base.version if tx.base is not None else None
    now = current.version if current is not None else None
    run = ((current.manifest.get("run") or {}).get("run_id") if current is not None else None)
    parts = [f"base changed: this run began on version {was} and version {now} (run {run}) was "
             f"committed meanwhile; this run commits its own complete version"]
    if take_index.SECTION in tx.staged.sections:
        parts.append(merge_takes(tx, current))
    if current is not None:
        replaced = [s for s, e in tx.staged.slots.items()
                    if (current.manifest["slots"].get(s) or {}).get("key", e["key"]) != e["key"]]
        if replaced:
            parts.append(f"slot(s) {sorted(replaced)} replaced by this run's (their key changed)")
    return "; ".join(parts)


def rebase_if_changed(tx, current, on: str | None) -> str | None:
    """When the version committed now (``current``: a Snapshot, or None when there is none) is not
    ``on`` (the version the staging stands on: the run's base, or what an earlier attempt rebased
    onto), rebase onto it; returns the version the staging stands on now."""
    now = current.version if current is not None else None
    if now != on:
        tx.rebased = rebase(tx, current)
        tx.warnings.append(tx.rebased)
        log.info("cache '%s', run %s: %s", tx.cache.name, tx.run.run_id, tx.rebased)
    return now
