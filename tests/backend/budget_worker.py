"""One "host" of the two-host budget test (``python -m tests.backend.budget_worker``).

    budget_worker.py ROOT SEED ITERATIONS NAMES(comma separated)

Writes and reads random caches of ROOT under the budget in SEEDREUSE_MAX_BYTES (enforced after
each of its commits, like a worker). Every read checks all content of the version it opened
(markers, tensors, sha256), holds the snapshot a little while the other host may evict, then
checks that the cache is still in the namespace, then loads and checks all of it. Prints one JSON
line of counts; the test asserts on them.
"""
import json
import os
import random
import sys
import time

from tests.backend.storehelp import snapshot_marker, write_version

from reuse_backend.errors import CacheBusyError, CorruptCacheError
from reuse_backend.folder.cache import FolderCache
from reuse_backend.folder import evict
from reuse_backend.folder import usage


def _present(cache) -> bool:
    """current, or .old inside another host's commit window (looked at twice around it)."""
    p = cache.paths
    return any(os.path.isdir(x) for x in (p.current, p.old, p.current))


def main(root, seed, iterations, names):
    rng = random.Random(seed)
    out = {"writes": 0, "busy": 0, "reads": 0, "misses": 0, "corrupt": 0, "disappeared": 0,
           "errors": [], "max_root_after_commit": 0}
    for i in range(iterations):
        write = rng.random() < 0.5
        name = rng.choice(names)
        lru = evict.survey(root)
        if not write and lru and rng.random() < 0.7:
            name = lru[0].name          # the next one the budget evicts: the case that matters
        cache = FolderCache(root, name)
        try:
            if write:
                write_version(cache, seed * 1000 + i, run_id=f"w{seed}-{i}")
                out["writes"] += 1
                out["max_root_after_commit"] = max(out["max_root_after_commit"], usage.root_size(root))
                continue
            snap = cache.snapshot()
            if snap is None:
                out["misses"] += 1
                continue
            with snap:
                # opened, not loaded yet (a prompt opens its snapshot at the first decision and
                # loads later): not yet a use, so the cache may well be the least recently used
                time.sleep(rng.uniform(0.0, 0.1))
                if not _present(cache):
                    out["disappeared"] += 1
                snapshot_marker(snap)                    # the whole version, still pinned
            out["reads"] += 1
        except CacheBusyError:
            out["busy"] += 1
        except CorruptCacheError as e:
            out["corrupt"] += 1
            out["errors"].append(f"{type(e).__name__}: {e.message}")
        except Exception as e:   # noqa: BLE001 - reported to the test, which fails on any
            out["errors"].append(f"{type(e).__name__}: {e}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(","))
