"""Command line of the soak (full size):

    .venv/bin/python -m tests.soak.run --requests 60 [--seed N] [--base-dir DIR] [--keep]

Starts 3 real ComfyUI workers sharing one cache root, runs the serial request chain with
injected failures / interrupts / SIGKILLs and take-history requests (extend, longest valid
prefix, from an older take; tests/soak/soak.py, take_model.py), prints the report and exits
non-zero on any corruption, lost success or violation, or on a mandatory fault kind that never
happened (the mandatory phase always runs in full, also beyond --requests / --time-budget,
which only bound the random tail). The JSON report (every step) is written to
<base-dir>/soak-report.json.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.soak.soak import LocalFleet, Soak, SoakConfig, assert_clean, assert_coverage, format_report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.soak.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--time-budget", type=float, default=None,
                    help="seconds; no new tail request after it (the mandatory phase always runs)")
    ap.add_argument("--base-dir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the base dir (workers, cache, logs)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    from seedreuse_lab import tiny_models as tm

    base = a.base_dir or Path(tempfile.mkdtemp(prefix="seedreuse-soak-"))
    base.mkdir(parents=True, exist_ok=True)
    if any(base.iterdir()):
        ap.error(f"--base-dir {base} is not empty (the soak needs a fresh cache root)")
    models = tm.ensure_tiny_models().link_models_dir(base / "models")
    fleet = LocalFleet(base, models, a.workers)
    cfg = SoakConfig(requests=a.requests, seed=a.seed, time_budget_s=a.time_budget, verbose=not a.quiet)
    t0 = time.monotonic()
    fleet.start()
    print(f"started {a.workers} workers in {time.monotonic() - t0:.1f} s; base dir {base}", flush=True)
    ok = False
    try:
        r = Soak(fleet, cfg, base).run()
        print(format_report(r))
        print(f"report: {base / 'soak-report.json'}")
        assert_clean(r, min_requests=min(a.requests, 1))
        assert_coverage(r)
        ok = True
    finally:
        fleet.stop()
        if ok and not a.keep:
            shutil.rmtree(base, ignore_errors=True)
        elif not ok:
            print(f"kept {base} (worker logs: {base}/soak*/worker.log)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
