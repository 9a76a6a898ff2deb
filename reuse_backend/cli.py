"""The cache tool, one for both media, over the store interface (stores.py picks the medium)::

    python -m reuse_backend [--root R] [--user USER] {list, inspect NAME, check [NAME] [--repair], clear NAME --yes}
    python -m reuse_backend [--root R] gc [--max-bytes N] [--dry-run] [--json]
    python -m reuse_backend probe ROOT [--peer OTHER_MOUNT] [--json]      (ROOT may be s3://BUCKET/PREFIX)
    python -m reuse_backend instrument IN.json [-o OUT.json] [--json]    (reuse_backend/workflow/command.py)

``--root`` is a folder or ``s3://BUCKET/PREFIX`` (default ``SEEDREUSE_CACHE_URL``, else
``SEEDREUSE_CACHE_ROOT``); on a bucket the local tier is ``SEEDREUSE_CACHE_ROOT``, else
``~/.cache/seedreuse``. ``check`` without NAME checks every namespace's root and caches. ``gc``
finishes what crashed runs and evictions left, then evicts least recently used caches until each
namespace is within its budget (``--max-bytes``, else ``SEEDREUSE_MAX_BYTES``; the folder of
automatic caches of each namespace on its own, with its default); ``--dry-run`` changes nothing.
Exit codes: 0 fine, 1 ``check`` found problems that remain / ``gc`` left a namespace over its budget
/ ``probe`` found the medium unsafe, 2 usage or cache errors.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from . import settings, stores
from .errors import ReuseError
from .store import namespaces, roots
from .store.check import print_report
from .workflow import command as instrument_command


def when(ts) -> str:
    """A Unix time as local ``YYYY-mm-dd HH:MM:SS``; ``?`` when it is not a number."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) else "?"


def size(n) -> str:
    """A byte count in B, KiB, MiB, GiB or TiB; ``?`` when it is not a number."""
    if not isinstance(n, (int, float)):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_list(store) -> int:
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
                state = (f"version {m['version'][:12]} from {when(m['created_at'])}, {len(m['slots'])} "
                         f"slot(s), {len(m['boundaries'])} boundary(ies)")
        print(f"  {name:<24} {state}; size {size(row['bytes'])}, last used {when(row['last_used'])}; "
              f"{row['in_use'] or 'not in use'}")
    return 0


def cmd_inspect(store, name: str) -> int:
    row, snap = store.describe(name)
    print(f"cache '{name}' at {store.location}")
    print(f"  {row['in_use'] or 'not in use'}")
    if row.get("error"):
        print(f"  UNUSABLE: {row['error']['message']}")
        return 2
    if snap is None:
        print("  no committed version (no successful run yet)")
        return 0
    with snap:
        show_manifest(snap)
    return 0


def show_manifest(snap) -> None:
    """The committed version of one cache, as ``inspect`` prints it."""
    m = snap.manifest
    run = m["run"]
    print(f"  version {m['version']} committed {when(m['created_at'])}"
          + (" (read from .old: commit in progress)" if snap.source == "old" else ""))
    print(f"  run {run['run_id']} on {run['host']} pid {run['pid']} prompt {run['prompt_id']}")
    if run["extra"]:
        print(f"    extra: {json.dumps(run['extra'], sort_keys=True)[:200]}")
    print(f"  slots ({len(m['slots'])}):")
    for slot, e in sorted(m["slots"].items()):
        key = e["key"].get("digest", json.dumps(e["key"], sort_keys=True)[:60])
        print(f"    {slot:<16} {e['file']:<36} {size(m['files'][e['file']]['bytes']):>10}  key {key}")
    print(f"  boundaries ({len(m['boundaries'])}): " + (", ".join(str(i) for i in snap.boundary_indices()) or "none"))
    for sec, body in sorted(m["sections"].items()):
        print(f"  section {sec}: {json.dumps(body, sort_keys=True)[:200]}")
    print(f"  files ({len(m['files'])}):")
    for fname, e in sorted(m["files"].items()):
        print(f"    {fname:<36} {size(e['bytes']):>10}  sha256 {e['sha256'][:16]}")


def cmd_check(store, name: str | None, repair: bool) -> int:
    if name is not None:
        return print_report(store.check(name, repair=repair), name)
    problems = []               # the whole location: each namespace's own state, then every cache
    for _user, ns in store.namespaces():
        problems += ns.check_root(repair=repair)
        for n in ns.names():
            problems += ns.check(n, repair=repair)
    return print_report(problems, f"root {store.location}")


def cmd_clear(store, name: str, yes: bool) -> int:
    if not yes:
        print(f"refusing to clear '{name}' without --yes", file=sys.stderr)
        return 2
    done = store.cache(name).clear()
    for line in done:
        print(line)
    print(f"cache '{name}' cleared" if done else f"cache '{name}' was already empty")
    return 0


def cmd_gc(store, max_bytes, dry_run: bool, as_json: bool) -> int:
    from .store.budget import budget_for
    try:
        budget = settings.parse_bytes(max_bytes, what="--max-bytes") if max_bytes else settings.max_bytes()
    except ReuseError as e:
        print(json.dumps({"error": e.to_dict()}, indent=1) if as_json else f"error: {e}")
        return 2
    # the shared namespace, then each user's (--multi-user), each followed by its automatic caches:
    # each is budgeted on its own, so one user's caches never make room for another's and automatic
    # caches never for named ones (store/namespaces.py)
    reps = []                   # (user, automatic?, report)
    for user, ns in store.namespaces():
        reps.append((user, False, ns.gc(budget, dry_run=dry_run)))
        try:
            auto = stores.at(namespaces.auto_root(ns.location, create=False))
        except ReuseError:      # a .auto that is not a folder: check reports it, gc leaves it
            continue
        if auto.names():
            limit = budget if budget is not None else budget_for(auto.location)
            reps.append((user, True, auto.gc(limit, dry_run=dry_run)))
    if as_json:
        out, users = {}, {}
        for user, automatic, rep in reps:
            into = out if user is None else users.setdefault(user, {})
            if automatic:
                into["automatic"] = rep.to_dict()
            else:
                into.update(rep.to_dict())
        print(json.dumps(out | ({"users": users} if users else {}), indent=1))
    else:
        print("\n".join("".join([f"user {user}: " if user is not None else "",
                                 "automatic caches: " if automatic else ""]) + gc_text(rep)
                        for user, automatic, rep in reps))
    return 1 if any(rep.over_budget for _, _, rep in reps) else 0


def gc_text(rep) -> str:
    budget = size(rep.budget) if rep.budget is not None else f"none (set --max-bytes or {settings.MAX_BYTES})"
    verb = {"evicted": "evicted", "would_evict": "would evict", "skipped": "kept (in use)", "keep": "kept",
            "error": "FAILED"}
    lines = [f"{rep.root}: {size(rep.bytes_before)} allocated, budget {budget}"
             + (" (dry run: nothing changed)" if rep.dry_run else "")]
    lines += [f"  cleaned: {c}" for c in rep.cleaned]
    for e in rep.caches:
        lines.append(f"  {verb[e.action]:<14} {e.name:<24} {size(e.bytes):>10}  last used "
                     f"{when(e.last_used)}" + (f": {e.why}" if e.why else ""))
    lines.append(f"the root {'would hold' if rep.dry_run else 'holds'} {size(rep.bytes_after)}"
                 + (" - still over budget" if rep.over_budget else ""))
    return "\n".join(lines)


def cmd_probe(location: str, peer, as_json: bool) -> int:
    rep = stores.probe(location, peer)
    if as_json:
        print(json.dumps(rep.to_dict(), indent=1))
    else:
        print(f"{rep.root}: {rep.filesystem}" + (f", peer {rep.peer}" if rep.peer else ""))
        for c in rep.checks:
            status = c.status.upper() if c.status in ("unsafe", "unanswered") else c.status
            print(f"  {status:<11} {c.name}" + (f": {c.detail}" if c.detail else ""))
        print(f"verdict: {rep.verdict}" + (" (this mount alone; add --peer to check what another host sees)"
                                           if rep.peer is None and not roots.is_url(location) else ""))
    return 0 if rep.verdict == "safe" else 1


def parser() -> argparse.ArgumentParser:
    where = argparse.ArgumentParser(add_help=False)      # before or after the command
    where.add_argument("--root", default=argparse.SUPPRESS,
                       help=f"cache root: a folder or s3://BUCKET/PREFIX (default: ${settings.CACHE_URL}, "
                            f"else ${settings.CACHE_ROOT})")
    where.add_argument("--user", default=argparse.SUPPRESS,
                       help="a ComfyUI user id: work in that user's namespace of a --multi-user server "
                            "(<root>/.users/USER)")
    ap = argparse.ArgumentParser(prog="python -m reuse_backend", description="SeedReuse cache tool", parents=[where])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list caches", parents=[where])
    sub.add_parser("inspect", help="show one cache", parents=[where]).add_argument("name")
    sp = sub.add_parser("check", help="validate one cache, or without NAME the root and every cache (exit 1 on "
                                      "problems)", parents=[where])
    sp.add_argument("name", nargs="?")
    sp.add_argument("--repair", action="store_true", help="run crash recovery (a folder: under the writer lock)")
    sp = sub.add_parser("clear", help="delete one cache", parents=[where])
    sp.add_argument("name")
    sp.add_argument("--yes", action="store_true", help="really delete it")
    sp = sub.add_parser("gc", help="evict least recently used caches until each namespace is within its budget",
                        parents=[where])
    sp.add_argument("--max-bytes", help=f"the budget, e.g. 500M or 20G (default: ${settings.MAX_BYTES})")
    sp.add_argument("--dry-run", action="store_true", help="print what would be evicted and why; change nothing")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")
    sp = sub.add_parser("probe", help="check the primitives the store needs of a folder or an object store "
                                      "(exit 1 if unsafe)")
    sp.add_argument("probe_root", metavar="ROOT", help="a folder on the filesystem to check (e.g. the cache root), "
                                                       "or an object store location s3://BUCKET/PREFIX")
    sp.add_argument("--peer", help="another mount of the same folder (e.g. a second host's view) to check "
                                   "cross-host visibility")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")
    instrument_command.add_parser(sub)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    args.root, args.user = getattr(args, "root", None), getattr(args, "user", None)
    if args.cmd == "instrument":
        return instrument_command.run(args)
    try:
        if args.cmd == "probe":
            if not roots.is_url(args.probe_root):
                bad = [p for p in (args.probe_root, args.peer) if p and not os.path.isdir(p)]
                if bad:
                    print(f"error: {bad[0]} is not a directory", file=sys.stderr)
                    return 2
            return cmd_probe(args.probe_root, args.peer, args.json)
        location = args.root if roots.is_url(args.root) else (None if args.root else settings.cache_url())
        if location is not None:
            # the object store: its local tier in SEEDREUSE_CACHE_ROOT, else ~/.cache/seedreuse
            roots.set_default_root(os.path.expanduser("~/.cache/seedreuse"))
        else:
            location = roots.resolve_root(args.root)
        if args.user is not None:
            location = namespaces.user_root(location, args.user, create=False)
        store = stores.at(location)
        if args.cmd == "list":
            return cmd_list(store)
        if args.cmd == "inspect":
            return cmd_inspect(store, args.name)
        if args.cmd == "check":
            return cmd_check(store, args.name, args.repair)
        if args.cmd == "gc":
            return cmd_gc(store, args.max_bytes, args.dry_run, args.json)
        return cmd_clear(store, args.name, args.yes)
    except ReuseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
