"""Subprocess helper of the object-store tests: a writer the test can SIGKILL or SIGSTOP
(``python -m tests.object_store.bucket_writer ...`` from the repository root; the S3 settings,
SEEDREUSE_LEASE_S and the local tier come from the environment the test gives it).

  bucket_writer.py commit URL ROOT NAME MARKER   begin a run (run id ``writer-MARKER``), stage
                                                 slot "text" (small) and slot "image" (1 MiB) with
                                                 MARKER, commit; print "begun", then the outcome
                                                 as JSON (result committed/error, version, seq)
  bucket_writer.py staged URL ROOT NAME MARKER   begin a run and stage (as commit), print "staged",
                                                 wait for a line on stdin, then commit and print
                                                 the outcome as JSON (as commit)
  bucket_writer.py claim URL ROOT NAME SLOT      begin run "dead-holder", take the single-flight
                                                 claim of SLOT (digest "d1"), stage SLOT (text
                                                 value, marker 7), publish it as the claim's entry,
                                                 print "claimed", then hold it all forever
"""
import json
import sys
import time

import torch

from reuse_backend.bucket.cache import BucketCache
from reuse_backend.errors import ReuseError
from reuse_backend.store.run_info import RunInfo

IMAGE_VALUES = 256 << 10          # float32: 1 MiB, enough for a stall in the middle of its upload


def text_value(marker: int) -> dict:
    return {"cond": torch.full((4, 8), float(marker)), "pooled": [torch.full((3,), float(marker))]}


def image_value(marker: int) -> dict:
    return {"big": torch.full((IMAGE_VALUES,), float(marker))}


def stage(tx, marker: int) -> None:
    tx.stage_slot("text", text_value(marker), key={"digest": f"text-{marker}"}, meta={"encode_seconds": 1.0})
    tx.stage_slot("image", image_value(marker), key={"digest": f"image-{marker}"})


def commit(url: str, root: str, name: str, marker: int, *, wait: bool = False) -> None:
    cache = BucketCache(url, name, local_root=root)
    tx = cache.begin(RunInfo(run_id=f"writer-{marker}"))
    print("begun", flush=True)
    outcome = {"marker": marker}
    try:
        stage(tx, marker)
        if wait:
            print("staged", flush=True)
            sys.stdin.readline()
        outcome.update(result="committed", version=tx.commit(), seq=tx.seq, rebased=tx.rebased)
    except ReuseError as e:
        outcome.update(result="error", type=type(e).__name__, message=e.message, fix=e.fix,
                       lost=e.details.get("lost"))
    except Exception as e:  # noqa: BLE001 - an untyped error is what the tests must not see
        outcome.update(result="raw-error", type=type(e).__name__, message=str(e))
    finally:
        tx.discard()
    print(json.dumps(outcome), flush=True)


def claim(url: str, root: str, name: str, slot: str) -> None:
    cache = BucketCache(url, name, local_root=root)
    tx = cache.begin(RunInfo(run_id="dead-holder"))
    got = cache.claim(slot, "d1", tx.run.run_id, wait=0)
    assert got.lease is not None, "the claim was free"
    tx.stage_slot(slot, text_value(7), key={"digest": "d1"})
    assert got.publish(tx, slot), "the entry was published"
    print("claimed", flush=True)
    while True:
        time.sleep(60)


def main(argv):
    cmd = argv[0]
    if cmd in ("commit", "staged"):
        commit(argv[1], argv[2], argv[3], int(argv[4]), wait=cmd == "staged")
    elif cmd == "claim":
        claim(*argv[1:5])
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
