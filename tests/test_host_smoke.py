"""Smoke test of the real-ComfyUI test host: one worker, tiny Wan 2.1 T2V/I2V graphs over HTTP."""
from __future__ import annotations

import av
import pytest

from seedreuse_lab import graphs
from seedreuse_lab.graphs import AUDIO, I2V, T2V
from seedreuse_lab.worker import PromptRejected

pytestmark = pytest.mark.comfy

FRAMES = 9


def _decode(path):
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        frames = [f for f in c.decode(s)]
        return len(frames), frames[0].width, frames[0].height, float(s.average_rate)


def _video_of(worker, res, node_id):
    files = res.output_files(node_id)
    assert len(files) == 1, res.outputs
    path = worker.output_path(files[0])
    assert path.is_file(), path
    return path


def test_t2v_runs_then_hits_comfy_memory_cache(comfy_worker):
    info = comfy_worker.object_info()
    for n in ("SeedReuseTestTextEncode", "SeedReuseTestClipVisionEncode", "SeedReuseTestAudioEncode",
              "UNETLoader", "WanImageToVideo", "SaveVideo"):
        assert n in info, n
    comfy_worker.reset_counts()

    prompt = graphs.wan_t2v_graph(seed=11, prompt_text="a red ball rolling")
    res = comfy_worker.run(prompt).raise_for_status()
    assert set(res.executed) == set(prompt), res.executed
    counts = comfy_worker.counts()
    assert counts["text_loader"] == 1 and counts["text_encode"] == 1, counts
    n, w, h, fps = _decode(_video_of(comfy_worker, res, T2V.SAVE))
    assert (n, w, h) == (FRAMES, 64, 64) and fps == 16.0

    again = comfy_worker.run(graphs.wan_t2v_graph(seed=11, prompt_text="a red ball rolling")).raise_for_status()
    assert again.executed == [], again.executed
    assert set(again.cached) == set(prompt)
    assert comfy_worker.counts() == counts

    # a new seed re-samples, but the text encoder output is still served from ComfyUI's memory
    third = comfy_worker.run(graphs.wan_t2v_graph(seed=12, prompt_text="a red ball rolling")).raise_for_status()
    assert T2V.SAMPLER in third.executed and T2V.POS not in third.executed
    assert comfy_worker.counts() == counts

    # POST /free empties that memory: everything runs again
    comfy_worker.free()
    cold = comfy_worker.run(graphs.wan_t2v_graph(seed=11, prompt_text="a red ball rolling")).raise_for_status()
    assert set(cold.executed) == set(prompt)
    assert comfy_worker.counts()["text_encode"] == 2


def test_i2v_runs(comfy_worker, test_image):
    comfy_worker.reset_counts()
    prompt = graphs.wan_i2v_graph(test_image("smoke_start.png", seed=5), seed=3, prompt_text="a cat")
    cv = graphs.add_inspect(prompt, I2V.CLIP_VISION_ENCODE, label="clip_vision_output")
    pos = graphs.add_inspect(prompt, I2V.POS, label="positive")
    res = comfy_worker.run(prompt).raise_for_status()
    counts = comfy_worker.counts()
    assert counts["clip_vision_loader"] == 1 and counts["clip_vision_encode"] == 1, counts
    n, w, h, _ = _decode(_video_of(comfy_worker, res, I2V.SAVE))
    assert (n, w, h) == (FRAMES, 64, 64)

    d = res.inspected(cv)
    assert d["type"] == "comfy.clip_vision.Output"
    assert d["items"]["penultimate_hidden_states"]["shape"] == [1, 257, 1280]
    assert d["items"]["last_hidden_state"]["shape"] == [1, 257, 1280]
    assert d["items"]["image_embeds"]["shape"] == [1, 1024]
    c = res.inspected(pos)
    assert c["type"] == "list" and c["items"][0]["items"][0]["shape"] == [1, 512, 4096]
    assert c["items"][0]["items"][0]["dtype"] == "float32"


def test_audio_stand_in_shapes(comfy_worker):
    prompt = graphs.add_audio_encoder({}, seconds=1.0, sample_rate=24000)
    nid = graphs.add_inspect(prompt, AUDIO.ENCODE, label="audio")
    res = comfy_worker.run(prompt).raise_for_status()
    d = res.inspected(nid)["items"]
    # 1 s at 24 kHz -> 16000 samples at 16 kHz -> 49 wav2vec2 frames; 24 layers + output
    assert d["audio_samples"]["value"] == 16000
    assert d["encoded_audio"]["shape"] == [1, 49, 1024]
    assert d["encoded_audio_all_layers"]["type"] == "tuple"
    assert len(d["encoded_audio_all_layers"]["items"]) == 25
    assert d["encoded_audio_all_layers"]["items"][-1]["sha256"] == d["encoded_audio"]["sha256"]


def test_failures_are_reported(comfy_worker):
    # validation failure -> PromptRejected with node_errors
    bad = graphs.wan_t2v_graph(seed=1, unet="missing.safetensors")
    with pytest.raises(PromptRejected) as e:
        comfy_worker.queue(bad)
    assert T2V.UNET in e.value.node_errors

    # execution failure after sampling
    p = graphs.wan_t2v_graph(seed=21)
    graphs.insert_between(p, T2V.DECODE, 0, T2V.VIDEO, "images", "SeedReuseTestFail",
                          {"fail": True, "message": "boom after sampling"}, input_name="value")
    res = comfy_worker.run(p)
    assert res.status == "error" and "boom after sampling" in res.error["exception_message"]
    assert T2V.SAMPLER in res.executed

    # interrupt while a slow node runs
    p = graphs.wan_t2v_graph(seed=22)
    slow = graphs.insert_between(p, T2V.DECODE, 0, T2V.VIDEO, "images", "SeedReuseTestSlow",
                                 {"seconds": 30.0}, input_name="value")
    h = comfy_worker.start_run(p)
    h.wait_executing(slow, timeout=60)
    comfy_worker.interrupt()
    res = h.wait(timeout=60)
    assert res.status == "interrupted" and res.seconds < 20


def test_two_workers_are_deterministic_and_survive_kill(comfy_workers):
    w0, w1 = comfy_workers(2)
    assert w0.env["SEEDREUSE_CACHE_ROOT"] == w1.env["SEEDREUSE_CACHE_ROOT"] == str(comfy_workers.cache_root)
    seen = []
    for w in (w0, w1):
        p = graphs.wan_t2v_graph(seed=7, prompt_text="same text")
        pos = graphs.add_inspect(p, T2V.POS)
        frames = graphs.add_inspect(p, T2V.DECODE)
        res = w.run(p).raise_for_status()
        seen.append((res.inspected(pos)["items"][0]["items"][0]["sha256"], res.inspected(frames)["sha256"]))
        assert _decode(_video_of(w, res, T2V.SAVE))[0] == FRAMES
    # stand-in encoders, sampling and decode agree bit for bit across processes. (Not the mp4:
    # SaveVideo's H.264 output is occasionally not reproducible for identical frames.)
    assert seen[0] == seen[1]

    port = w0.port
    w0.kill()
    assert not w0.alive()
    w0.start()
    assert w0.port == port and w0.counts()["text_encode"] == 0  # a fresh process, same address
    res = w0.run(graphs.wan_t2v_graph(seed=7, prompt_text="same text")).raise_for_status()
    assert T2V.POS in res.executed  # nothing survives a restart in ComfyUI's own cache
