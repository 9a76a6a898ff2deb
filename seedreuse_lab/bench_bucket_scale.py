"""The ``bucket-scale`` section of the benchmarks (``scripts/bench.sh --only bucket-scale``): S3
requests and time per hit, per cold run's commit and per cache-browser list on a bucket, at 1, 100
and 10,000 caches in a namespace and at 1, 1,000 and 10,000 records in one cache, side by side.

The measurement needs a Ceph RGW (tests/object_store/rgw.py), which the lab never imports: it runs
``python -m tests.object_store.bench_scale`` as a command (root, as the object-store tier) and
adds the rows that command measured. Not in the default sections (a Ceph cluster, minutes).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bench_bucket_scale(tmp: Path, repeats: int, h) -> None:
    out = tmp / "bucket-scale.json"
    cmd = [sys.executable, "-m", "tests.object_store.bench_scale", "--repeats", str(repeats), "--json", str(out)]
    h.log(f"  $ {' '.join(cmd)}")
    p = subprocess.run(cmd, cwd=REPO, stdout=None, stderr=None, text=True, timeout=7200)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:4])} exited with {p.returncode}")
    for r in json.loads(out.read_text())["rows"]:
        h.row(r["area"], r["what"], r["value"], "", None, r["note"])
