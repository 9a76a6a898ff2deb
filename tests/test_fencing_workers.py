"""Fencing end to end: a ComfyUI worker stopped (SIGSTOP) in the middle of a segment run for
longer than its lease loses the cache to a second worker; once continued it must fail with
"lost its run lease" and leave the second worker's committed result exactly as it was.

The lease is shortened with SEEDREUSE_LEASE_S so the test stays fast. The exact staging write
kinds (slot, boundary, chunk, result, both commit renames) are covered one by one with paused
writer processes in tests/backend/test_fencing.py; this test is the real-worker scenario.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from reuse_backend.folder.check import check
from seedreuse_lab import graphs
from seedreuse_lab.graphs import link
from seedreuse_lab.reuse_graphs import SEG, segment_graph

pytestmark = pytest.mark.comfy
LEASE_S = 2.0
SLOW = "9901"


def _with_slow_body(prompt: dict, seconds: float) -> dict:
    """A pass-through slow node inside the loop body (after decode, before Boundary Save), so
    the worker can be stopped while a later segment is in flight."""
    prompt[SLOW] = {"class_type": "SeedReuseTestSlow",
                    "inputs": {"value": link(SEG.DECODE), "seconds": seconds}}
    prompt[SEG.BOUNDARY]["inputs"]["images"] = link(SLOW)
    return prompt


def _state(root: Path, name="segments") -> tuple:
    d = root / name
    return (json.loads((d / "manifest.json").read_text())["version"],
            hashlib.sha256((d / "result.mp4").read_bytes()).hexdigest())


def test_stopped_worker_loses_the_cache_and_cannot_corrupt_it(comfy_workers):
    a, b = comfy_workers(2, env={"SEEDREUSE_LEASE_S": str(LEASE_S)})
    root = comfy_workers.cache_root
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
    h = a.start_run(_with_slow_body(segment_graph("ref.png", seed=1), 0.4))
    slow_seen = []
    # segment 1's copy of the slow node: segment 0's chunk and boundary are staged already
    h.wait_for(lambda e: e.get("type") == "executing" and (e.get("data") or {}).get("display_node") == SLOW
               and (slow_seen.append(1) or len(slow_seen) >= 2), timeout=300)
    os.killpg(a.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(2 * LEASE_S)                      # past the lease: a's lock is now stale
        done = b.run(segment_graph("ref.png", seed=2)).raise_for_status()
        assert any(e["data"].get("kept") == 0 for e in done.events_of("seedreuse.segments"))
        committed = _state(root)
    finally:
        os.killpg(a.proc.pid, signal.SIGCONT)
    res = h.wait(timeout=300)
    assert res.status == "error", res.status
    msg = (res.error or {}).get("exception_message", "")
    assert "lost its run lease" in msg and "SEEDREUSE_LEASE_S" in msg, msg
    structured = (res.error or {}).get("seedreuse") or {}
    assert structured.get("code") == "transaction", res.error
    assert _state(root) == committed               # b's result and manifest untouched
    assert [p.code for p in check(root, "segments") if p.code != "stale_tmp"] == []
    # and the cache still works: a reuses b's run on the next request
    again = a.run(segment_graph("ref.png", seed=2, prefix_segments=2)).raise_for_status()
    assert any(e["data"].get("kept") == 2 for e in again.events_of("seedreuse.segments"))
