"""Benchmark, not a test: what a hit, a cold run's commit and the cache browser's list cost on a
bucket as a namespace gathers caches and a cache gathers records (issue 41): S3 requests (counted
by botocore's own event hook, exact) and time (median of ``--repeats``), side by side, with the
ratio of the largest to the smallest.

    python -m tests.object_store.bench_scale [--repeats 3] [--caches 1,100,10000] [--records 1,1000,10000] [--json F]
    (scripts/bench.sh --only bucket-scale runs it: seedreuse_lab/bench_bucket_scale.py)

A real Ceph RGW on loopback (tests/object_store/rgw.py; root, as the object-store tier). Each
namespace is an automatic one (``<prefix>/.auto``: it always has a size budget, 20 GiB by
default). What is there is created fast by writing objects directly, as the pack would have left
them:

* caches: N-1 dead caches (a cleared record each: what a clear or an eviction leaves for ever)
  and one live cache committed by the pack; and N live caches (a commit record, one data object
  and a row of the usage index each) of which one is measured;
* records: one cache whose log holds N records (copies of one version record, every number from
  1 to N), kept by a live reader lease on record 1 (otherwise a commit's collection removes them,
  a page per collection).

Measured from a process with its own local tier: a hit on a host that holds the version (snapshot +
both slots loaded), a first hit on a host that holds nothing, a cold run's commit (begin, two
slots staged, commit with its collection and the budget), the browser's list (every name, each
described, the budget line).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import torch

from reuse_backend.bucket import client as clients, leases, location, records, usage_index
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket.store import BucketStore
from reuse_backend.store.run_info import RunInfo
from reuse_backend.store.lease import READER_LEASE, Lease

from . import rgw as rgw_mod
from .bucket_writer import text_value

AREA = "bucket scale"


def stage(tx, marker: int) -> None:
    """Two small slots (text, image), so that 10,000 caches fit the test cluster's disk."""
    tx.stage_slot("text", text_value(marker), key={"digest": f"text-{marker}"})
    tx.stage_slot("image", {"big": torch.full((256,), float(marker))}, key={"digest": f"image-{marker}"})


@contextmanager
def counting(bucket: str):
    seen: list[str] = []
    c = clients.for_bucket(bucket)
    hooks = [s for s in (c.s3, getattr(c, "s3_once", None)) if s is not None]

    def saw(model, **kw):
        seen.append(model.name)
    for s3 in hooks:
        s3.meta.events.register("before-call.s3.*", saw)
    try:
        yield seen
    finally:
        for s3 in hooks:
            s3.meta.events.unregister("before-call.s3.*", saw)


def put_all(bucket: str, items) -> None:
    c = clients.for_bucket(bucket)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda kv: c.put(kv[0], kv[1]), items))


def measure(bucket: str, fn, repeats: int) -> tuple[list[int], list[float]]:
    reqs, times = [], []
    for _ in range(repeats):
        with counting(bucket) as seen:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        reqs.append(len(seen))
    return reqs, times


def browse(url: str, root) -> None:
    store = BucketStore(url, root)
    for n in store.names():
        _, snap = store.describe(n)
        if snap is not None:
            snap.close()
    store.summary()


def hit(url: str, root, name: str) -> None:
    with BucketCache(url, name, local_root=root).snapshot() as snap:
        snap.load_slot("text")
        snap.load_slot("image")


def cold_commit(url: str, root, name: str, counter: list) -> None:
    counter[0] += 1
    cache = BucketCache(url, name, local_root=root)
    tx = cache.begin(RunInfo(run_id=f"bench-{uuid.uuid4().hex[:12]}"))
    stage(tx, 1000 + counter[0])
    tx.commit()


def cache_ops(url: str, tmp: Path, name: str, repeats: int, with_list: bool) -> dict:
    warm, counter = tmp / f"warm-{uuid.uuid4().hex[:6]}", [0]
    cold_commit(url, warm, name, counter)              # the live version; this host holds it
    hit(url, warm, name)
    out = {"hit": measure(location.parse(url).bucket, lambda: hit(url, warm, name), repeats),
           "first hit": measure(location.parse(url).bucket,
                                lambda: hit(url, tmp / f"fresh-{uuid.uuid4().hex[:6]}", name), repeats),
           "commit": measure(location.parse(url).bucket, lambda: cold_commit(url, warm, name, counter), repeats)}
    if with_list:
        browser = tmp / f"browser-{uuid.uuid4().hex[:6]}"
        browse(url, browser)                           # this host has read each record once
        out["list"] = measure(location.parse(url).bucket, lambda: browse(url, browser), repeats)
    return out


def dead_caches(bucket_url: str, n: int) -> str:
    """N-1 caches cleared or evicted by the pack: a cleared record each, no row in the usage index
    (its shards written empty, as the pack leaves them)."""
    url = f"{bucket_url}/dead-{n}/.auto"
    loc = location.parse(url)
    rec = records.dumps(records.make(1, "cleared", None, {}, "evict-bench"))
    put_all(loc.bucket, [(loc.cache(f"gone-{i:05d}").log(1), rec) for i in range(n - 1)]
            + [(usage_index.key(loc, s), usage_index.dumps({})) for s in range(usage_index.SHARDS)])
    return url


def index_rebuild(url: str, tmp: Path) -> tuple[list[int], list[float]]:
    """A namespace without a usage index (written by an older pack): the first list rebuilds it."""
    loc = location.parse(url)
    clients.for_bucket(loc.bucket).delete_many([usage_index.key(loc, s) for s in range(usage_index.SHARDS)])
    return measure(loc.bucket, lambda: BucketStore(url, tmp / "rebuild").names(), 1)


def live_caches(bucket_url: str, tmp: Path, n: int) -> str:
    """N-1 live caches written directly (a record and one data object each), and their rows in the
    usage index (the measured cache 'live' is committed by the pack)."""
    url = f"{bucket_url}/live-{n}/.auto"
    loc = location.parse(url)
    src = tmp / "src"
    tx = BucketCache(url, "template", local_root=src).begin()
    stage(tx, 1)
    tx.commit()
    _, rec = BucketCache(url, "template", local_root=src).current(lease=False)[:2]
    c = clients.for_bucket(loc.bucket)
    blob = {rel: c.get(loc.cache("template").data(rel), 1 << 30).body for rel in set(rec["objects"].values())}
    items, rows = [], {}
    for i in range(n - 1):
        keys = loc.cache(f"c-{i:05d}")
        items += [(keys.data(rel), body) for rel, body in blob.items()]
        items.append((keys.log(1), records.dumps({**rec, "seq": 1})))
        rows[f"c-{i:05d}"] = [1, sum(len(b) for b in blob.values()), time.time() - 86400, True]
    put_all(loc.bucket, items)
    BucketCache(url, "template", local_root=src).clear()
    for shard in range(usage_index.SHARDS):
        mine = {k: v for k, v in rows.items() if usage_index.shard_of(k) == shard}
        usage_index.change_shard(c, loc, shard, lambda r, mine=mine: (r.update(mine), True)[1], lambda s: {})
    return url


def long_log(bucket_url: str, tmp: Path, n: int) -> str:
    url = f"{bucket_url}/records-{n}"
    loc = location.parse(url)
    root = tmp / "log-src"
    tx = BucketCache(url, "many", local_root=root).begin()
    stage(tx, 1)
    tx.commit()
    cache = BucketCache(url, "many", local_root=root)
    _, rec = cache.current(lease=False)[:2]
    put_all(loc.bucket, [(cache.keys.log(s), records.dumps({**rec, "seq": s})) for s in range(1, n + 1)])
    Lease(leases.ObjectLeases(cache.client), cache.keys.reader("bench-reader"), "bench-reader", READER_LEASE,
          lease_s=3600.0, heartbeat_s=60.0, cache_name=cache.name,
          extra={"since": 1, "exact": True}).acquire(exclusive=False)   # a long reader of record 1: every record is kept
    return url


def fmt(reqs, times) -> str:
    return f"{statistics.median(reqs):.0f} req, {statistics.median(times) * 1000:.0f} ms"


def table(title: str, scales, results: dict, log=print) -> list[dict]:
    ops = list(next(iter(results.values())))
    log(f"\n{title}")
    log("| operation | " + " | ".join(str(s) for s in scales) + f" | ratio {scales[-1]}/{scales[0]} (requests; time) |")
    log("| --- |" + " --- |" * (len(scales) + 1))
    rows = []
    for op in ops:
        cells = [fmt(*results[s][op]) for s in scales]
        r0, r1 = results[scales[0]][op], results[scales[-1]][op]
        ratio = (f"{statistics.median(r1[0]) / statistics.median(r0[0]):.2f}; "
                 f"{statistics.median(r1[1]) / statistics.median(r0[1]):.2f}")
        log(f"| {op} | " + " | ".join(cells) + f" | {ratio} |")
        rows.append({"area": AREA, "what": f"{op}, {title}", "value": " / ".join(cells),
                     "note": f"at {', '.join(map(str, scales))}; ratio {ratio}"})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.object_store.bench_scale")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--caches", default="1,100,10000")
    ap.add_argument("--records", default="1,1000,10000")
    ap.add_argument("--live-list-max", type=int, default=100, help="largest live namespace whose list is measured")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    caches = [int(x) for x in a.caches.split(",")]
    recs = [int(x) for x in a.records.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    rows = []
    with rgw_mod.RGW(tmp) as gw:
        os.environ.update(gw.env())
        clients.forget_clients()
        base = gw.bucket("bench-scale")
        bucket = location.parse(base).bucket
        print(f"[bucket-scale] Ceph RGW up in {gw.started_s:.0f} s", flush=True)
        dead, live, long = {}, {}, {}
        rebuild = {}
        for n in caches:
            t0 = time.monotonic()
            url = dead_caches(base, n)
            dead[n] = cache_ops(url, tmp, "live", a.repeats, True)
            rebuild[n] = {"the list that rebuilds a missing usage index (once)": index_rebuild(url, tmp)}
            live[n] = cache_ops(live_caches(base, tmp, n), tmp, "live", a.repeats, n <= a.live_list_max)
            print(f"[bucket-scale] {n} caches measured in {time.monotonic() - t0:.0f} s", flush=True)
        for n in recs:
            long[n] = cache_ops(long_log(base, tmp, n), tmp, "many", a.repeats, True)
            print(f"[bucket-scale] {n} records measured", flush=True)
        rows += table("caches in the namespace: 1 live + the rest dead (cleared)", caches, dead)
        rows += table("caches in the namespace: 1 live + the rest dead, no usage index yet", caches, rebuild)
        live_list = [n for n in caches if n <= a.live_list_max]
        rows += table("caches in the namespace: all live (list: up to --live-list-max)", caches,
                      {n: {k: v for k, v in live[n].items() if k != "list"} for n in caches})
        if len(live_list) > 1:
            rows += table("caches in the namespace: all live, the browser's list", live_list,
                          {n: {"list": live[n]["list"]} for n in live_list})
        rows += table("records in one cache (kept by a reader of record 1)", recs, long)
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "bucket": bucket}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
