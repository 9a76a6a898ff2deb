"""The real CLIP vision (ViT-H/14) and audio encoder (wav2vec2 base) across two ComfyUI workers.

The stock nodes CLIPVisionLoader / CLIPVisionEncode and LoadAudio / AudioEncoderLoader /
AudioEncoderEncode run with full-size random-weight files (seedreuse_lab/encoder_models.py,
loaded by the stock loaders exactly as a downloaded clip_vision_h / wav2vec2-chinese-base file).
Worker A runs the Wan 2.1 I2V graph with both encoders behind Encode-or-Reuse nodes; worker B
(another process, same cache root) runs it with a new seed and reuse=require. The stock nodes are
counted from the websocket ``executing`` events (they have no stand-in counter). Checked:

* on B the real loaders, encoders and the audio file loader execute 0 times, sampling runs once
  and B's frames differ from A's (new seed);
* what B's Encode-or-Reuse nodes hand on is bit-exact what A's real encoders returned: the same
  classes (``comfy.clip_vision.Output``; a dict whose all-layers entry is a tuple), dtypes,
  shapes and a sha256 of every tensor's bytes (SeedReuseTestInspect), and for the audio features
  the tensors in the committed cache file are exactly A's as well.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from seedreuse_lab import encoder_models, graphs
from seedreuse_lab.graphs import AUDIO, I2V, link
from seedreuse_lab.reuse_graphs import i2v_reuse
from reuse_backend.folder.cache import FolderCache

pytestmark = pytest.mark.comfy

CV_SLOT_NODE, AUDIO_SLOT_NODE = "105", "106"
STOCK = {I2V.CLIP_VISION_LOADER: "CLIPVisionLoader", I2V.CLIP_VISION_ENCODE: "CLIPVisionEncode",
         AUDIO.SINE: "LoadAudio", AUDIO.LOADER: "AudioEncoderLoader", AUDIO.ENCODE: "AudioEncoderEncode"}


@pytest.fixture(scope="module")
def real_models_dir(tiny_models, tmp_path_factory) -> Path:
    return encoder_models.models_dir_with_encoders(tiny_models, encoder_models.ensure_encoder_models(),
                                                   tmp_path_factory.mktemp("real-encoder-models"))


def graph(seed: int, reuse: str, *, inspect_raw: bool) -> dict:
    """i2v_reuse with the stock ViT-H + LoadAudio -> stock wav2vec2 -> Encode-or-Reuse (slot
    audio_features). Inspect nodes read what the reuse nodes hand on (90, 91), the decoded frames
    (92) and, on A only (inspect_raw), the raw encoder outputs (93, 94): on B those would make
    the encoders run."""
    p = i2v_reuse("ref.png", seed, encoders="stock", reuse=reuse)
    graphs.add_audio_encoder(p, encoders="stock", audio_file="speech.wav")
    p[AUDIO_SLOT_NODE] = {"class_type": "SeedReuseEncodeAudioFeatures",
                          "inputs": {"session": link("100"), "slot": "audio_features", "value": link(AUDIO.ENCODE)}}
    graphs.add_inspect(p, CV_SLOT_NODE, node_id="90", label="clip_vision (reuse node)")
    graphs.add_inspect(p, AUDIO_SLOT_NODE, node_id="91", label="audio_features (reuse node)")
    graphs.add_inspect(p, I2V.DECODE, node_id="92", label="frames")
    if inspect_raw:
        graphs.add_inspect(p, I2V.CLIP_VISION_ENCODE, node_id="93", label="clip_vision (encoder)")
        graphs.add_inspect(p, AUDIO.ENCODE, node_id="94", label="audio_features (encoder)")
    for nid, ct in STOCK.items():
        assert p[nid]["class_type"] == ct, (nid, p[nid]["class_type"])
    return p


def tensor_sha(t: torch.Tensor) -> str:
    """The sha256 SeedReuseTestInspect reports for a tensor."""
    t = t.detach().to("cpu")
    data = repr(tuple(t.shape)).encode() + t.to(torch.float32).contiguous().numpy().tobytes()
    return hashlib.sha256(data + str(t.dtype).encode()).hexdigest()


def test_real_encoders_skipped_on_another_worker_and_restored_bit_exact(comfy_workers, real_models_dir):
    a, b = comfy_workers(2, models_dir=real_models_dir)
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=11)
        graphs.write_test_wav(Path(w.input_dir) / "speech.wav", seconds=1.0, sample_rate=24000, frequency=180.0)
    ra = a.run(graph(1, "off", inspect_raw=True), timeout=900).raise_for_status()
    assert all(ra.executed.count(nid) == 1 for nid in STOCK), ra.executed
    raw_cv, raw_audio = ra.inspected("93"), ra.inspected("94")
    # the real ViT-H output: the class ComfyUI's CLIPVisionEncode returns, ViT-H shapes, fp32
    assert raw_cv["type"] == "comfy.clip_vision.Output"
    cv = raw_cv["items"]
    assert cv["last_hidden_state"]["shape"] == cv["penultimate_hidden_states"]["shape"] == [1, 257, 1280]
    assert cv["image_embeds"]["shape"] == [1, 1024] and cv["mm_projected"] == {"type": "NoneType", "value": None}
    assert {cv[k]["dtype"] for k in ("last_hidden_state", "image_embeds")} == {"float32"}
    # the real wav2vec2 base output of 1 s at 24 kHz (resampled to 16 kHz inside the encoder)
    au = raw_audio["items"]
    assert au["audio_samples"] == {"type": "int", "value": 16000}
    assert au["encoded_audio"]["shape"] == [1, 49, 768]
    assert au["encoded_audio_all_layers"]["type"] == "tuple" and len(au["encoded_audio_all_layers"]["items"]) == 13
    # on A the reuse nodes hand on the encoders' own values
    assert ra.inspected("90") == raw_cv and ra.inspected("91") == raw_audio

    rb = b.run(graph(2, "require", inspect_raw=False), timeout=900).raise_for_status()
    ran = {nid: rb.executed.count(nid) for nid in STOCK}
    assert ran == dict.fromkeys(STOCK, 0), ran
    assert rb.executed.count(I2V.SAMPLER) == 1 and I2V.DECODE in rb.executed
    actions = {e["data"]["slot"]: e["data"]["action"] for e in rb.events_of("seedreuse.slot")}
    assert actions["clip_vision"] == actions["audio_features"] == "reused", actions
    # bit-exact: the same structure, classes, dtypes, shapes and tensor bytes as A's encoders gave
    assert rb.inspected("90") == raw_cv
    assert rb.inspected("91") == raw_audio
    # the new seed changed the video
    assert rb.inspected("92")["sha256"] != ra.inspected("92")["sha256"]
    # and the committed slot file holds A's audio features exactly (read by the backend alone)
    with FolderCache(comfy_workers.cache_root, "default").snapshot() as snap:
        cached = snap.load_slot("audio_features")
    assert type(cached["encoded_audio_all_layers"]) is tuple
    assert [tensor_sha(t) for t in cached["encoded_audio_all_layers"]] == \
        [x["sha256"] for x in au["encoded_audio_all_layers"]["items"]]
    assert tensor_sha(cached["encoded_audio"]) == au["encoded_audio"]["sha256"]
    assert cached["audio_samples"] == 16000
