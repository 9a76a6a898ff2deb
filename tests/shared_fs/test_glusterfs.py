"""Two simulated hosts on a real GlusterFS 10 volume, once per option set (tests/shared_fs/env.py).

* ``gluster-strict`` (the volume and client options of docs: no client-side caching): the pack's
  probe (``python -m reuse_backend probe <hostA mount> --peer <hostB mount> --json``) says safe,
  and the cross-host soak (tests/soak/soak.py with 2 workers on hostA and 1 on hostB, a random
  worker per request, injected failures / interrupts / SIGKILLs, kills inside the commit window,
  concurrent bursts whose segment takes commit from both hosts while a third run, held after its
  last segment on hostA, is SIGKILLed: tests/soak/burst_kill.py) ends with 0 corruptions, 0 lost
  successes, 0 violations, and no host ever served a version other than the latest committed
  one once it was reported (checked through each host's mount after every request);
* ``gluster-stock`` (defaults): the probe says unsafe, and the pack refuses the root at first use:
  a request on each host fails before sampling with UnsupportedFilesystemError naming GlusterFS;
  nothing is published.

Needs root, /dev/fuse and network namespaces; installs glusterfs-server / glusterfs-client with
apt when missing (tests/shared_fs/conftest.py). Other filesystems and the measurements:
``bash scripts/shared_fs.sh``. Size: SEEDREUSE_SHAREDFS_REQUESTS (default 8; the soak's
mandatory phase always runs in full), SEEDREUSE_SHAREDFS_TIME_BUDGET for its random tail.

The workers run with ``SEEDREUSE_LEASE_S`` = SEEDREUSE_SHAREDFS_LEASE_S (default 30 s, as the
object store's two-host soak): a writer killed inside its commit on one host leaves its lock,
which the other host can only let expire (the dead pid proves nothing there), so the next commit
from that host waits out the lease. With the default 120 s lease that wait was 120 s, twice per
run (2026-12-06: 240 s of a 307 s soak); the mechanism is the same at 30 s.

In the suite the soak's mandatory phase is every fault kind and a Segment Reuse resume
(``SUITE_KINDS``), what depends on the filesystem: locks, commits, recovery and reads across the
two mounts. The take-history kinds (extend, longest valid prefix, an older kept take) are the
same commits and reads over other take bookkeeping; the in-suite local soak
(tests/soak/test_soak.py) covers them, and ``scripts/shared_fs.sh`` runs them on every filesystem.
"""
from __future__ import annotations

import os
import time
import warnings

import pytest

from tests.soak.soak import assert_coverage, format_report

from .env import PROFILES
from .harness import assert_soak_clean, run_profile, soak_summary

# the filesystem's semantics across two hosts do not depend on the ComfyUI host: once per suite
# (tests/conftest.py); the object store's two-host soak runs on the other host
pytestmark = [pytest.mark.sharedfs, pytest.mark.one_host("0.33.0")]

REQUESTS = int(os.environ.get("SEEDREUSE_SHAREDFS_REQUESTS", "8"))
TIME_BUDGET_S = float(os.environ.get("SEEDREUSE_SHAREDFS_TIME_BUDGET", "30"))
SEED = int(os.environ.get("SEEDREUSE_SHAREDFS_SEED", "5"))
LEASE_S = os.environ.get("SEEDREUSE_SHAREDFS_LEASE_S", "30")
SUITE_KINDS = ("fail", "interrupt", "kill:late", "kill:tmp-manifest", "kill:.old", "resume")


@pytest.mark.parametrize("option_set", ["gluster-strict", "gluster-stock"])
def test_glusterfs_two_hosts(option_set, gluster_installed, models_dir, tmp_path):
    prof = PROFILES[option_set]()
    t0 = time.monotonic()
    res = run_profile(prof, tmp_path, models_dir, requests=REQUESTS, seed=SEED, time_budget_s=TIME_BUDGET_S,
                      mandatory_kinds=SUITE_KINDS, worker_env={"SEEDREUSE_LEASE_S": LEASE_S})
    print(f"\n{option_set}: {res['version']}, {res['options']}; {time.monotonic() - t0:.0f} s in all "
          f"(bring-up {res['setup']['setup_s']} s, workers {res.get('workers_start_s')} s, "
          f"teardown {res['teardown_s']} s)")
    problems = []
    probe = res["probe"]
    want = "unsafe" if prof.refusal else "safe"
    if probe.get("missing"):
        warnings.warn(f"{option_set}: probe step skipped: {probe['detail']}")
    elif probe.get("error"):
        problems.append(f"probe failed: {probe['error']}")
    elif probe.get("verdict") != want or (probe.get("rc") == 0) != (want == "safe"):
        bad = [c for c in probe.get("checks", []) if c.get("status") == "unsafe"]
        problems.append(f"probe verdict {probe.get('verdict')} (exit {probe.get('rc')}), expected {want}; "
                        f"unsafe checks: {bad}")
    if prof.refusal:
        ref = res["refusal"]
        if not ref["ok"]:
            problems.append(f"expected every first request to fail before sampling with UnsupportedFilesystemError "
                            f"naming {prof.refusal} and nothing published; got {ref['requests']}, "
                            f"published {ref['published']}")
    else:
        r = res["soak"]
        print(format_report(r) + "\n  " + soak_summary(r))
        try:
            assert_soak_clean(r)
            assert_coverage(r)
        except AssertionError as e:
            problems.append(str(e))
        if r["concurrent"]["kills"] != 1:      # the kill inside the burst, on the two-host fleet
            problems.append(f"{r['concurrent']['kills']} kill(s) inside the segment burst, expected 1")
    assert not problems, "\n".join(problems)
