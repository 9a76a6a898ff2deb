"""In-suite soak (reduced size): 3 real workers, one shared cache root, serial requests with
injected failures, interrupts and SIGKILLs; the cache must always be the last successful
request's, and the segment cache's kept takes the last K successful takes (tests/soak/soak.py,
tests/soak/take_model.py). Full size: ``.venv/bin/python -m tests.soak.run --requests 60``.

Coverage does not depend on the machine's speed: the soak starts with a mandatory phase (every
fault kind, a kill before and one after a commit, a Segment Reuse resume, an extension of a
finished take, a longest-valid-prefix resume and a resume from an older kept take; each retried
a bounded number of times if it did not happen) that always runs in full; the time budget only shortens
the random tail after it, and a shortened tail is never a failure."""
from __future__ import annotations

import os

import pytest

from soak.soak import LocalFleet, Soak, SoakConfig, assert_clean, assert_coverage, format_report

pytestmark = pytest.mark.comfy

REQUESTS = int(os.environ.get("SEEDREUSE_SOAK_REQUESTS", "16"))
# the suite's bound on the tail: no new tail request after this many seconds (startup and the
# mandatory phase are not cut by it). The mandatory phase (9 kinds + top-ups, ~10 requests, 3
# worker restarts, each in the background while the next requests run on the other workers)
# took 32.6 s on an idle 2-core machine (52 s when each restart blocked the soak), so in the
# suite the phase runs alone and the random tail is the full soak's (`tests.soak.run`, no
# budget by default); lowered from 100 s when the take-history kinds joined the phase, and
# from 60 and 45 s (a tail of 1-2 requests, ~8-15 s) to keep the whole suite under 20 minutes
TIME_BUDGET_S = float(os.environ.get("SEEDREUSE_SOAK_TIME_BUDGET", "30"))


def test_soak_three_workers(tmp_path, models_dir):
    fleet = LocalFleet(tmp_path, models_dir, 3).start()
    try:
        soak = Soak(fleet, SoakConfig(requests=REQUESTS, seed=int(os.environ.get("SEEDREUSE_SOAK_SEED", "7")),
                                      time_budget_s=TIME_BUDGET_S), tmp_path)
        r = soak.run()
    finally:
        fleet.stop()
    print("\n" + format_report(r))
    # all requests unless the time budget cut the tail (a machine shared with other jobs): the
    # invariants hold for what ran, and the mandatory phase always ran in full
    stopped = r.get("stopped_by_time_budget")
    assert_clean(r, min_requests=r["mandatory"]["requests"] if stopped else min(REQUESTS, 20))
    if stopped:
        print(f"NOTE: the time budget cut the tail after {r['requests']} requests "
              f"(mandatory phase: {r['mandatory']['requests']} requests, {r['mandatory']['seconds']} s)")
    assert_coverage(r)
    # concurrent clients: the bursts ran, one of their runs was killed, none failed from contention
    conc = r["concurrent"]
    assert conc["planned"] and conc["kills"] == 1 and conc["contention_failures"] == 0, format_report(r)
