"""Command line of the cache tool::

    python -m reuse_backend [--root R] {list, inspect NAME, check NAME [--repair], clear NAME --yes}
    python -m reuse_backend probe ROOT [--peer OTHER_MOUNT] [--json]     (ROOT may be s3://BUCKET/PREFIX)
    --root s3://BUCKET/PREFIX (or SEEDREUSE_CACHE_URL): the same commands on an object store (bucket/commands.py)
    python -m reuse_backend gc [--root R] [--max-bytes N] [--dry-run] [--json]   (store/gc_command.py)
    python -m reuse_backend check            (no NAME: every cache and the root: evictions, leases, budget)
    python -m reuse_backend instrument IN.json [-o OUT.json] [--json]   (reuse_backend/workflow/command.py)

Exit codes: 0 fine, 1 ``check`` found problems that remain / ``probe`` found the filesystem
unsafe, 2 usage or cache errors.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from . import settings
from .store import roots
from .store.check import check, print_report
from .store.probe import probe
from .errors import ReuseError
from .store.lock import describe, lock_status
from .store import Cache, list_caches
from .store import gc_command, namespaces, usage
from .store.check import check_root
from .store import display
from .store.readers import live_readers
from .workflow import command as instrument_command


def _lock_line(cache: Cache) -> str:
    st = lock_status(cache.paths.lock)
    if st["state"] == "free":
        return "free"
    return f"{st['state']}: {describe(st['owner'], cache.paths.lock)}" + (f" ({st['reason']})" if st["reason"] else "")


def cmd_list(root) -> int:
    names = list_caches(root)
    if not names:
        print(f"no caches under {root}")
        return 0
    print(f"caches under {root}:")
    for name in names:
        cache = Cache(root, name)
        try:
            with (cache.snapshot() or _Empty()) as snap:
                if snap.manifest is None:
                    state = "no committed version"
                else:
                    m = snap.manifest
                    total = sum(e["bytes"] for e in m["files"].values())
                    state = (f"version {m['version'][:12]} from {display.when(m['created_at'])}, "
                             f"{len(m['slots'])} slot(s), {len(m['boundaries'])} boundary(ies), "
                             f"{display.size(total)}")
        except ReuseError as e:
            state = f"UNUSABLE: {e.message}"
        print(f"  {name:<24} {state}; {_usage_line(cache)}; lock {_lock_line(cache)}")
    return 0


def _usage_line(cache: Cache) -> str:
    """Allocated size and last use (usage.py) of the committed version, its live readers."""
    if not os.path.isdir(cache.paths.current):
        return "size -"
    n = len(live_readers(cache.root, cache.name, cache.lease_s))
    return (f"size {display.size(usage.tree_size(cache.paths.current))}, last used "
            f"{display.when(usage.last_used(cache.paths.current))}" + (f", {n} reader(s)" if n else ""))


class _Empty:
    manifest = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def cmd_inspect(root, name) -> int:
    cache = Cache(root, name)
    print(f"cache '{name}' at {cache.paths.current}")
    print(f"  lock: {_lock_line(cache)}")
    for label, path in (("staging", cache.paths.tmp), ("previous (.old)", cache.paths.old)):
        if os.path.lexists(path):
            print(f"  {label} present: {path}")
    snap = cache.snapshot()
    if snap is None:
        print("  no committed version (no successful run yet)")
        return 0
    with snap:
        show_manifest(snap)
    return 0


def show_manifest(snap) -> None:
    """The committed version of one cache, as ``inspect`` prints it (either store)."""
    m = snap.manifest
    run = m["run"]
    print(f"  version {m['version']} committed {display.when(m['created_at'])}"
          + (" (read from .old: commit in progress)" if snap.source == "old" else ""))
    print(f"  run {run['run_id']} on {run['host']} pid {run['pid']} prompt {run['prompt_id']}")
    if run["extra"]:
        print(f"    extra: {json.dumps(run['extra'], sort_keys=True)[:200]}")
    print(f"  slots ({len(m['slots'])}):")
    for slot, e in sorted(m["slots"].items()):
        key = e["key"].get("digest", json.dumps(e["key"], sort_keys=True)[:60])
        print(f"    {slot:<16} {e['file']:<36} {display.size(m['files'][e['file']]['bytes']):>10}  key {key}")
    print(f"  boundaries ({len(m['boundaries'])}): "
          + (", ".join(str(i) for i in snap.boundary_indices()) or "none"))
    for sec, body in sorted(m["sections"].items()):
        print(f"  section {sec}: {json.dumps(body, sort_keys=True)[:200]}")
    print(f"  files ({len(m['files'])}):")
    for fname, e in sorted(m["files"].items()):
        print(f"    {fname:<36} {display.size(e['bytes']):>10}  sha256 {e['sha256'][:16]}")


def cmd_check(root, name, repair: bool) -> int:
    if name is None:      # the whole root: its own state, then every cache, in every namespace
        problems = []
        for _user, ns in namespaces.namespaces(root):
            problems += check_root(ns, repair=repair, lease_s=settings.lease_s())
            for n in list_caches(ns):
                problems += check(ns, n, repair=repair, lease_s=settings.lease_s())
        name = f"root {root}"
    else:
        problems = check(root, name, repair=repair)
    return print_report(problems, name)


def cmd_clear(root, name, yes: bool) -> int:
    if not yes:
        print(f"refusing to clear '{name}' without --yes", file=sys.stderr)
        return 2
    done = Cache(root, name).clear()
    for line in done:
        print(line)
    print(f"cache '{name}' cleared" if done else f"cache '{name}' was already empty")
    return 0


def cmd_probe(root, peer, as_json: bool) -> int:
    rep = probe(root, peer)
    if as_json:
        print(json.dumps(rep.to_dict(), indent=1))
    else:
        print(f"{rep.root}: {rep.filesystem}" + (f", peer {rep.peer}" if rep.peer else ""))
        for c in rep.checks:
            print(f"  {c.status:<11} {c.name}" + (f": {c.detail}" if c.detail else ""))
        print(f"verdict: {rep.verdict}" + ("" if rep.peer else
                                          " (this mount alone; add --peer to check what another host sees)"))
    return 0 if rep.verdict == "safe" else 1


def bucket_commands():
    """The object store's commands (bucket/commands.py): boto3 is imported only for a bucket."""
    from .bucket import commands
    return commands


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reuse_backend", description="SeedReuse cache tool")
    ap.add_argument("--root", help=f"cache root: a folder or s3://BUCKET/PREFIX (default: ${settings.CACHE_URL}, "
                                   f"else ${settings.CACHE_ROOT})")
    ap.add_argument("--user", help="a ComfyUI user id: work in that user's namespace of a --multi-user "
                                   "server (<root>/.users/USER)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list caches")
    sp = sub.add_parser("inspect", help="show one cache")
    sp.add_argument("name")
    sp = sub.add_parser("check", help="validate one cache, or without NAME the root and every cache "
                                      "(exit 1 on problems)")
    sp.add_argument("name", nargs="?")
    sp.add_argument("--repair", action="store_true", help="run crash recovery under the lock")
    sp = sub.add_parser("clear", help="delete one cache")
    sp.add_argument("name")
    sp.add_argument("--yes", action="store_true", help="really delete it")
    sp = sub.add_parser("probe", help="check the filesystem primitives the store needs (exit 1 if unsafe)")
    sp.add_argument("probe_root", metavar="ROOT", help="a folder on the filesystem to check (e.g. the cache root), "
                                                       "or an object store location s3://BUCKET/PREFIX")
    sp.add_argument("--peer", help="another mount of the same folder (e.g. a second host's view) to check "
                                   "cross-host visibility")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")
    instrument_command.add_parser(sub)
    gc_command.add_parser(sub)
    args = ap.parse_args(argv)
    if args.cmd == "instrument":
        return instrument_command.run(args)
    if args.cmd == "probe":
        if roots.is_url(args.probe_root):
            return bucket_commands().cmd_probe(args.probe_root, args.json)
        if not os.path.isdir(args.probe_root) or (args.peer and not os.path.isdir(args.peer)):
            print(f"error: {args.probe_root if not os.path.isdir(args.probe_root) else args.peer} "
                  "is not a directory", file=sys.stderr)
            return 2
        return cmd_probe(args.probe_root, args.peer, args.json)
    try:
        url = args.root if roots.is_url(args.root) else (None if args.root else settings.cache_url())
        root = url or roots.resolve_root(args.root)
        if args.user is not None:
            root = namespaces.user_root(root, args.user, create=False)
        if url is not None:
            # the object store (SEEDREUSE_CACHE_URL or --root s3://...): its local tier in
            # SEEDREUSE_CACHE_ROOT, else ~/.cache/seedreuse
            roots.set_default_root(os.path.expanduser("~/.cache/seedreuse"))
            if args.cmd == "gc":
                return gc_command.run(args, root, settings.lease_s())
            return bucket_commands().run(args, root, show_manifest)
        if args.cmd == "list":
            return cmd_list(root)
        if args.cmd == "inspect":
            return cmd_inspect(root, args.name)
        if args.cmd == "check":
            return cmd_check(root, args.name, args.repair)
        if args.cmd == "gc":
            return gc_command.run(args, root, settings.lease_s())
        return cmd_clear(root, args.name, args.yes)
    except ReuseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
