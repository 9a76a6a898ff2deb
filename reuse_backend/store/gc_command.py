"""``python -m reuse_backend gc [--root R] [--max-bytes N] [--dry-run] [--json]``: the budget by hand.

Finishes interrupted evictions and removes stale reader leases, then evicts least recently used
caches until the root is within the budget (``--max-bytes``, else ``SEEDREUSE_MAX_BYTES``; no
budget: only the cleanup), in the shared namespace and in each user's namespace of a
``--multi-user`` server (``<root>/.users/<user>/``, each budgeted on its own), and in the folder of
automatic caches of each (``<namespace>/.auto``, where it exists: ``--max-bytes``, else the
automatic caches' budget, usage.budget_for). ``--dry-run`` changes nothing and prints what it would evict and why
(a read-only look at locks and reader leases: a cache whose writer or reader appears between the
dry run and a real gc is skipped then). Exit codes: 0 within budget (or no budget), 1 still over
budget (everything left is in use), 2 usage errors.
"""
from __future__ import annotations

import argparse
import json
import time

from .. import settings
from ..errors import ReuseError
from . import evict, namespaces, roots, usage


def add_parser(sub) -> None:
    sp = sub.add_parser("gc", help="evict least recently used caches until the root is within its budget")
    sp.add_argument("--root", default=argparse.SUPPRESS, help=f"cache root (default: ${settings.CACHE_ROOT})")
    sp.add_argument("--max-bytes", help=f"the budget, e.g. 500M or 20G (default: ${settings.MAX_BYTES})")
    sp.add_argument("--dry-run", action="store_true", help="print what would be evicted and why; change nothing")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")


def human(n) -> str:
    if not isinstance(n, (int, float)):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def when(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) else "?"


def text_report(rep: evict.Report) -> str:
    budget = human(rep.budget) if rep.budget is not None else f"none (set --max-bytes or {settings.MAX_BYTES})"
    verb = {"evicted": "evicted", "would_evict": "would evict", "skipped": "kept (in use)",
            "keep": "kept", "error": "FAILED"}
    lines = [f"{rep.root}: {human(rep.bytes_before)} allocated, budget {budget}"
             + (" (dry run: nothing changed)" if rep.dry_run else "")]
    lines += [f"  cleaned: {c}" for c in rep.cleaned]
    for e in rep.caches:
        lines.append(f"  {verb[e.action]:<14} {e.name:<24} {human(e.bytes):>10}  last used {when(e.last_used)}"
                     + (f": {e.why}" if e.why else ""))
    after = "would hold" if rep.dry_run else "holds"
    lines.append(f"the root {after} {human(rep.bytes_after)}"
                 + (" - still over budget" if rep.over_budget else ""))
    return "\n".join(lines)


def _bucket_store(url: str):
    from ..bucket.store import BucketStore      # boto3 is imported only for a bucket
    return BucketStore(url)


def run(args, root, lease_s: float) -> int:
    try:
        budget = settings.parse_bytes(args.max_bytes, what="--max-bytes") if args.max_bytes else settings.max_bytes()
    except ReuseError as e:
        print(json.dumps({"error": e.to_dict()}, indent=1) if args.json else f"error: {e}")
        return 2
    # the shared namespace, then each user's (--multi-user), each followed by its automatic
    # caches: each is budgeted on its own, so one user's caches never make room for another's and
    # automatic caches never for named ones (namespaces.py)
    reps = []                       # (user, automatic?, report)
    for user, ns_root in _namespaces(root):
        for auto, where in ((False, ns_root), (True, _auto_folder(ns_root))):
            if where is None:
                continue
            limit = budget if (budget is not None or not auto) else usage.budget_for(where)
            if roots.is_url(root):  # the object store: the same report (evict.Report, bucket/store.py)
                rep = _bucket_store(where).gc(limit, dry_run=args.dry_run)
            else:
                rep = evict.enforce(where, limit, lease_s=lease_s, dry_run=args.dry_run)
            reps.append((user, auto, rep))
    if args.json:
        print(json.dumps(_json(reps), indent=1))
    else:
        print("\n".join(_label(user, auto) + text_report(rep) for user, auto, rep in reps))
    return 1 if any(rep.over_budget for _, _, rep in reps) else 0


def _namespaces(root) -> list:
    if roots.is_url(root):
        return [(user, ns.location) for user, ns in _bucket_store(root).namespaces()]
    return namespaces.namespaces(root)


def _auto_folder(ns_root):
    """The namespace's folder of automatic caches, or None where it holds none."""
    try:
        where = namespaces.auto_root(ns_root, create=False)
    except ReuseError:              # a .auto that is not a folder: check reports it, gc leaves it
        return None
    if roots.is_url(where):
        return where if _bucket_store(where).names() else None
    return where if where.is_dir() else None


def _label(user, auto) -> str:
    return "".join([f"user {user}: " if user is not None else "", "automatic caches: " if auto else ""])


def _json(reps) -> dict:
    """The shared namespace's report at the top, ``automatic`` in it for its automatic caches,
    ``users`` by user id, each with its own ``automatic``."""
    out, users = {}, {}
    for user, auto, rep in reps:
        into = out if user is None else users.setdefault(user, {})
        if auto:
            into["automatic"] = rep.to_dict()
        else:
            into.update(rep.to_dict())
    if users:
        out["users"] = users
    return out
