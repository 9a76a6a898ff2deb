"""The cache tool's commands on an object store (``python -m reuse_backend --root s3://... list``
and ``probe s3://...``): the same commands and exit codes as on a folder (cli.py), through the
store interface (bucket/store.py). What differs is said where it is printed: a bucket has no
writer lock to show (a commit is one conditional create, commit.py), and ``check`` reads every
object of the current version (the hash of each is verified as a load would).
"""
from __future__ import annotations

import json
import sys

from ..errors import ReuseError
from ..store.check import print_report
from ..store import display
from . import client as clients, location, probe
from .store import BucketStore


def cmd_list(store: BucketStore) -> int:
    names = store.names()
    if not names:
        print(f"no caches under {store.location}")
        return 0
    print(f"caches under {store.location}:")
    for name in names:
        row, snap = store.describe(name)
        if row.get("error"):
            state = f"UNUSABLE: {row['error']['message']}"
        elif snap is None:
            state = "no committed version"
        else:
            with snap:
                m = snap.manifest
                state = (f"version {m['version'][:12]} from {display.when(m['created_at'])}, {len(m['slots'])} slot(s), "
                         f"{len(m['boundaries'])} boundary(ies), {display.size(row['bytes'])}")
        print(f"  {name:<24} {state}; last used {display.when(row['last_used'])}; {row['in_use'] or 'not in use'}")
    return 0


def cmd_inspect(store: BucketStore, name: str, show) -> int:
    cache = store.cache(name)
    print(f"cache '{name}' at {store.location}/{name}")
    snap = cache.snapshot(lease=False)
    if snap is None:
        print("  no committed version (no successful run yet)")
        return 0
    with snap:
        show(snap)
    return 0


def cmd_check(store: BucketStore, name: str | None, repair: bool) -> int:
    problems = []
    targets = [(ns, n) for _u, ns in store.namespaces() for n in ns.names()] if name is None else [(store, name)]
    for ns, n in targets:
        problems += ns.check(n, repair=repair)
    return print_report(problems, f"root {store.location}" if name is None else name)


def cmd_clear(store: BucketStore, name: str, yes: bool) -> int:
    if not yes:
        print(f"refusing to clear '{name}' without --yes", file=sys.stderr)
        return 2
    done = store.cache(name).clear()
    for line in done:
        print(line)
    print(f"cache '{name}' cleared" if done else f"cache '{name}' was already empty")
    return 0


def cmd_probe(url: str, as_json: bool) -> int:
    loc = location.parse(url)
    client = clients.for_bucket(loc.bucket)
    results = probe.run(client, loc)
    verdict = "safe" if all(r["ok"] for r in results) else (
        "unanswered" if any(r["unanswered"] for r in results) else "unsafe")
    if as_json:
        print(json.dumps({"root": loc.url, "endpoint": client.endpoint, "checks": results, "verdict": verdict},
                         indent=1))
    else:
        print(f"{loc.url}: object store at {client.endpoint}")
        for r in results:
            status = "ok" if r["ok"] else ("UNANSWERED" if r["unanswered"] else "FAILED")
            print(f"  {status:<11} {r['check']}" + ("" if r["ok"] else f": {r['detail']}"))
        print(f"verdict: {verdict}")
    return 0 if verdict == "safe" else 1


def run(args, url: str, show_manifest) -> int:
    """The command of ``args`` on the bucket location ``url`` (cli.py parsed both)."""
    try:
        store = BucketStore(url)
        if args.cmd == "list":
            return cmd_list(store)
        if args.cmd == "inspect":
            return cmd_inspect(store, args.name, show_manifest)
        if args.cmd == "check":
            return cmd_check(store, args.name, args.repair)
        return cmd_clear(store, args.name, args.yes)
    except ReuseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
