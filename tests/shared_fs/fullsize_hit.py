"""The full-size hit through the GlusterFS strict volume (run by the bench section ``full-size``).

    python -m tests.shared_fs.fullsize_hit MODELS_DIR WORK_DIR      (as root, from the repo root)

Brings up the two simulated hosts on the strict GlusterFS volume (env.py; installs GlusterFS
when missing, as the shared-fs tier does), then, one full-size worker at a time: a fresh worker
with the pack runs the full-size reuse graph (seedreuse_lab/bench_fullsize.py) cold with its
cache root on hostA's mount (the encoder files dropped from the page cache first), and another
fresh worker runs the hit with a new seed and ``reuse=require`` with its cache root on hostB's
mount: hostB's FUSE client has never read the slots hostA's client wrote. The workers run in
the root network namespace: only the FUSE clients talk to the server, each in its host's
namespace. Prints one line ``SEEDREUSE_FULLSIZE_GLUSTER {json}``; exit 2 when the environment
cannot be built here (the reason on that line), 1 when a run failed.
"""
from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

from seedreuse_lab import bench_fullsize as bf
from seedreuse_lab.bench import _timed

from .env import PROFILES, EnvError, SharedFSEnv, base_missing

MARKER = "SEEDREUSE_FULLSIZE_GLUSTER"
PACK_NODES = ("100", "101", "102", "103", "104", "105", "106")


def _log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def _summary(r: dict) -> dict:
    return {"seconds": r["seconds"], "durations": r["durations"], "mem": r["mem"], "idle_rss": r["idle_rss"],
            "executed": sorted(r["executed"])}


def main(argv: list[str]) -> int:
    models, work = Path(argv[1]), Path(argv[2])
    work.mkdir(parents=True, exist_ok=True)
    prof = PROFILES["gluster-strict"]()
    missing = base_missing()
    if not missing and prof.install_check():
        try:
            prof.install(log=_log)
        except Exception as e:  # noqa: BLE001 - reported as the reason
            missing = [f"installing GlusterFS failed: {str(e)[-300:]}"]
    missing = missing or prof.install_check()
    if missing:
        print(MARKER + " " + json.dumps({"skipped": "; ".join(missing)}), flush=True)
        return 2
    t0 = time.monotonic()
    try:
        env = SharedFSEnv(prof, base=None, log=_log).setup()
    except EnvError as e:
        print(MARKER + " " + json.dumps({"skipped": f"the GlusterFS environment did not come up: {e}"}), flush=True)
        return 2
    try:
        setup_s = time.monotonic() - t0
        a_root, b_root = env.cache_root(env.hosts[0]), env.cache_root(env.hosts[1])
        _log("  full-size gluster: cold on hostA's mount")
        cold = bf.one_run(work, "fsg-cold", models, a_root, bf.graph(21, bf.TEXT, cache_name="fullsize-gluster"),
                          _timed, with_pack=True, drop=bf.encoder_files(models))
        _log("  full-size gluster: hit on hostB's mount")
        hit = bf.one_run(work, "fsg-hit", models, b_root,
                         bf.graph(22, bf.TEXT, cache_name="fullsize-gluster", reuse="require"), _timed, with_pack=True)
        ran = [n for n in (*bf.LOADERS, *bf.ENCODERS) if n in hit["executed"]]
        if ran:
            raise AssertionError(f"the GlusterFS hit ran {ran}")
        reused = sorted(e["data"]["slot"] for e in hit["result"].events_of("seedreuse.slot")
                        if e["data"]["action"] == "reused")
        out = {"profile": prof.name, "options": prof.options, "version": prof.version(), "setup_s": round(setup_s, 1),
               "cold": _summary(cold), "hit": _summary(hit), "reused": reused,
               "hit_pack_s": sum(hit["durations"][n] for n in hit["executed"] if n in PACK_NODES),
               "hit_pack_nodes": sorted(n for n in hit["executed"] if n in PACK_NODES)}
    except Exception as e:  # noqa: BLE001 - reported on the result line
        traceback.print_exc()
        print(MARKER + " " + json.dumps({"error": f"{type(e).__name__}: {str(e)[:300]}"}), flush=True)
        return 1
    finally:
        env.teardown()
    print(MARKER + " " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
