"""Segment Reuse beyond the latest take, in real ComfyUI workers (two workers, one cache):

* extend: a 4-segment take, then a longer audio track (6 segments) at N = 4 generates only
  segments 4-5; the first P(4) frames are bit-exact to the old take's; the audio is the new track;
* change after the prefix: audio changed only after P(2) -> N = 2 accepted, N = 3 refused before
  any sampling naming segment 2 and the audio field; -1 (longest valid) picks 2;
* a per-segment prompt (Segment Prompt in the body): a line changed for segment 2 -> the dry run and
  the run keep segments 0-1 only;
* take history: three takes with different seeds, resume from the first at N = 1, then from the
  third: frames and boundaries are the chosen take's; a failed request changes no take; check()
  finds a damaged file of any take.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from seedreuse_lab import graphs
from seedreuse_lab.graphs import link
from seedreuse_lab.reuse_graphs import SEG, segment_graph, set_session
from reuse_backend.media import segments, video
from reuse_backend.folder import check as store_check

pytestmark = pytest.mark.comfy
F, M, FPS, SR = 9, 3, 16.0, 16000
CACHE = "takes"


def P(n: int) -> int:
    return segments.prefix_frames(n, F, M)


def graph(seed: int, frames: int, *, n: int = 0, from_take: int = 0, second_freq: float | None = None,
          split: int | None = None, fail: bool = False, prompts: str | None = None) -> dict:
    """segment_graph whose length follows the audio (total_frames = 0): a sine of ``frames``
    frames; with ``split``, the track is sine(split frames) ++ sine(rest, ``second_freq``)."""
    p = segment_graph("ref.png", seed=seed, prefix_segments=n, cache_name=CACHE, F=F, M=M,
                      total_frames=frames, fps=FPS)
    p[SEG.START]["inputs"]["total_frames"] = 0
    if split is not None:
        p[SEG.SINE]["inputs"]["seconds"] = split / FPS
        p["217"] = {"class_type": "SeedReuseTestSineAudio", "inputs": {
            "seconds": (frames - split) / FPS, "sample_rate": SR, "frequency": second_freq or 330.0}}
        p["218"] = {"class_type": "AudioConcat", "inputs": {"audio1": link(SEG.SINE), "audio2": link("217"),
                                                           "direction": "after"}}
        p[SEG.START]["inputs"]["audio"] = link("218")
    if fail:    # fails once the first generated segment is decoded (after sampling began); a branch
        # off the body, not upstream of the loop's End, so the kept segments stay valid
        p["219"] = {"class_type": "SeedReuseTestFail", "inputs": {
            "value": link(SEG.DECODE), "fail": True, "message": "SeedReuseTestFail: failing on purpose"}}
        p["220"] = {"class_type": "PreviewImage", "inputs": {"images": link("219")}}
    if prompts is not None:     # a per-segment prompt inside the body: Segment Prompt -> text encode
        p["230"] = {"class_type": "SeedReuseSegmentPrompt", "inputs": {"loop": link(SEG.START), "prompts": prompts}}
        p["231"] = {"class_type": "SeedReuseTestTextEncode", "inputs": {
            "clip": link(graphs.I2V.TEXT_LOADER), "text": link("230"), "work_ms": 0}}
        p[SEG.WAN_I2V]["inputs"]["positive"] = link("231")
    set_session(p, from_take=from_take)
    return p


def sampled(res) -> int:
    return sum(1 for e in res.events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)


def result(worker, res) -> Path:
    return worker.output_path(res.output_files(SEG.MERGE)[0])


def manifest(root: Path) -> dict:
    return json.loads((root / CACHE / "manifest.json").read_text())


def takes(root: Path) -> list[dict]:
    return manifest(root)["sections"]["takes"]["takes"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot_files(root: Path) -> dict:
    d = root / CACHE
    return {f.name: sha(f) for f in sorted(d.iterdir())}


def sine(frames: int, freq: float = 330.0) -> torch.Tensor:
    n = int(round(frames / FPS * SR))
    t = torch.arange(n, dtype=torch.float64) / SR
    return (0.5 * torch.sin(2 * math.pi * freq * t)).to(torch.float32).reshape(1, n)


def expected_audio_digest(tmp: Path, wave: torch.Tensor) -> str:
    """The audio packets Prefix Merge writes when it encodes ``wave`` (the encoder is deterministic)."""
    chunk = tmp / "chunk.mp4"
    video.write_chunk(chunk, np.zeros((2, 16, 16, 3), np.uint8), FPS)
    out = tmp / "ref.mp4"
    video.merge(out, chunks=[chunk], audio=("encode", wave, SR), fps=FPS)
    return video.audio_packets_digest(str(out))


def refused(worker, prompt, root, before_files, *needles) -> str:
    res = worker.run(prompt)
    assert res.status == "error", res.status
    msg = res.error["exception_message"]
    for n in needles:
        assert n in msg, msg
    assert sampled(res) == 0
    assert snapshot_files(root) == before_files        # no take changed, nothing published
    return msg


@pytest.fixture
def ab(pair_over_empty_root):
    return pair_over_empty_root


def test_extend_a_finished_take_with_a_longer_track(ab, tmp_path):
    a, b, root = ab
    r1 = a.run(graph(1, P(4))).raise_for_status()
    assert sampled(r1) == 4
    v1 = video.decode_frames(str(result(a, r1)))
    assert v1.shape[0] == P(4) == 27
    m1 = manifest(root)
    assert sorted(int(i) for i in m1["boundaries"]) == [0, 1, 2] and "tail_boundary.safetensors" in m1["files"]
    # the dry run of the longer request: take 1's 4 segments are valid for it (static key equal; the
    # audio source changed, so its samples are compared at run time), P(N) per N, longest 4
    ans = b.post_json("/seedreuse/check", {"prompt": graph(2, P(6), n=4)})["segments"][SEG.START]
    assert ans["valid"], ans
    t = ans["takes"][0]
    assert t["take"] == 1 and t["segments"] == 4 and t["longest_valid"] == 4
    assert [s["state"] for s in t["segment_validity"]] == ["run_time"] * 4
    assert t["prefix_frames_by_n"] == [P(n) for n in range(5)]

    r2 = b.run(graph(2, P(6), n=4)).raise_for_status()       # another worker, 6 segments, N = 4
    assert sampled(r2) == 2                                    # only segments 4 and 5
    v2 = video.decode_frames(str(result(b, r2)))
    assert v2.shape[0] == P(6) == 39
    assert np.array_equal(v2[:P(4)], v1)                       # every old segment bit-exact
    sec = manifest(root)["sections"]["segments"]
    assert sec["prefix_mode"] == "stream-copy" and sec["reused_prefix_segments"] == 4
    assert sec["take"] == 2 and sec["source_take"] == 1
    # the audio is the new (longer) track, not the old take's
    assert video.audio_packets_digest(str(result(b, r2))) == expected_audio_digest(tmp_path, sine(P(6)))
    assert video.audio_packets_digest(str(result(b, r2))) != video.audio_packets_digest(str(result(a, r1)))
    assert [t["take"] for t in takes(root)] == [2, 1]


def test_audio_changed_after_the_prefix(ab):
    a, b, root = ab
    old = dict(split=P(2), second_freq=330.0)
    new = dict(split=P(2), second_freq=440.0)            # the same samples up to frame P(2) = 15
    r1 = a.run(graph(1, P(4), **old)).raise_for_status()
    v1 = video.decode_frames(str(result(a, r1)))
    before = snapshot_files(root)
    # N = 3 keeps segment 2, whose frames [12, 21) hear the changed audio: refused before sampling
    msg = refused(b, graph(2, P(4), n=3, **new), root, before, "segment 2", "audio under segment 2",
                  "differ", "reuse_prefix_segments=2")
    assert "take 1" in msg
    # N = 2 is accepted (segments 0 and 1 consumed only frames [0, 15))
    r2 = b.run(graph(2, P(4), n=2, **new)).raise_for_status()
    assert sampled(r2) == 2
    v2 = video.decode_frames(str(result(b, r2)))
    assert np.array_equal(v2[:P(2)], v1[:P(2)]) and not np.array_equal(v2[P(2):], v1[P(2):])
    # -1 from take 1 picks 2, reported before the first sampling
    r3 = a.run(graph(3, P(4), n=-1, from_take=1, **new)).raise_for_status()
    assert sampled(r3) == 2
    ev = r3.events_of("seedreuse.segments")[0]["data"]
    assert ev["kept"] == 2 and ev["requested"] == -1 and ev["source_take"] == 1
    assert "segment 2 differs" in ev["longest_valid"] and "audio" in ev["longest_valid"]
    first_sampling = next(k for k, e in enumerate(r3.events) if e.get("type") == "executing"
                          and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)
    assert r3.events.index(r3.events_of("seedreuse.segments")[0]) < first_sampling
    assert np.array_equal(video.decode_frames(str(result(a, r3)))[:P(2)], v1[:P(2)])
    # unchanged audio: -1 keeps everything but the last segment (every request generates one)
    r4 = b.run(graph(4, P(4), n=-1, from_take=1, **old)).raise_for_status()
    assert sampled(r4) == 1 and r4.events_of("seedreuse.segments")[0]["data"]["kept"] == 3


def test_segment_prompt_changed_for_later_segments(ab):
    a, b, root = ab
    r1 = a.run(graph(1, P(4), prompts="a head\na head\na head\na head")).raise_for_status()
    v1 = video.decode_frames(str(result(a, r1)))
    before = snapshot_files(root)
    changed = "a head\na head\na smiling head"            # line 2 changed; the last line repeats for 3
    ans = b.post_json("/seedreuse/check", {"prompt": graph(2, P(4), n=3, prompts=changed)})["segments"][SEG.START]
    t = ans["takes"][0]
    assert [s["state"] for s in t["segment_validity"]] == ["valid", "valid", "invalid", "invalid"], t
    assert t["segment_validity"][2]["field"] == "segment prompt under segment 2" and t["longest_valid"] == 2
    assert ans["will"] == "fail" and "segment 2" in ans["reason"], ans
    refused(b, graph(2, P(4), n=3, prompts=changed), root, before, "segment prompt under segment 2", "differ")
    r2 = b.run(graph(2, P(4), n=-1, prompts=changed)).raise_for_status()
    assert sampled(r2) == 2 and r2.events_of("seedreuse.segments")[0]["data"]["kept"] == 2
    v2 = video.decode_frames(str(result(b, r2)))
    assert np.array_equal(v2[:P(2)], v1[:P(2)])


def test_take_history(ab):
    a, b, root = ab
    runs = []
    for seed, w in ((1, a), (2, b), (3, a)):                  # three takes, different seeds
        runs.append((w, w.run(graph(seed, P(4))).raise_for_status()))
    frames = [video.decode_frames(str(result(w, r))) for w, r in runs]
    assert not np.array_equal(frames[0][:P(1)], frames[1][:P(1)])
    assert [t["take"] for t in takes(root)] == [3, 2, 1]
    m = manifest(root)
    # kept takes share their files with the versions that made them (hard links, no copies)
    take1 = takes(root)[2]
    assert take1["result"] == "take-000001.result.mp4"
    assert sha(root / CACHE / take1["result"]) == sha(result(*runs[0]))
    assert all(m["files"][f]["sha256"] for f in take1["boundaries"].values())
    take1_bounds = {i: m["files"][f]["sha256"] for i, f in take1["boundaries"].items()}
    take3_bounds = {i: m["files"][f]["sha256"] for i, f in takes(root)[0]["boundaries"].items()}

    # a failed request (it fails while generating segment 1, from take 2) changes no take
    before = snapshot_files(root)
    res = b.run(graph(9, P(4), n=1, from_take=2, fail=True))
    assert res.status == "error" and "failing on purpose" in res.error["exception_message"]
    assert sampled(res) >= 1
    assert snapshot_files(root) == before

    # resume from the first take at N = 1 (another worker, new seed)
    r4 = b.run(graph(4, P(4), n=1, from_take=1)).raise_for_status()
    assert sampled(r4) == 3
    v4 = video.decode_frames(str(result(b, r4)))
    assert np.array_equal(v4[:P(1)], frames[0][:P(1)]) and not np.array_equal(v4[:P(1)], frames[2][:P(1)])
    m4 = manifest(root)
    assert m4["files"]["boundary_00000.safetensors"]["sha256"] == take1_bounds["0"]
    assert [t["take"] for t in takes(root)] == [4, 3, 2]      # K = 3: take 1 made way for take 4
    assert m4["sections"]["segments"]["source_take"] == 1
    # then from the third take at N = 2
    r5 = a.run(graph(5, P(4), n=2, from_take=3)).raise_for_status()
    assert sampled(r5) == 2
    v5 = video.decode_frames(str(result(a, r5)))
    assert np.array_equal(v5[:P(2)], frames[2][:P(2)])
    m5 = manifest(root)
    assert [m5["files"][f"boundary_{i:05d}.safetensors"]["sha256"] for i in (0, 1)] == \
        [take3_bounds["0"], take3_bounds["1"]]
    assert [t["take"] for t in takes(root)] == [5, 4, 3]
    # the kept prefix is the very file of take 3 (a hard link), not a copy
    d = root / CACHE
    assert (d / "boundary_00000.safetensors").stat().st_ino == (d / "take-000003.boundary_00000.safetensors").stat().st_ino
    # a take that is no longer kept is refused before sampling, naming the kept ones
    before = snapshot_files(root)
    refused(b, graph(6, P(4), n=1, from_take=1), root, before, "keeps no take 1", "[5, 4, 3]")
    # the dry run lists every kept take with its segments' validity for this graph
    ans = a.post_json("/seedreuse/check", {"prompt": graph(6, P(4), n=-1, from_take=4)})["segments"][SEG.START]
    assert [t["take"] for t in ans["takes"]] == [5, 4, 3] and ans["from_take"] == 4
    assert all(s["state"] == "valid" for t in ans["takes"] for s in t["segment_validity"])
    assert ans["longest_valid"] == 3 and ans["N"] == 3

    # check() validates the new layout and finds a damaged file in any take
    assert store_check.check(root, CACHE) == []
    for t in takes(root):
        for fname in [t["result"]] + sorted(t["boundaries"].values()):
            path = root / CACHE / fname
            data = path.read_bytes()
            path.write_bytes(data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1:])
            try:
                found = store_check.check(root, CACHE)
                assert any(p.code == "hash_mismatch" and p.path.endswith(fname) for p in found), (fname, found)
            finally:
                path.write_bytes(data)
    assert store_check.check(root, CACHE) == []
