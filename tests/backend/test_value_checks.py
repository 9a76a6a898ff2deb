"""Cached values that load but are wrong, and slot files that do not load (plain pytest).

value_checks: structure by node type + finite numbers; skeleton: the header-only check the dry
run uses (same verdicts and messages as a load for header damage); decide_slot: auto rebuilds,
require fails with what is broken and the fix.
"""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from reuse_backend.errors import CorruptCacheError, NoCommittedCacheError
from reuse_backend.keys import value_checks as vc
from reuse_backend.keys.key import ReuseKey
from reuse_backend.keys.slots import decide_slot
from reuse_backend.storage import adapters, serialize, skeleton
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo


class FakeClipVisionOutput:       # stands in for comfy.clip_vision.Output (an attribute bag)
    pass


adapters.attribute_adapter(FakeClipVisionOutput, "test.value_checks.ClipVisionOutput",
                           ["last_hidden_state", "image_embeds", "penultimate_hidden_states", "mm_projected"])


class FakeNestedTensor:           # stands in for comfy.nested_tensor.NestedTensor (LTX-2 / MiniMax H3 AV latents)
    def __init__(self, tensors):
        self.tensors = list(tensors)
        self.is_nested = True


adapters.register_adapter(FakeNestedTensor, "test.value_checks.NestedTensor", lambda o: {"tensors": list(o.tensors)},
                          lambda f: FakeNestedTensor(f["tensors"]))


def av_latent(video=None, audio=None):
    """LTXVConcatAVLatent's output: video [B, 128, T, H, W] and audio [B, 8, T, 16] in one nested tensor."""
    return {"samples": FakeNestedTensor([torch.randn(1, 128, 2, 1, 1) if video is None else video,
                                         torch.randn(1, 8, 9, 16) if audio is None else audio]),
            "noise_mask": FakeNestedTensor([torch.ones(1, 1, 2, 1, 1), torch.ones(1, 1, 9, 1)])}


def clip_vision(b=1):
    out = FakeClipVisionOutput()
    out.last_hidden_state = torch.randn(b, 257, 32)
    out.image_embeds = torch.randn(b, 16)
    out.penultimate_hidden_states = torch.randn(b, 257, 32)
    out.mm_projected = None
    return out


def wan_text():
    return [[torch.randn(1, 512, 64), {"pooled_output": None}]]


def wan_i2v_positive():
    return [[torch.randn(1, 512, 64), {"pooled_output": None, "concat_latent_image": torch.randn(1, 16, 3, 8, 8),
                                       "concat_mask": torch.ones(1, 4, 3, 8, 8), "clip_vision_output": clip_vision()}]]


GOOD = [
    ("CONDITIONING", wan_text()),
    ("CONDITIONING", wan_i2v_positive()),
    ("CONDITIONING", [[torch.randn(1, 20, 48), {"pooled_output": None, "reference_latents": [torch.randn(1, 16, 1, 8, 8)]}]]),
    ("CONDITIONING", [[torch.randn(1, 77, 32), {"pooled_output": torch.randn(1, 32)}]]),
    ("LATENT", {"samples": torch.randn(1, 16, 3, 8, 8)}),
    ("LATENT", {"samples": torch.randn(1, 4, 8, 8), "batch_index": [0]}),
    ("LATENT", {"samples": torch.randn(1, 64, 100)}),                 # an audio latent
    ("LATENT", av_latent()),                                          # an audio-video latent (nested tensor)
    ("IMAGE", torch.rand(1, 64, 64, 3)),
    ("IMAGE", torch.rand(2, 8, 8, 4, dtype=torch.float16)),
    ("CLIP_VISION_OUTPUT", clip_vision()),
    ("AUDIO_ENCODER_OUTPUT", {"encoded_audio": torch.randn(1, 50, 32),
                              "encoded_audio_all_layers": tuple(torch.randn(1, 50, 32) for _ in range(3)),
                              "audio_samples": 16000}),
    ("AUDIO", {"waveform": torch.randn(1, 2, 1600), "sample_rate": 16000}),
    ("*", {"anything": [1, "x", torch.zeros(2, dtype=torch.int64)]}),
]


@pytest.mark.parametrize("io_type,value", GOOD, ids=[f"{t}-{i}" for i, (t, _) in enumerate(GOOD)])
def test_values_the_encoders_produce_pass(io_type, value):
    assert vc.check_value(io_type, value) is None
    f = io.BytesIO()
    serialize.dump_value(f, value)
    f.seek(0)
    assert vc.check_value(io_type, serialize.load_value(f)) is None
    f.seek(0)
    assert vc.check_value(io_type, skeleton.load_skeleton(f), finite=False) is None


def _nan(v):
    v[0][0][0, 0, 0] = float("nan")
    return v


BAD = [
    ("nan", "CONDITIONING", _nan(wan_text()), "value[0][0]", "1 NaN"),
    ("inf", "CONDITIONING", [[torch.full((1, 4, 8), float("inf")), {}]], "value[0][0]", "32 Inf"),
    ("nan-nested", "CONDITIONING", [[torch.randn(1, 4, 8), {"concat_latent_image": torch.full((1, 4, 8, 8), float("nan"))}]],
     "value[0][1]['concat_latent_image']", "NaN"),
    ("i64", "CONDITIONING", [[torch.zeros(1, 512, 64, dtype=torch.int64), {"pooled_output": None}]], "value[0][0]", "int64"),
    ("2d", "CONDITIONING", [[torch.randn(512, 64), {"pooled_output": None}]], "value[0][0]", "[512, 64]"),
    ("not-a-list", "CONDITIONING", torch.randn(1, 4, 8), "value", "tensor"),
    ("no-dict", "CONDITIONING", [[torch.randn(1, 4, 8), None]], "value[0][1]", "NoneType"),
    ("latent-no-samples", "LATENT", {"x": torch.randn(1, 4, 8, 8)}, "value", "keys ['x']"),
    ("latent-int", "LATENT", {"samples": torch.zeros(1, 4, 8, 8, dtype=torch.uint8)}, "value['samples']", "uint8"),
    ("av-latent-nan", "LATENT", av_latent(audio=torch.full((1, 8, 9, 16), float("nan"))),
     "value['samples'].tensors[1]", "NaN"),
    ("av-latent-int", "LATENT", av_latent(video=torch.zeros(1, 128, 2, 1, 1, dtype=torch.int32)),
     "value['samples'].tensors[0]", "int32"),
    ("av-latent-empty", "LATENT", {"samples": FakeNestedTensor([])}, "value['samples']", "fields ['tensors']"),
    ("image-5ch", "IMAGE", torch.rand(1, 8, 8, 5), "value", "[1, 8, 8, 5]"),
    ("image-3d", "IMAGE", torch.rand(8, 8, 3), "value", "[8, 8, 3]"),
    ("clip-vision-dict", "CLIP_VISION_OUTPUT", {"last_hidden_state": torch.randn(1, 4, 8)}, "value", "dict"),
    ("audio-sr", "AUDIO", {"waveform": torch.randn(1, 1, 10)}, "value['sample_rate']", "None"),
    ("audio-2d", "AUDIO", {"waveform": torch.randn(1, 10), "sample_rate": 8000}, "value['waveform']", "[1, 10]"),
    ("features-2d", "AUDIO_ENCODER_OUTPUT", {"encoded_audio": torch.randn(50, 32)}, "value['encoded_audio']", "[50, 32]"),
]


@pytest.mark.parametrize("io_type,value,path,actual", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_wrong_values_are_named(io_type, value, path, actual):
    p = vc.check_value(io_type, value)
    assert p is not None and p.path == path and actual in p.actual, p


def test_masks_may_hold_minus_inf_but_not_nan():
    mask = torch.zeros(1, 4, 4)
    mask[..., 2:] = float("-inf")
    ok = [[torch.randn(1, 4, 8), {"attention_mask": mask}]]
    assert vc.check_value("CONDITIONING", ok) is None
    mask[0, 0, 0] = float("nan")
    assert "NaN" in vc.check_value("CONDITIONING", ok).actual


def test_boundary_checks_frame_count_size_and_channels():
    good = {"motion_frames": torch.rand(3, 64, 48, 3)}
    assert vc.check_boundary(good, M=3, height=64, width=48) is None
    assert vc.check_boundary({"motion_frames": torch.rand(0, 64, 48, 3)}, M=0, height=64, width=48) is None
    p = vc.check_boundary({"motion_frames": torch.rand(3, 256, 256, 3)}, M=3, height=64, width=48)
    assert p.path == "boundary['motion_frames']" and "[3, 64, 48, 3]" in p.expected and "[3, 256, 256, 3]" in p.actual
    assert vc.check_boundary({"motion_frames": torch.rand(2, 64, 48, 3)}, M=3, height=64, width=48) is not None
    assert vc.check_boundary({"motion_frames": torch.rand(3, 64, 48, 4)}, M=3, height=64, width=48) is not None
    assert vc.check_boundary({"motion_frames": torch.zeros(3, 64, 48, 3, dtype=torch.int64)}, M=3,
                             height=64, width=48) is not None
    assert vc.check_boundary({"x": 1}, M=3, height=64, width=48).path == "boundary"
    nan = torch.rand(3, 64, 48, 3)
    nan[1, 2, 3, 0] = float("nan")
    assert "NaN" in vc.check_boundary({"motion_frames": nan}, M=3, height=64, width=48).actual
    assert vc.check_boundary({"motion_frames": torch.rand(3, 64, 48, 3),
                              "motion_latent": {"samples": torch.zeros(1, 16, 1, 8, 6, dtype=torch.int32)}},
                             M=3, height=64, width=48).path == "boundary['motion_latent']['samples']"


# ------------------------------------------------------------------ skeleton vs load

def _file(value) -> bytes:
    f = io.BytesIO()
    serialize.dump_value(f, value)
    return f.getvalue()


def _damaged(kind: str, data: bytes) -> bytes:
    if kind == "header_length_2_63":
        return (2 ** 63).to_bytes(8, "little") + data[8:]
    if kind == "truncated_in_header":        # same size: the tail (from inside the header) zeroed
        return data[:40] + bytes(len(data) - 40)
    if kind == "truncated_in_data":          # the header claims more data than the file has
        n = int.from_bytes(data[:8], "little")
        return data[:8 + n + 16]
    if kind == "garbage":
        return bytes(range(256)) * (len(data) // 256) + bytes(len(data) % 256)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["header_length_2_63", "truncated_in_header", "truncated_in_data", "garbage"])
def test_skeleton_refuses_what_a_load_refuses_with_the_same_message(kind):
    data = _damaged(kind, _file(wan_i2v_positive()))
    with pytest.raises(CorruptCacheError) as load_err:
        serialize.load_value(io.BytesIO(data))
    with pytest.raises(CorruptCacheError) as skel_err:
        skeleton.load_skeleton(io.BytesIO(data))
    assert skel_err.value.message == load_err.value.message


def test_skeleton_keeps_dtypes_shapes_and_structure_without_data():
    value = {"a": [torch.randn(2, 3), (torch.zeros(4, dtype=torch.int64), "s")], "n": np.arange(6).reshape(2, 3),
             "x": np.float32(1.5), "cv": clip_vision()}
    sk = skeleton.load_skeleton(io.BytesIO(_file(value)))
    assert sk["a"][0].device.type == "meta" and sk["a"][0].shape == (2, 3) and sk["a"][0].dtype == torch.float32
    assert sk["a"][1][0].dtype == torch.int64 and sk["a"][1][1] == "s" and type(sk["a"][1]) is tuple
    assert sk["n"].shape == (2, 3) and sk["n"].dtype == value["n"].dtype and sk["x"].dtype == np.float32
    assert type(sk["cv"]) is FakeClipVisionOutput and sk["cv"].image_embeds.shape == (1, 16)


# ------------------------------------------------------------------ committed slots, decisions

def _committed(tmp_path, value, slot="positive", name="c"):
    cache = FolderCache(tmp_path, name)
    key = ReuseKey.build("slot", {"a": 1})
    tx = cache.begin(RunInfo(run_id="r1"))
    tx.stage_slot(slot, value, key=key.to_dict(), meta={"encode_seconds": 2.0})
    tx.commit()
    return cache, key, tmp_path / name / f"slot_{slot}.safetensors"


def _rewrite_same_size(path, data: bytes):
    assert len(data) == path.stat().st_size
    path.chmod(0o644)
    path.write_bytes(data)


def _inspect(load):
    return lambda s: vc.inspect_slot(s, cache_name="c", slot="positive", io_type="CONDITIONING", load=load)


@pytest.mark.parametrize("kind", ["header_length_2_63", "truncated_in_header", "garbage"])
def test_unreadable_slot_auto_encodes_require_fails(tmp_path, kind):
    cache, key, path = _committed(tmp_path, wan_text())
    _rewrite_same_size(path, _damaged(kind, path.read_bytes()))
    first_lines = []
    with cache.snapshot() as snap:           # the version itself still opens (sizes match)
        for load in (True, False):           # execution (full load) and the dry run (header only)
            d = decide_slot(snap, cache_name="c", slot="positive", key=key, mode="auto", inspect=_inspect(load))
            assert d.action == "encode" and d.reason.startswith("cache slot unreadable: slot_positive.safetensors: ")
            with pytest.raises(CorruptCacheError) as ei:
                decide_slot(snap, cache_name="c", slot="positive", key=key, mode="require", inspect=_inspect(load))
            msg = str(ei.value)
            assert msg.startswith("cache 'c' is unreadable: slot 'positive' (slot_positive.safetensors) cannot be loaded")
            assert "python -m reuse_backend clear c --yes" in msg and "reuse 'auto'" in msg
            assert "no successful run" not in msg
            first_lines.append((d.reason, msg.split("\n")[0]))
    assert first_lines[0] == first_lines[1]      # the dry run and execution say the same thing


@pytest.mark.parametrize("bad", ["nan", "i64", "2d"])
def test_unusable_slot_auto_encodes_require_fails(tmp_path, bad):
    value = wan_text()
    if bad == "nan":
        value[0][0][0, 3, 5] = float("nan")
    elif bad == "i64":
        value[0][0] = value[0][0].to(torch.int64)
    else:
        value[0][0] = value[0][0][0]
    cache, key, _ = _committed(tmp_path, value)
    with cache.snapshot() as snap:
        d = decide_slot(snap, cache_name="c", slot="positive", key=key, mode="auto", inspect=_inspect(True))
        assert d.action == "encode" and d.reason.startswith("cache slot unusable: value[0][0] is ")
        with pytest.raises(CorruptCacheError) as ei:
            decide_slot(snap, cache_name="c", slot="positive", key=key, mode="require", inspect=_inspect(True))
        msg = str(ei.value)
        assert msg.startswith("cache 'c' holds an unusable value in slot 'positive' (slot_positive.safetensors)")
        assert "expected: CONDITIONING: float tensor [B, L, D]" in msg or "finite" in msg
        assert {"nan": "1 NaN", "i64": "int64 tensor [1, 512, 64]", "2d": "float32 tensor [512, 64]"}[bad] in msg
        assert "python -m reuse_backend clear c --yes" in msg
        # the dry run's cheap check sees dtype and shape (not NaN: that needs the data)
        d = decide_slot(snap, cache_name="c", slot="positive", key=key, mode="auto", inspect=_inspect(False))
        assert d.action == ("reuse" if bad == "nan" else "encode")


def test_good_slot_is_loaded_once_by_the_decision(tmp_path):
    cache, key, _ = _committed(tmp_path, wan_text())
    with cache.snapshot() as snap:
        d = decide_slot(snap, cache_name="c", slot="positive", key=key, mode="require", inspect=_inspect(True))
        assert d.action == "reuse" and d.value[0][0].shape == (1, 512, 64) and d.load_seconds >= 0
        assert decide_slot(snap, cache_name="c", slot="positive", key=key, mode="require",
                           inspect=_inspect(False)).value is None


def test_unreadable_version_auto_encodes_require_says_unreadable(tmp_path):
    cache, key, path = _committed(tmp_path, wan_text())
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:-100])          # truncated: the version no longer opens
    with pytest.raises(CorruptCacheError) as ei:
        cache.snapshot()
    err = ei.value
    d = decide_slot(None, cache_name="c", slot="positive", key=key, mode="auto", snapshot_error=err)
    assert d.action == "encode" and d.reason.startswith("cache unreadable: slot_positive.safetensors has the wrong size")
    with pytest.raises(CorruptCacheError) as ei:
        decide_slot(None, cache_name="c", slot="positive", key=key, mode="require", snapshot_error=err)
    msg = str(ei.value)
    assert msg.startswith("cache 'c' is unreadable: slot_positive.safetensors has the wrong size")
    assert "python -m reuse_backend clear c --yes" in msg and "no successful run" not in msg
    # an empty cache keeps its own message
    with pytest.raises(NoCommittedCacheError, match="no successful run in cache 'c' yet"):
        decide_slot(None, cache_name="c", slot="positive", key=key, mode="require")
    # and a writer replaces the broken version (the store treats a corrupt base as replaceable)
    tx = cache.begin(RunInfo(run_id="r2"))
    assert tx.base is None and tx.base_error is not None
    tx.stage_slot("positive", wan_text(), key=key.to_dict())
    tx.commit()
    with cache.snapshot() as snap:
        assert decide_slot(snap, cache_name="c", slot="positive", key=key, mode="require",
                           inspect=_inspect(True)).action == "reuse"


def test_validate_file_reads_no_tensor_data(tmp_path, monkeypatch):
    cache, _, path = _committed(tmp_path, [[torch.randn(1, 4096, 256), {"pooled_output": None}]])
    header_len = 8 + int.from_bytes(path.read_bytes()[:8], "little")
    reads = []
    real = skeleton.tensorfile._readinto_exact
    monkeypatch.setattr(skeleton.tensorfile, "_readinto_exact",
                        lambda f, mv, what: (reads.append(len(mv)), real(f, mv, what))[1])
    with cache.snapshot() as snap:
        sk = snap.validate_file("slot_positive.safetensors")
    assert sk[0][0].shape == (1, 4096, 256) and sum(reads) == header_len
    assert json.loads((tmp_path / "c" / "manifest.json").read_text())["files"]["slot_positive.safetensors"]["bytes"] \
        > 4 << 20
