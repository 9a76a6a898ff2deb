"""One actor of the randomized history test (test_histories_on_bucket.py): a process that runs
operations of one role on one cache, as a host would, and prints each as JSON lines (an
``invoke`` before, then ``ok``, ``fail`` or ``info`` after: an outcome the actor cannot know),
so the test can SIGKILL it at any instant and still know what it did.

  python -m tests.object_store.history_actor ROLE URL NAME LOCAL_ROOT ACTOR_ID ACTOR_NUMBER SEED

Roles: ``writer`` (begin, stage slot text with a fresh marker and slot image with a fresh one or
carried from the base, commit), ``reader`` (open the current version, load both slots),
``janitor`` (a collection, sometimes a clear). The S3 settings and SEEDREUSE_LEASE_S come from the
environment. Ends on a closed stdin or a SIGKILL.
"""
from __future__ import annotations

import json
import random
import sys
import threading
import time

import torch

from reuse_backend.bucket import collect
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.errors import ObjectStoreError, ReuseError
from reuse_backend.store.run_info import RunInfo

IMAGE_VALUES = 16 << 10           # float32: 64 KiB


def emit(**kw) -> None:
    print(json.dumps({"t": time.time(), **kw}), flush=True)


def _marker(value) -> float:
    return float(value.reshape(-1)[0])


def write(cache, rng, actor: str, number: int, n: int) -> None:
    op = f"{actor}/{n}"
    run = RunInfo(run_id=f"{actor}-{n}")
    emit(op=op, kind="commit", phase="invoke", run=run.run_id)
    tx = None
    try:
        tx = cache.begin(run)
        text = float(number * 1_000_000 + n)         # unique in the history: names the run in a read
        tx.stage_slot("text", {"cond": torch.full((4, 8), text)}, key={"digest": f"t{text}"})
        base_image = None
        if tx.base is not None and tx.base.slot_entry("image") and rng.random() < 0.5:
            tx.carry_slot("image")
            base_image = tx.base.version
            image = _marker(tx.base.load_slot("image")["big"])
        else:
            image = -text
            tx.stage_slot("image", {"big": torch.full((IMAGE_VALUES,), image)}, key={"digest": f"i{image}"})
        emit(op=op, kind="staged", phase="note", run=run.run_id, text=text, image=image, carried_from=base_image,
             base=tx.base_head.seq if tx.base_head is not None else 0)
        time.sleep(rng.random() * 0.3)
        version = tx.commit()
        emit(op=op, kind="commit", phase="ok", run=run.run_id, version=version, seq=tx.seq, text=text, image=image)
    except ObjectStoreError as e:
        phase = "info" if e.details.get("published", False) is None else "fail"
        emit(op=op, kind="commit", phase=phase, run=run.run_id, error=type(e).__name__, message=e.message[:300])
    except ReuseError as e:
        emit(op=op, kind="commit", phase="fail", run=run.run_id, error=type(e).__name__, message=e.message[:300])
    finally:
        if tx is not None:
            tx.discard()


def read(cache, actor: str, n: int) -> None:
    op = f"{actor}/{n}"
    emit(op=op, kind="read", phase="invoke")
    try:
        snap = cache.snapshot()
        if snap is None:
            emit(op=op, kind="read", phase="ok", version=None, gone=cache.gone)
            return
        with snap:
            text = _marker(snap.load_slot("text")["cond"])
            image = _marker(snap.load_slot("image")["big"])
            emit(op=op, kind="read", phase="ok", version=snap.version, seq=snap.seq, text=text, image=image,
                 run=snap.manifest["run"]["run_id"])
    except ReuseError as e:
        emit(op=op, kind="read", phase="fail", error=type(e).__name__, message=e.message[:300],
             missing="missing from the bucket" in e.message or "does not match" in e.message)


def janitor(cache, rng, actor: str, n: int) -> None:
    op = f"{actor}/{n}"
    if rng.random() < 0.3:
        emit(op=op, kind="clear", phase="invoke")
        try:
            cache.clear(f"clear-{actor}-{n}")
            emit(op=op, kind="clear", phase="ok")
        except ReuseError as e:
            emit(op=op, kind="clear", phase="fail", error=type(e).__name__, message=e.message[:200])
        return
    emit(op=op, kind="collect", phase="invoke")
    try:
        rep = collect.collect(cache)
        emit(op=op, kind="collect", phase="ok", fenced=rep.fenced, deleted=len(rep.deleted), skipped=rep.skipped)
    except ReuseError as e:
        emit(op=op, kind="collect", phase="fail", error=type(e).__name__, message=e.message[:200])


def main(argv) -> None:
    role, url, name, root, actor, number, seed = argv
    rng = random.Random(int(seed))
    cache = BucketCache(url, name, local_root=root)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    emit(op=f"{actor}/start", kind="start", phase="note", role=role)
    n = 0
    while not stop.is_set():
        n += 1
        if role == "writer":
            write(cache, rng, actor, int(number), n)
        elif role == "reader":
            read(cache, actor, n)
        else:
            janitor(cache, rng, actor, n)
        time.sleep(rng.random() * (0.6 if role == "janitor" else 0.15))


if __name__ == "__main__":
    main(sys.argv[1:])
