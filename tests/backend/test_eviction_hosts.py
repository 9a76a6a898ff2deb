"""Two "hosts" writing and reading many caches of one small root under a budget.

Each host is a process with its own host name (its own UTS namespace: lock and lease owners
are then judged by their heartbeat only, as across real hosts) reaching the shared folder
through its own bind mount of one small tmpfs (16 MiB), when this runs as root; otherwise two
processes on one path of tmp_path. The
budget holds (after every commit, up to what the other host has in flight; exactly after a
final gc), no cache disappears under a reader holding it or a writer writing it, and no read
ever sees a corrupted or mixed version.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.backend.storehelp import REPO_ROOT, cache_marker, write_version
from reuse_backend import settings
from reuse_backend.folder.cache import FolderCache
from reuse_backend.folder import evict
from reuse_backend.folder.layout import list_caches
from reuse_backend.folder import usage
from reuse_backend.folder.check import check, check_root

pytestmark = pytest.mark.exhaustive      # two interpreters x 60 requests: the full suite, not the fast lane
NAMES = [f"c{i}" for i in range(8)]
ITERATIONS = 60


def _can_simulate_hosts() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None and \
        subprocess.run(["unshare", "-u", "true"], capture_output=True).returncode == 0


@pytest.fixture
def host_roots(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    if not _can_simulate_hosts():
        yield shared, [shared, shared], False
        return
    mounts = []
    small = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(shared)],
                           capture_output=True).returncode == 0      # a small root of its own
    try:
        for h in ("hostA", "hostB"):
            m = tmp_path / f"mnt-{h}"
            m.mkdir()
            subprocess.run(["mount", "--bind", str(shared), str(m)], check=True)
            mounts.append(m)
        yield shared, mounts, True
    finally:
        for m in mounts:
            subprocess.run(["umount", "-l", str(m)], check=False)
        if small:
            subprocess.run(["umount", "-l", str(shared)], check=False)


def test_two_hosts_under_a_budget(tmp_path, host_roots, monkeypatch):
    shared, roots_, hosts = host_roots
    probe = tmp_path / "probe"
    write_version(FolderCache(probe, "p"), 1)
    version = usage.tree_size(probe / "p")            # one version's allocated bytes
    budget = 3 * version + usage.root_size(probe) - version
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), settings.MAX_BYTES: str(budget)}
    procs = []
    for seed, (root, host) in enumerate(zip(roots_, ("hostA", "hostB")), start=1):
        cmd = [sys.executable, "-m", "tests.backend.budget_worker", str(root), str(seed),
               str(ITERATIONS), ",".join(NAMES)]
        if hosts:
            cmd = ["unshare", "-u", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *cmd]
        procs.append(subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    for r in results:
        assert r["errors"] == [] and r["corrupt"] == 0, r
        assert r["disappeared"] == 0, r                    # never evicted under its reader
        assert r["writes"] > 5 and r["reads"] > 5, r
        # after its own commit's enforcement: the budget, plus what the other host may have in
        # flight at that moment (its staging, its commit not yet enforced, a cache it holds)
        assert r["max_root_after_commit"] <= budget + 3 * version, (r, budget, version)
    written = sum(r["writes"] for r in results)
    kept = list_caches(shared)
    assert written > len(NAMES) and len(kept) < len(NAMES)   # evictions really happened
    monkeypatch.setenv(settings.MAX_BYTES, str(budget))
    rep = evict.enforce(shared, budget)
    assert not rep.over_budget and usage.root_size(shared) <= budget, rep.to_dict()
    for n in list_caches(shared):
        assert check(shared, n) == [], n
        assert cache_marker(FolderCache(shared, n)) is not None
    assert check_root(shared) == []
    print(f"\ntwo {'simulated hosts' if hosts else 'processes'}: {written} commits, "
          f"{sum(r['reads'] for r in results)} verified reads, {sum(r['busy'] for r in results)} busy, "
          f"{len(list_caches(shared))} of {len(NAMES)} caches kept under a budget of {budget} bytes "
          f"(one version {version}); 0 corrupted, 0 disappeared")
