"""Subprocess helper of the crash/lock tests (``python -m tests.backend.writer_proc`` from the
repository root; see REPO_ENV in storehelp).

  writer_proc.py count ROOT NAME MARKER   write a version, print the number of fs operations
  writer_proc.py kill ROOT NAME MARKER K  write a version, SIGKILL itself before fs op K
  writer_proc.py hold ROOT NAME RUN_ID    take the writer lock, print "held", sleep forever
  writer_proc.py pause ROOT NAME KIND     stage a version with marker 2 and SIGSTOP itself in the
                                          middle of one staging write of KIND (see PAUSE_POINTS);
                                          once continued, print the outcome as JSON and exit
  writer_proc.py evict-pause ROOT NAME    evict the cache, SIGSTOPping itself once the version is out
                                          and its second look is done (before its lock's release);
                                          once continued, print the outcome as JSON and exit
  writer_proc.py read-pause ROOT NAME     open a snapshot, print "open", SIGSTOP; once continued close
                                          it, print "closed", SIGSTOP (its lease lingers); then exit
  writer_proc.py overlap ROOT NAME MARKER GO  begin and stage a version with MARKER, print "staged",
                                          commit once the file GO exists; print the outcome as JSON
  writer_proc.py claim ROOT NAME SLOT HOW take the single-flight claim of SLOT (key digest "d1"),
                                          print "claimed", then (HOW) "stall": SIGSTOP itself, once
                                          continued release it and print JSON; "hold": sleep forever
  writer_proc.py release ROOT NAME STEPS  take the writer lock and release it, SIGSTOPping itself
                                          at each of STEPS ("+"-joined, see release_paused); once
                                          continued, print the outcome as JSON and exit
"""
import os
import signal
import sys
import time

from tests.backend.storehelp import OpHook, write_version

from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo


def _stop_self(where: str) -> None:
    print(f"paused {where}", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)     # every thread stops, the heartbeat too


# KIND -> the fsops operation (op name, test on the path) the writer pauses before
PAUSE_POINTS = {
    "slot": ("rename", lambda p, tx: os.path.basename(p).startswith(".slot_text")),
    "boundary": ("rename", lambda p, tx: os.path.basename(p).startswith(".boundary_00001")),
    "commit-old": ("rename", lambda p, tx: p == str(tx.cache.paths.current)),
    "commit-publish": ("rename", lambda p, tx: p == str(tx.staging)),
}


def pause(cache, kind: str) -> None:
    """Stage marker 2 like write_version, pausing in the middle of the write of ``kind``:
    before a hooked operation, or (chunk, result) between stage_path() and the caller's write."""
    import json
    from tests.backend.storehelp import boundary_value, result_bytes, slot_value
    from reuse_backend.errors import ReuseError
    from reuse_backend.media import video
    from reuse_backend.storage import fsops
    import numpy as np

    tx = cache.begin(RunInfo(run_id="paused-writer", extra={"marker": 2}))
    fired = []

    def hook(op, path):
        want = PAUSE_POINTS.get(kind)
        if want and not fired and op == want[0] and want[1](path, tx):
            fired.append(op)
            _stop_self(kind)

    fsops.set_hook(hook)
    outcome = {"kind": kind}
    try:
        tx.stage_slot("text", slot_value(2, "text"), key={"slot": "text"}, meta={"m": 2})
        tx.stage_boundary(1, boundary_value(2, 1), {"i": 1})
        if kind == "chunk":
            path = tx.stage_path("chunk_00001.mp4")
            _stop_self(kind)
            frames = np.full((3, 16, 16, 3), 200, np.uint8)
            with tx.writing("write chunk_00001.mp4"):
                video.write_chunk(path, frames, 8)
        path = tx.stage_path("result.mp4")
        if kind == "result":
            _stop_self(kind)
        with tx.writing("write result.mp4"):
            with open(path, "wb") as f:
                f.write(result_bytes(2))
        tx.add_file("result.mp4")
        tx.set_section("segments", {"count": 2, "marker": 2})
        outcome["version"] = tx.commit()
        outcome["result"] = "committed"
    except ReuseError as e:
        outcome.update(result="error", type=type(e).__name__, message=e.message, fix=e.fix)
    except Exception as e:   # a raw OSError / av error is what the fencing must prevent
        outcome.update(result="raw-error", type=type(e).__name__, message=str(e))
    finally:
        fsops.clear_hook()
        tx.discard()
    print(json.dumps(outcome), flush=True)


def release_paused(cache, steps: str) -> None:
    """Release a held writer lock, stopping at the named steps of the release: ``start`` (before
    it checks the lock is its own), ``checked`` (the first mutation after that check said yes:
    where a check-then-unlink would remove the next owner's lock), ``moved`` (the second one)."""
    import json
    from reuse_backend.storage import fsops

    wanted = steps.split("+")
    lock = cache.writer_lock("releasing-writer")
    lock.heartbeat_s = 0.2
    lock.acquire()
    releasing, said_ours, mutations = [], [], []
    real_held = lock.medium.holds              # the release's look: is the lease file still ours?

    def held(name, token):
        if releasing and "start" in wanted and not said_ours and "start" not in releasing:
            releasing.append("start")
            _stop_self("start")
        ours = real_held(name, token)
        if releasing and ours:
            said_ours.append(True)
        return ours

    def hook(op, path):
        if said_ours:
            mutations.append(op)
            step = {1: "checked", 2: "moved"}.get(len(mutations))
            if step in wanted:
                _stop_self(step)

    lock.medium.holds = held
    fsops.set_hook(hook)
    outcome = {"steps": steps}
    try:
        releasing.append(True)
        lock.release()
        outcome.update(result="released", mutations=mutations)
    except Exception as e:
        outcome.update(result="error", type=type(e).__name__, message=str(e))
    finally:
        fsops.clear_hook()
    print(json.dumps(outcome), flush=True)


def overlap(cache, marker: int, go: str) -> None:
    """A run that stages, then commits when told to (a second one commits at the same time)."""
    import json
    from tests.backend.storehelp import stage_version
    tx = cache.begin(RunInfo(run_id=f"overlap-{marker}", extra={"marker": marker}))
    outcome = {"marker": marker}
    try:
        stage_version(tx, marker)
        print("staged", flush=True)
        deadline = time.monotonic() + 120
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
        outcome.update(result="committed", version=tx.commit(), rebased=tx.rebased, recovered=tx.recovered)
    except Exception as e:  # noqa: BLE001 - reported to the test
        outcome.update(result="error", type=type(e).__name__, message=str(e))
    finally:
        tx.discard()
    print(json.dumps(outcome), flush=True)


def claim(cache, slot: str, how: str) -> None:
    import json
    from reuse_backend.store import claim as single_flight
    got = single_flight.claim(cache, slot, "d1", "leader", wait=0)
    assert got.lease is not None, "the claim was taken"
    got.lease.heartbeat_s = 0.2
    print("claimed", flush=True)
    if how == "hold":
        while True:
            time.sleep(60)
    _stop_self("claim")
    still = got.lease.held()
    got.release()
    print(json.dumps({"held_after_stall": still}), flush=True)


def main(argv):
    cmd, root, name = argv[:3]
    cache = FolderCache(root, name)
    if cmd == "count":
        with OpHook() as hook:
            write_version(cache, int(argv[3]))
        print(hook.count)
        print(" ".join(op for op, _ in hook.ops), file=sys.stderr)
    elif cmd == "kill":
        with OpHook(int(argv[4]), lambda op, path: os.kill(os.getpid(), signal.SIGKILL)):
            write_version(cache, int(argv[3]))
    elif cmd == "pause":
        pause(cache, argv[3])
    elif cmd == "evict-pause":
        import json
        from reuse_backend.storage import fsops
        from reuse_backend.folder import evict
        fired = []

        def at_release(op, path):
            if op == "rename" and path == str(cache.paths.lock) and not fired:
                fired.append(op)
                _stop_self("evict")

        fsops.set_hook(at_release)
        ok, why = evict.evict_cache(root, name, lease_s=cache.lease_s)
        fsops.clear_hook()
        print(json.dumps({"evicted": ok, "why": why}), flush=True)
    elif cmd == "overlap":
        overlap(cache, int(argv[3]), argv[4])
    elif cmd == "claim":
        claim(cache, argv[3], argv[4])
    elif cmd == "release":
        release_paused(cache, argv[3])
    elif cmd == "read-pause":
        snap = cache.snapshot()
        _stop_self("open")
        snap.close()
        _stop_self("closed")
    elif cmd == "hold":
        lock = cache.writer_lock(argv[3])
        lock.heartbeat_s = 0.2
        lock.acquire()
        print("held", flush=True)
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1:])
