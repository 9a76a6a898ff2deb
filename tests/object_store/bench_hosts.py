"""Benchmark, not a test: a hit across two simulated hosts through Ceph RGW vs through GlusterFS
strict vs the local tier vs cold, bytes fetched per hit, commit time against version size.

    python -m tests.object_store.bench_hosts [--repeats 3] [--sizes 1,16,128,512] [--no-gluster] [--json F]
    (scripts/bench.sh --only object-store runs it: seedreuse_lab/bench_object_store.py)

Needs root and network namespaces (tests/shared_fs/env.py; GlusterFS also FUSE), like the tiers
that bring these servers up. Every number is measured in this run; ratios are printed, never
asserted. One environment at a time (env.py's machine-wide lock), each with one worker on hostA
and one on hostB, the stand-in encoders at the costs of the ``encoder`` section (text 1500 ms,
CLIP vision 400 ms, loaders 2000 ms) on the I2V reuse graph, every worker warmed up first:

* cold: hostA's run of a new text, queue -> first KSampler event (loaders + encoders run);
* cross-host hit: hostB re-queues it with a new seed and reuse=require after /free (so its nodes
  really read the cache): through RGW its local tier is cold (it downloads what it loads),
  through GlusterFS it reads through its own FUSE client; then a second hit on hostB (through
  RGW: from the local tier after one LIST);
* bytes: what hostB's local tier fetched at each hit (RGW), what the hit loads, the version's size;
* commit: ``Transaction.commit`` of a version of 1, 16, 128, 512 MB (one slot) on the bucket
  (from this process, in the root namespace, over the bridge to the gateway) vs the folder store
  on this machine's local disk, the same bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from seedreuse_lab import graphs, tiny_models
from seedreuse_lab.graphs import I2V
from seedreuse_lab.reuse_graphs import i2v_reuse
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo

from tests.shared_fs.env import PROFILES, SharedFSEnv
from tests.shared_fs.harness import SharedFleet

from .netns_rgw import BucketFleet, RGWProfile

COSTS = dict(text_work_ms=1500, clip_vision_work_ms=400, loader_work_ms=2000)
LOADED = ("i2v_positive", "i2v_negative", "i2v_latent")    # what a hit loads (the nested slots are never read)
AREA = "object store, 2 hosts"


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt(xs) -> str:
    return f"{med(xs):.3f} s" + (f" (n={len(xs)}, {min(xs):.3f}-{max(xs):.3f})" if len(xs) > 1 else "")


def to_sampler(w, prompt, timeout: float = 600):
    """Seconds from queueing to the sampler's first 'executing' event, and the result."""
    h = w.start_run(prompt)
    deadline, t = time.monotonic() + timeout, None
    while h.terminal is None:
        ev = h._recv(deadline)
        if t is None and ev is not None and ev.get("type") == "executing" \
                and str((ev.get("data") or {}).get("node")) == I2V.SAMPLER:
            t = time.monotonic() - h.t0
    return t, h.wait(timeout).raise_for_status()


def tier_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in Path(root).glob(".bucket/*/blobs/??/*") if not p.name.startswith("."))


def _hit(w, prompt_of, before_bytes):
    """One hit on ``w`` (its output cache freed first; retried when /free came late)."""
    for attempt in range(4):
        w.free(unload_models=False, settle=0.5 + attempt)
        w.reset_counts()
        b0 = before_bytes()
        t, res = to_sampler(w, prompt_of())
        if "101" not in res.cached:
            break
    acts = {e["data"]["slot"]: e["data"]["action"] for e in res.events_of("seedreuse.slot")}
    ran = {k: v for k, v in w.counts().items() if v and k.endswith(("encode", "loader"))}
    if acts.get("i2v_positive") != "reused" or ran:
        raise RuntimeError(f"not a hit on {w.name}: slot actions {acts}, encoders/loaders {ran}")
    return t, before_bytes() - b0


def measure_hits(writer, reader, repeats: int, seeds, tier=None, manifest_of=None) -> dict:
    """Per repeat: cold on ``writer`` (a new text), the first and second hit on ``reader``."""
    for w in (writer, reader):
        # warm-up of each process (imports, model loading, the store's first use: the endpoint
        # probe on a bucket), on an image and a cache of its own: no content shared with the hits
        graphs.write_test_image(Path(w.input_dir) / "warmup.png", seed=99)
        w.run(i2v_reuse("warmup.png", next(seeds), f"warm up {w.name}", cache_name=f"warmup-{w.name}",
                        **COSTS)).raise_for_status()
    out = {"cold": [], "first": [], "second": [], "fetched_first": [], "fetched_second": [], "loaded": None,
           "version": None}
    nothing = (lambda: 0)
    for k in range(repeats):
        name, text = f"hit{k}", f"a bench text {k} {time.time_ns()}"
        writer.free()
        writer.reset_counts()
        t, _ = to_sampler(writer, i2v_reuse("ref.png", next(seeds), text, cache_name=name, **COSTS))
        c = writer.counts()
        if c.get("text_encode") != 1 or c.get("clip_vision_encode") != 1:
            raise RuntimeError(f"the cold run did not encode: {c}")
        out["cold"].append(t)
        for label in ("first", "second"):
            t, fetched = _hit(reader, lambda: i2v_reuse("ref.png", next(seeds), text, cache_name=name,
                                                        reuse="require", **COSTS),
                              (lambda: tier_bytes(tier)) if tier else nothing)
            out[label].append(t)
            out[f"fetched_{label}"].append(fetched)
        if manifest_of is not None and out["loaded"] is None:
            m = manifest_of(name)
            files = [m["files"][m["slots"][s]["file"]] for s in LOADED]
            out["loaded"] = sum(e["bytes"] for e in files)
            out["loaded_distinct"] = sum({e["sha256"]: e["bytes"] for e in files}.values())
            out["version"] = sum(e["bytes"] for e in m["files"].values())
    return out


def _fleet_hits(env, fleet, repeats, seeds, tier, manifest_of) -> dict:
    fleet.start()
    try:
        a, b = fleet.on("hostA")[0], fleet.on("hostB")[0]
        return measure_hits(a, b, repeats, seeds, tier(b) if tier else None, manifest_of)
    finally:
        fleet.stop()


def _manifest(cache) -> dict:
    snap = cache.snapshot()
    with snap:
        return snap.manifest


def run_gluster(base: Path, models: Path, repeats: int, seeds, log=print) -> dict:
    env = SharedFSEnv(PROFILES["gluster-strict"](), log=log)
    with env:
        log(f"[bench] GlusterFS strict up in {env.timings['setup_s']} s")
        fleet = SharedFleet(env, base / "gluster-workers", models, per_host=(1, 1))
        return _fleet_hits(env, fleet, repeats, seeds, None,
                           lambda name: _manifest(FolderCache(env.cache_root(), name)))


def run_rgw(base: Path, models: Path, repeats: int, sizes, seeds, log=print) -> dict:
    prof = RGWProfile()
    with SharedFSEnv(prof, log=log) as env:
        log(f"[bench] Ceph RGW up in {env.timings['setup_s']} s at {prof.url}")
        os.environ.update(prof.s3_env())
        fleet = BucketFleet(env, base / "rgw-workers", models, per_host=(1, 1))
        hits = _fleet_hits(env, fleet, repeats, seeds, lambda w: env.cache_root(w.sim),
                           lambda name: _manifest(BucketCache(prof.url, name, local_root=env.cache_root())))
        hits["commit"] = measure_commits(prof.url, env.cache_root(), base / "local-commits", sizes, repeats, log)
    return hits


def measure_commits(url: str, local_tier: Path, folder: Path, sizes, repeats: int, log=print) -> dict:
    import torch
    out = {}
    for mb in sizes:
        n = max(1, min(repeats, 2 if mb >= 256 else repeats))
        bucket, local = [], []
        for k in range(n):
            value = torch.full(((mb << 20) // 4,), float(k + 1))      # mb MB of tensor data
            for store, into in (("bucket", bucket), ("folder", local)):
                cache = (BucketCache(url, f"commit-{mb}mb", local_root=local_tier) if store == "bucket"
                         else FolderCache(folder, f"commit-{mb}mb"))
                tx = cache.begin(RunInfo())
                tx.stage_slot("x", value, key={"k": k})
                t0 = time.perf_counter()
                tx.commit()
                into.append(time.perf_counter() - t0)
            del value
        BucketCache(url, f"commit-{mb}mb", local_root=local_tier).clear()
        FolderCache(folder, f"commit-{mb}mb").clear()
        out[mb] = {"bucket": bucket, "folder": local}
        log(f"[bench] commit of {mb} MB: bucket {fmt(bucket)}, local folder {fmt(local)}")
    return out


def rows(gluster: dict | None, rgw: dict) -> list[dict]:
    def r(what, value, note=""):
        return {"area": AREA, "what": what, "value": value, "note": note}
    cold, first, second = med(rgw["cold"]), med(rgw["first"]), med(rgw["second"])
    out = [r("cold: queue -> KSampler start on hostA, writing through RGW (loaders + encoders run)", fmt(rgw["cold"])),
           r("cross-host hit through RGW: first hit on hostB, local tier cold", fmt(rgw["first"]),
             f"x{first / cold:.3f} of cold")]
    if gluster is not None:
        g1 = med(gluster["first"])
        out += [r("cold on hostA, writing through GlusterFS strict", fmt(gluster["cold"])),
                r("cross-host hit through GlusterFS strict: first hit on hostB (its own FUSE client)",
                  fmt(gluster["first"]), f"x{g1 / med(gluster['cold']):.3f} of its cold; RGW / GlusterFS "
                                         f"x{first / g1:.3f}"),
                r("GlusterFS strict: second hit on hostB", fmt(gluster["second"]),
                  f"x{med(gluster['second']) / g1:.3f} of its first")]
    else:
        out.append(r("cross-host hit through GlusterFS strict", "not run (--no-gluster)"))
    out += [r("hit from the local tier: second hit on hostB (one LIST, local reads)", fmt(rgw["second"]),
              f"x{second / first:.3f} of the RGW first hit, x{second / cold:.3f} of cold"),
            r("bytes fetched per hit through RGW: first hit on hostB (each repeat) / second hit",
              f"{', '.join(f'{x / 1e6:.2f}' for x in rgw['fetched_first'])} MB / "
              f"{med(rgw['fetched_second']) / 1e6:.2f} MB",
              f"the hit loads {rgw['loaded'] / 1e6:.2f} MB ({', '.join(LOADED)}; {rgw['loaded_distinct'] / 1e6:.2f} MB "
              f"of distinct content: the tier keeps files by sha256) of a {rgw['version'] / 1e6:.2f} MB version")]
    for mb, c in rgw["commit"].items():
        b, f = med(c["bucket"]), med(c["folder"])
        out.append(r(f"commit of a {mb} MB version: bucket (RGW) / local folder",
                     f"{b * 1000:.0f} ms / {f * 1000:.0f} ms", f"x{b / f:.1f}; bucket {mb / b:.0f} MB/s "
                     f"(n={len(c['bucket'])}, {min(c['bucket']) * 1000:.0f}-{max(c['bucket']) * 1000:.0f} ms)"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.object_store.bench_hosts", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="1,16,128,512", help="commit sizes in MB")
    ap.add_argument("--no-gluster", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    log = lambda *x: print(*x, file=sys.stderr, flush=True)   # noqa: E731
    base = Path(tempfile.mkdtemp(prefix="seedreuse-bench-hosts-"))
    try:
        models = tiny_models.ensure_tiny_models().link_models_dir(base / "models")
        seeds = iter(range(1000, 10 ** 6))
        gluster = None if a.no_gluster else run_gluster(base, models, a.repeats, seeds, log)
        rgw = run_rgw(base, models, a.repeats, [int(x) for x in a.sizes.split(",")], seeds, log)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = rows(gluster, rgw)
    for x in out:
        print(f"| {x['area']} | {x['what']} | {x['value']} | {x['note']} |")
    if a.json:
        a.json.write_text(json.dumps({"rows": out, "raw": {"gluster": gluster, "rgw": rgw}}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
