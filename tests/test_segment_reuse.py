"""Segment Reuse in real ComfyUI workers: full run, exact resume, new-seed resume, chained resume,
and every bad request failing before the first segment is sampled.

The new-seed resume (the support matrix's test) runs ComfyUI's own CLIPVisionLoader /
CLIPVisionEncode with the full-size random-weight ViT-H and LoadAudio of a WAV file; the other
tests are about resume arithmetic and refusals, not about an encoder, so they keep the free
stand-in CLIP vision and the sine source (a real ViT-H encode costs seconds on 2 cores)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from seedreuse_lab import encoder_models, graphs
from seedreuse_lab.graphs import I2V
from seedreuse_lab.reuse_graphs import SEG, segment_graph
from reuse_backend.media import segments
from reuse_backend.media import video

pytestmark = pytest.mark.comfy
F, M, S = 9, 3, 4
TOTAL = segments.total_frames(S, F, M)   # 27


def result_path(worker, res) -> Path:
    f = res.output_files(SEG.MERGE)[0]
    return Path(worker.output_dir) / f.get("subfolder", "") / f["filename"]


def sampled(res) -> int:
    """How many KSampler copies (one per generated segment) executed."""
    return sum(1 for e in res.events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)


def section(root: Path, name="segments") -> dict:
    return json.loads((root / name / "manifest.json").read_text())["sections"]["segments"]


def cache_state(root: Path, name="segments") -> tuple:
    d = root / name
    return (json.loads((d / "manifest.json").read_text())["version"],
            hashlib.sha256((d / "result.mp4").read_bytes()).hexdigest())


@pytest.fixture
def two_workers(pair_over_empty_root):
    return pair_over_empty_root


def test_full_run_then_exact_resume_on_another_worker(two_workers):
    a, b, root = two_workers
    full = a.run(segment_graph("ref.png", seed=1)).raise_for_status()
    assert sampled(full) == S
    v1 = result_path(a, full)
    info = video.probe(str(v1))
    assert info.frames == TOTAL and info.has_audio
    assert list(info.keyframes[:S]) == [segments.prefix_frames(i, F, M) for i in range(S)]
    m = json.loads((root / "segments" / "manifest.json").read_text())
    assert sorted(int(i) for i in m["boundaries"]) == [0, 1, 2]
    # resume at N=2 with the same seed on worker B: segments 0 and 1 are not sampled
    res = b.run(segment_graph("ref.png", seed=1, prefix_segments=2)).raise_for_status()
    assert sampled(res) == S - 2
    assert section(root)["prefix_mode"] == "stream-copy"
    v2 = result_path(b, res)
    assert np.array_equal(video.decode_frames(str(v1)), video.decode_frames(str(v2)))
    assert video.audio_packets_digest(str(v1)) == video.audio_packets_digest(str(v2))


def test_new_seed_resume_keeps_prefix_and_chains(comfy_workers, tiny_models, tmp_path):
    models = encoder_models.models_dir_with_encoders(tiny_models, encoder_models.ensure_encoder_models(),
                                                     tmp_path / "models")
    a, b = comfy_workers(2, models_dir=models)
    root = comfy_workers.cache_root
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
        graphs.write_test_wav(Path(w.input_dir) / "speech.wav", seconds=TOTAL / 16.0, sample_rate=16000)

    def seg(seed, n=0):
        return segment_graph("ref.png", seed=seed, prefix_segments=n, encoders="stock", audio_file="speech.wav")

    stock = (I2V.CLIP_VISION_LOADER, I2V.CLIP_VISION_ENCODE, SEG.SINE)   # SEG.SINE is LoadAudio here
    r1 = a.run(seg(1), timeout=900).raise_for_status()
    assert [r1.executed.count(n) for n in stock] == [1, 1, 1]
    v1 = video.decode_frames(str(result_path(a, r1)))
    r2 = b.run(seg(2, 2), timeout=900).raise_for_status()
    # the real ViT-H loader and encoder do not run on B: the clip_vision slot is reused
    assert [r2.executed.count(n) for n in stock[:2]] == [0, 0] and sampled(r2) == S - 2
    p2 = segments.prefix_frames(2, F, M)
    v2 = video.decode_frames(str(result_path(b, r2)))
    assert v2.shape[0] == TOTAL
    assert np.array_equal(v2[:p2], v1[:p2])
    assert not np.array_equal(v2[p2:], v1[p2:])
    assert video.audio_packets_digest(str(result_path(a, r1))) == video.audio_packets_digest(str(result_path(b, r2)))
    # chained: resume at N=3 from the seed-2 result (on worker A)
    r3 = a.run(seg(3, 3), timeout=900).raise_for_status()
    assert sampled(r3) == 1 and [r3.executed.count(n) for n in stock[:2]] == [0, 0]
    v3 = video.decode_frames(str(result_path(a, r3)))
    p3 = segments.prefix_frames(3, F, M)
    assert np.array_equal(v3[:p2], v1[:p2]) and np.array_equal(v3[:p3], v2[:p3])
    assert section(root)["prefix_mode"] == "stream-copy"


def _fails_before_sampling(worker, prompt, root, before, match):
    res = worker.run(prompt)
    assert res.status == "error", res.status
    msg = res.error["exception_message"]
    assert match in msg, msg
    assert sampled(res) == 0
    assert cache_state(root) == before
    return msg


def test_bad_resume_requests_fail_fast_and_leave_cache_untouched(two_workers):
    a, b, root = two_workers
    # no committed cache yet
    res = a.run(segment_graph("ref.png", seed=1, prefix_segments=1))
    assert res.status == "error" and "needs a previous successful run" in res.error["exception_message"]
    assert sampled(res) == 0 and not (root / "segments").exists()
    a.run(segment_graph("ref.png", seed=1)).raise_for_status()
    before = cache_state(root)
    # N >= S
    _fails_before_sampling(b, segment_graph("ref.png", seed=2, prefix_segments=S), root, before,
                           "smaller than the segment count")
    # key mismatch: the prompt text and the step count changed
    msg = _fails_before_sampling(b, segment_graph("ref.png", seed=2, prefix_segments=2, prompt_text="other",
                                                  steps=3), root, before, "differ")
    assert "text" in msg and "steps" in msg
    # audio expected but the previous run had none: a different key (audio input) -> refused
    _fails_before_sampling(b, segment_graph("ref.png", seed=2, prefix_segments=1, audio=False), root, before,
                           "differ")
    # N > 0 with reuse off is refused at validation (nothing runs)
    with pytest.raises(Exception, match="reuse_prefix_segments"):
        b.run(segment_graph("ref.png", seed=2, prefix_segments=1, reuse="off"))
    # a damaged previous result or boundary is refused before sampling
    res_file = root / "segments" / "result.mp4"
    data = res_file.read_bytes()
    res_file.write_bytes(data[: len(data) // 2])
    res = b.run(segment_graph("ref.png", seed=2, prefix_segments=2))
    assert res.status == "error" and sampled(res) == 0
    res_file.write_bytes(data)
    (root / "segments" / "boundary_00001.safetensors").unlink()
    res = b.run(segment_graph("ref.png", seed=2, prefix_segments=2))
    assert res.status == "error" and sampled(res) == 0
    assert json.loads((root / "segments" / "manifest.json").read_text())["version"] == before[0]
