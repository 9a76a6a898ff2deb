"""A batch of seeds queued at once across workers (issue 27): no request fails because another
one writes the same cache. Three real ComfyUI workers on one cache root, requests queued at the
same moment, each a new seed, reuse=auto (folder/run_lease.py, folder/commit.py, store/rebase.py,
single_flight.py).

What is measured, printed and asserted: failures, text-encoder executions (the counting stand-in,
summed over the workers), the cold requests that waited for the encoding run (single flight),
the current version (the run its manifest names, with that run's text), and for segment runs
the takes the cache keeps. Nothing here is timed.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from reuse_backend.media import segment_takes
from reuse_backend.folder.cache import FolderCache
from reuse_backend.folder.check import check
from seedreuse_lab import graphs
from seedreuse_lab.reuse_graphs import segment_graph, t2v_reuse

pytestmark = pytest.mark.comfy
N = 6


def _batch(workers, prompts) -> list:
    """Queue every prompt at once (round robin over the workers), then wait for all of them."""
    handles = [workers[i % len(workers)].start_run(p) for i, p in enumerate(prompts)]
    return [h.wait(timeout=900) for h in handles]


def _encodes(workers) -> int:
    return sum(w.counts().get("text_encode", 0) for w in workers)


def _failures(results) -> list:
    return [(r.status, (r.error or {}).get("exception_message", "")[:300]) for r in results if r.status != "success"]


def test_a_batch_on_three_workers_never_fails_and_encodes_once(comfy_workers):
    workers = list(comfy_workers(3, env={"SEEDREUSE_SINGLE_FLIGHT_S": "600"}))
    root = comfy_workers.cache_root
    rows = []
    # cold cache, one text: single flight, the encoder runs once across the workers
    cold = _batch(workers, [t2v_reuse(seed=100 + i, prompt_text="batch", cache_name="batch") for i in range(N)])
    rows.append(("cold, same text", _failures(cold), _encodes(workers)))
    for w in workers:
        w.reset_counts()
    # warm cache, same text: every request hits
    warm = _batch(workers, [t2v_reuse(seed=200 + i, prompt_text="batch", cache_name="batch") for i in range(N)])
    rows.append(("warm, same text", _failures(warm), _encodes(workers)))
    for w in workers:
        w.reset_counts()
    # a different text for each: every run encodes and commits in turn; the last is current
    texts = [f"text {i}" for i in range(N)]
    mixed = _batch(workers, [t2v_reuse(seed=300 + i, prompt_text=t, cache_name="batch") for i, t in enumerate(texts)])
    rows.append(("different texts", _failures(mixed), _encodes(workers)))
    for name, failed, encodes in rows:
        print(f"\n{name}: {N} requests at once on 3 workers: {N - len(failed)} succeeded, "
              f"{len(failed)} failed, text encoder ran {encodes} time(s)")
    assert [r[1] for r in rows] == [[], [], []], rows
    assert [r[2] for r in rows] == [1, 0, N], rows
    # cold: one run encoded; every other reused, either the commit it found or, having waited
    # for the run that held the key's claim (single flight), that run's encoding
    cold_slots = [e["data"] for r in cold for e in r.events_of("seedreuse.slot") if e["data"]["slot"] == "positive"]
    assert len(cold_slots) == N and sorted(d["action"] for d in cold_slots) == ["encoded"] + ["reused"] * (N - 1), \
        cold_slots
    waited = [d for d in cold_slots if "single flight" in d["reason"]]
    assert all(d["action"] == "reused" for d in waited), waited
    print(f"cold: {len(waited)} request(s) waited for the run that encoded, then reused its encoding")
    # different texts: every run committed in turn; the current version is the one the last
    # commit published, i.e. the version of the run its manifest names, with that run's text
    m = json.loads((root / "batch" / "manifest.json").read_text())
    text_of = {r.prompt_id: t for r, t in zip(mixed, texts)}
    assert m["run"]["prompt_id"] in text_of, m["run"]
    assert m["slots"]["positive"]["key"]["fields"]["value:text"] == text_of[m["run"]["prompt_id"]]
    assert check(root, "batch") == []
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["batch"]   # no .tmp/.lock


def test_segment_runs_at_once_each_become_a_take(comfy_workers):
    workers = list(comfy_workers(3))
    root = comfy_workers.cache_root
    for w in workers:
        graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
    seeds = [11, 12, 13]
    res = _batch(workers, [segment_graph("ref.png", seed=s) for s in seeds])
    failed = _failures(res)
    with FolderCache(root, "segments").snapshot() as snap:
        takes = segment_takes.read_takes(snap)
    print(f"\n3 segment runs at once on 3 workers: {3 - len(failed)} succeeded, {len(failed)} failed; "
          f"takes kept {[(t.number, t.section.get('seed')) for t in takes]}")
    assert failed == []
    assert sorted(t.section.get("seed") for t in takes) == seeds          # none lost (K = 3)
    assert [t.number for t in takes] == [3, 2, 1]
    assert [p.code for p in check(root, "segments")] == []
