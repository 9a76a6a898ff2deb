"""``python -m reuse_backend gc [--root R] [--max-bytes N] [--dry-run] [--json]``: the budget by hand.

Finishes interrupted evictions and removes stale reader leases, then evicts least recently used
caches until the root is within the budget (``--max-bytes``, else ``SEEDREUSE_MAX_BYTES``; no
budget: only the cleanup), in the shared namespace and in each user's namespace of a
``--multi-user`` server (``<root>/.users/<user>/``, each budgeted on its own). ``--dry-run`` changes nothing and prints what it would evict and why
(a read-only look at locks and reader leases: a cache whose writer or reader appears between the
dry run and a real gc is skipped then). Exit codes: 0 within budget (or no budget), 1 still over
budget (everything left is in use), 2 usage errors.
"""
from __future__ import annotations

import argparse
import json
import time

from ..errors import ReuseError
from . import evict, namespaces, roots, usage


def add_parser(sub) -> None:
    sp = sub.add_parser("gc", help="evict least recently used caches until the root is within its budget")
    sp.add_argument("--root", default=argparse.SUPPRESS, help=f"cache root (default: ${roots.ENV_ROOT})")
    sp.add_argument("--max-bytes", help=f"the budget, e.g. 500M or 20G (default: ${usage.ENV_MAX_BYTES})")
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
    budget = human(rep.budget) if rep.budget is not None else f"none (set --max-bytes or {usage.ENV_MAX_BYTES})"
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
        budget = usage.parse_bytes(args.max_bytes, what="--max-bytes") if args.max_bytes else usage.budget_from_env()
    except ReuseError as e:
        print(json.dumps({"error": e.to_dict()}, indent=1) if args.json else f"error: {e}")
        return 2
    # the shared namespace, then each user's (--multi-user): each is budgeted on its own, so
    # one user's caches never make room for another's (namespaces.py)
    if roots.is_url(root):          # the object store: the same report (evict.Report, bucket/store.py)
        reps = [(user, ns.gc(budget, dry_run=args.dry_run)) for user, ns in _bucket_store(root).namespaces()]
    else:
        reps = [(user, evict.enforce(ns, budget, lease_s=lease_s, dry_run=args.dry_run))
                for user, ns in namespaces.namespaces(root)]
    if args.json:
        out = reps[0][1].to_dict()
        if len(reps) > 1:
            out["users"] = {user: rep.to_dict() for user, rep in reps[1:]}
        print(json.dumps(out, indent=1))
    else:
        print("\n".join(text_report(rep) if user is None else f"user {user}: " + text_report(rep)
                        for user, rep in reps))
    return 1 if any(rep.over_budget for _, rep in reps) else 0
