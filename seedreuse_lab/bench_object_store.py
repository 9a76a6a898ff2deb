"""The ``object-store`` section of the benchmarks (``scripts/bench.sh --only object-store``): a hit
across two simulated hosts through Ceph RGW vs through GlusterFS strict vs the local tier vs cold,
bytes fetched per hit, commit time against version size.

The measurement needs the suite's network-namespace topology and its servers (tests/shared_fs/
env.py, tests/object_store/rgw.py), which the lab never imports: it runs
``python -m tests.object_store.bench_hosts`` as a command (root; GlusterFS also needs FUSE) and
adds the rows that command measured. Not in the default sections (it needs root and brings up a
Ceph cluster and a GlusterFS volume: minutes).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bench_object_store(tmp: Path, repeats: int, h) -> None:
    out = tmp / "object-store.json"
    cmd = [sys.executable, "-m", "tests.object_store.bench_hosts", "--repeats", str(repeats), "--json", str(out)]
    h.log(f"  $ {' '.join(cmd)}")
    p = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=None, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:4])} exited with {p.returncode}: {p.stdout[-500:]}")
    for r in json.loads(out.read_text())["rows"]:
        h.row(r["area"], r["what"], r["value"], "", None, r["note"])
