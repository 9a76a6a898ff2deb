"""reuse_backend.serialize: typed pickle-free value files (ComfyUI values built with plain torch)."""
import io
import json
import math
import struct

import numpy as np
import pytest
import torch

from reuse_backend.storage import serialize

from reuse_backend.storage import tensorfile
from reuse_backend.errors import CorruptCacheError, UnsupportedValueError


class FakeClipVisionOutput:
    """Stands in for comfy.clip_vision.Output (an attribute bag with item access)."""

    def __getitem__(self, key):
        return getattr(self, key)

    def __setitem__(self, key, item):
        setattr(self, key, item)


class TagDict(dict):
    pass


CLIP_ATTRS = ["last_hidden_state", "image_embeds", "penultimate_hidden_states",
              "mm_projected", "all_hidden_states", "image_sizes"]
serialize.attribute_adapter(FakeClipVisionOutput, "test.clip_vision.Output", CLIP_ATTRS)
serialize.dict_adapter(TagDict, "test.TagDict")


def _clip_output(bits: int = 0) -> FakeClipVisionOutput:
    o = FakeClipVisionOutput()
    o["last_hidden_state"] = torch.randn(1, 257, 1280)
    o["image_embeds"] = torch.randn(1, 1024)
    o["penultimate_hidden_states"] = torch.randn(1, 257, 1280).to(torch.bfloat16)
    if bits:
        o["mm_projected"] = None
    return o


def _roundtrip(tmp_path, value, **kw):
    p = tmp_path / "v.safetensors"
    with open(p, "wb") as f:
        n = serialize.dump_value(f, value)
    assert n == p.stat().st_size
    with open(p, "rb") as f:
        return serialize.load_value(f, **kw)


def _raw(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def assert_identical(a, b, path="value"):
    """Deep equality with exact types, bit-exact tensors/arrays/floats."""
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and _raw(a) == _raw(b), path
        assert b.device.type == "cpu"
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), path
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), path
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            assert_identical(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, FakeClipVisionOutput):
        assert vars(a).keys() == vars(b).keys(), path
        for k in vars(a):
            assert_identical(vars(a)[k], vars(b)[k], f"{path}.{k}")
    else:
        assert a == b, path


# ------------------------------------------------------------------------- round trips

def test_scalars(tmp_path):
    nan_payload = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000123))[0]
    value = [None, True, False, 0, -1, 2**63 - 1, -2**63, 2**63, -(10**200), 3**1000,
             0.0, -0.0, 1.5, 1e300, 5e-324, float("inf"), float("-inf"), float("nan"),
             nan_payload, 1.0, "", "héllo \u2603 \ud800", "\0"]
    out = _roundtrip(tmp_path, value)
    assert_identical(value, out)
    assert type(out[3]) is int and type(out[19]) is float and type(out[1]) is bool


def test_containers_types_preserved(tmp_path):
    value = {"t": (1, (2, [3, {}]), ()), "l": [], 7: "int key", 2.5: "float key",
             None: "none key", True: "bool key", ("a", 1, (None, 2.0)): "tuple key",
             "nested": {"x": [{"y": (torch.zeros(1),)}]}, "dt": torch.bfloat16,
             "dev": torch.device("cuda", 1), "cpu": torch.device("cpu")}
    out = _roundtrip(tmp_path, value)
    assert_identical(value, out)
    assert list(out) == list(value)


def test_torch_size_round_trips_as_torch_size(tmp_path):
    """ComfyUI 0.33's CLIP vision output carries ``image_sizes``: a list of ``torch.Size``."""
    value = {"image_sizes": [torch.Size([3, 224, 224]), torch.Size([])],
             "in_tuple": (torch.Size([2**40, 0]),), "shape": torch.zeros(2, 5).shape}
    out = _roundtrip(tmp_path, value)
    assert_identical(value, out)
    assert type(out["image_sizes"][0]) is torch.Size and out["image_sizes"][0] == (3, 224, 224)
    assert type(out["shape"]) is torch.Size


@pytest.mark.parametrize("dtype", list(tensorfile.DTYPES.values()), ids=str)
def test_tensor_every_dtype(tmp_path, dtype):
    t = (torch.randn(2, 3, 4) * 50).to(dtype)
    value = {"t": t, "nc": t.transpose(0, 2), "empty": torch.zeros(0, 3, dtype=dtype),
             "scalar": t[0, 0, 0].clone()}
    assert_identical(value, _roundtrip(tmp_path, value))


def test_bf16_nan_payloads_bit_exact(tmp_path):
    bits = torch.tensor([0x7FC1, -0x3F, -0x8000, 0x0001, 0x7F80, 0x7FFF], dtype=torch.int16)
    out = _roundtrip(tmp_path, [bits.view(torch.bfloat16), bits.view(torch.float16)])
    assert torch.equal(out[0].view(torch.int16), bits)
    assert torch.equal(out[1].view(torch.int16), bits)


def test_numpy(tmp_path):
    value = {"f32": np.arange(12, dtype=np.float32).reshape(3, 4).T,
             "bool": np.array([True, False]), "u8": np.zeros((0, 3), np.uint8),
             "f16": np.array([1.5, np.nan], np.float16), "i64": np.array(7),
             "ro": np.frombuffer(b"\x01\x02\x03\x04", dtype=np.int16),
             "scalars": [np.float64(2.5), np.int32(-3), np.bool_(True), np.float32("nan")]}
    out = _roundtrip(tmp_path, value)
    assert_identical(value, out)
    assert type(out["scalars"][0]) is np.float64 and type(out["f32"]) is np.ndarray


def test_shared_tensor_stored_once(tmp_path):
    t = torch.randn(4, 4)
    a = np.ones(3)
    structure, tensors = serialize.encode([t, {"again": t}, a, a])
    assert len(tensors) == 2
    out = _roundtrip(tmp_path, [t, {"again": t}, a, a])
    assert out[0] is out[1]["again"] and out[2] is out[3]
    assert torch.equal(out[0], t)


def test_depth_limit_ok_and_too_deep(tmp_path):
    v: list = []
    for _ in range(serialize.MAX_DEPTH):
        v = [v]
    assert_identical(v, _roundtrip(tmp_path, v))
    with pytest.raises(UnsupportedValueError, match="nested deeper than 64"):
        serialize.encode([v])


# ------------------------------------------------------------------ ComfyUI value shapes

def test_conditioning(tmp_path):
    cond = [
        [torch.randn(1, 77, 4096).to(torch.bfloat16),
         {"pooled_output": torch.randn(1, 768), "guidance": 3.5,
          "concat_latent_image": torch.randn(1, 16, 2, 8, 8), "concat_mask": torch.ones(1, 1, 2, 8, 8),
          "reference_latents": [torch.randn(1, 16, 1, 8, 8), torch.randn(1, 16, 1, 8, 8)],
          "clip_vision_output": _clip_output(), "strength": 1.0, "set_area_to_bounds": False}],
        [torch.randn(1, 12, 4096), {"pooled_output": None, "clip_vision_output": _clip_output(1)}],
    ]
    assert_identical(cond, _roundtrip(tmp_path, cond))


def test_latent_image_audio_encoder_outputs(tmp_path):
    latent = {"samples": torch.randn(2, 16, 3, 8, 8), "noise_mask": torch.rand(2, 1, 3, 8, 8),
              "batch_index": [0, 1]}
    image = torch.rand(2, 32, 48, 3)
    audio = {"waveform": torch.randn(1, 2, 16000), "sample_rate": 16000}
    audio_enc = {"encoded_audio": torch.randn(1, 50, 768),
                 "encoded_audio_all_layers": [torch.randn(1, 50, 768) for _ in range(3)],
                 "audio_samples": 16000, "tag": TagDict(a=torch.ones(2), b=3)}
    for v in (latent, image, audio, audio_enc, _clip_output()):
        out = _roundtrip(tmp_path, v)
        assert_identical(v, out)
    assert type(out) is FakeClipVisionOutput and not hasattr(out, "mm_projected")
    assert type(_roundtrip(tmp_path, audio_enc)["tag"]) is TagDict


def test_gpu_tensor_moved_to_cpu(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    t = torch.randn(3, 5, device="cuda").to(torch.bfloat16)
    out = _roundtrip(tmp_path, {"t": t, "nc": t.t()})
    assert out["t"].device.type == "cpu" and torch.equal(out["nc"], t.t().cpu())


# ----------------------------------------------------------------------- unsupported

class Opaque:
    pass


@pytest.mark.parametrize("value, path, tname", [
    ([[0, {"clip_vision_output": Opaque()}]], "value[0][1]['clip_vision_output']", "Opaque"),
    ({"a": {1, 2}}, "value['a']", "set"),
    ({"a": [b"bytes"]}, "value['a'][0]", "bytes"),
    ({"a": 1j}, "value['a']", "complex"),
    ({"x": torch.zeros(2, dtype=torch.complex64)}, "value['x']", "Tensor"),
    ({"x": torch.nn.Parameter(torch.zeros(2))}, "value['x']", "Parameter"),
    ({"x": np.array(["s"])}, "value['x']", "ndarray"),
    ({"x": np.zeros(2, np.uint16)}, "value['x']", "ndarray"),
    ({"o": __import__("collections").OrderedDict()}, "value['o']", "OrderedDict"),
    ({frozenset(): 1}, "value (a dict key)", "frozenset"),
    ([lambda: 0], "value[0]", "function"),
])
def test_unsupported_names_type_and_path(value, path, tname):
    with pytest.raises(UnsupportedValueError) as ei:
        serialize.encode(value)
    assert ei.value.details["path"] == path and tname in str(ei.value) and path in str(ei.value)


def test_adapter_strict_extra_attribute_and_cycles():
    o = _clip_output()
    o.surprise = 1
    with pytest.raises(UnsupportedValueError, match="surprise") as ei:
        serialize.encode({"cv": o})
    assert ei.value.details["path"] == "value['cv']"
    o2 = _clip_output()
    o2.image_embeds = Opaque()
    with pytest.raises(UnsupportedValueError) as ei:
        serialize.encode([o2])
    assert ei.value.details["path"] == "value[0].image_embeds"
    cyc: list = [1]
    cyc.append({"k": cyc})
    with pytest.raises(UnsupportedValueError, match="cyclic") as ei:
        serialize.encode(cyc)
    assert ei.value.details["path"] == "value[1]['k']"


def test_nothing_written_for_unsupported(tmp_path):
    f = io.BytesIO()
    with pytest.raises(UnsupportedValueError):
        serialize.dump_value(f, [torch.zeros(1), Opaque()])
    assert f.getvalue() == b""


# ---------------------------------------------------------------------- corrupt files

def _file_with(tmp_path, structure, tensors, meta=None):
    p = tmp_path / "bad.safetensors"
    if meta is None:
        meta = {serialize.META_FORMAT: serialize.FORMAT,
                serialize.META_STRUCTURE: json.dumps(structure)}
    with open(p, "wb") as f:
        tensorfile.write(f, tensors, meta)
    return p


def _expect_corrupt(p, match, **kw):
    with open(p, "rb") as f, pytest.raises(CorruptCacheError, match=match) as ei:
        serialize.load_value(f, **kw)
    return ei.value


@pytest.mark.parametrize("structure, tensors, match", [
    ({"t": "tensor", "k": "t9"}, {"t0": torch.zeros(1)}, "missing from the file"),
    ({"t": "tensor", "k": "t0"}, {"t0": torch.zeros(1), "t1": torch.zeros(1)}, "not referenced"),
    ({"t": "pickle", "v": "cos\nsystem"}, {}, "unknown or missing node tag"),
    ({"t": "list", "v": [{"t": "int", "v": 1, "x": 2}]}, {}, r"at value\[0\]: 'int' node has unexpected keys"),
    ({"t": "obj", "cls": "os.system", "fields": {"t": "dict", "items": []}}, {}, "unknown adapter"),
    ({"t": "int", "v": "12"}, {}, "invalid value for a 'int' node"),
    ({"t": "float", "v": 1}, {}, "invalid float node"),
    ({"t": "float", "v": "nan", "bits": "0000000000000000"}, {}, "invalid float node"),
    ({"t": "bool", "v": 1}, {}, "invalid value"),
    ({"t": "dict", "items": [[{"t": "list", "v": []}, {"t": "none"}]]}, {}, "not a valid dict key"),
    ({"t": "dict", "items": [[{"t": "int", "v": 1}, {"t": "none"}]] * 2}, {}, "duplicate dict key"),
    ({"t": "dtype", "v": "os"}, {}, "invalid value for a 'dtype' node"),
    ({"t": "size", "v": [3, -1]}, {}, "invalid value for a 'size' node"),
    ({"t": "size", "v": [3, 1.5]}, {}, "invalid value for a 'size' node"),
    ({"t": "size", "v": [True]}, {}, "invalid value for a 'size' node"),
    ({"t": "size", "v": "3,4"}, {}, "invalid value for a 'size' node"),
    ({"t": "ndarray", "k": "t0", "dtype": "<f8"}, {"t0": torch.zeros(1)}, "numpy dtype does not match"),
    ({"t": "obj", "cls": "test.clip_vision.Output",
      "fields": {"t": "dict", "items": [[{"t": "str", "v": "__class__"}, {"t": "none"}]]}},
     {}, "could not rebuild"),
    (["not", "a", "node"], {}, "unknown or missing node tag"),
])
def test_corrupt_structures(tmp_path, structure, tensors, match):
    e = _expect_corrupt(_file_with(tmp_path, structure, tensors), match)
    assert e.to_dict()["code"] == "corrupt_cache"


def test_corrupt_metadata_and_json(tmp_path):
    _expect_corrupt(_file_with(tmp_path, None, {}, {"seedreuse.format": "value/9",
                                                    "seedreuse.structure": "{}"}), "metadata")
    _expect_corrupt(_file_with(tmp_path, None, {}, {}), "metadata")
    _expect_corrupt(_file_with(tmp_path, None, {}, {
        serialize.META_FORMAT: serialize.FORMAT, serialize.META_STRUCTURE: "{\"t\":"}),
        "structure is not valid JSON")
    deep = "[" * 100_000 + "]" * 100_000
    _expect_corrupt(_file_with(tmp_path, None, {}, {
        serialize.META_FORMAT: serialize.FORMAT, serialize.META_STRUCTURE: deep}), "structure is not valid JSON")
    deep_nodes = {"t": "none"}
    for _ in range(serialize.MAX_DEPTH + 1):
        deep_nodes = {"t": "list", "v": [deep_nodes]}
    _expect_corrupt(_file_with(tmp_path, deep_nodes, {}), "nested deeper")


def test_truncated_and_oversized_value_files(tmp_path):
    p = tmp_path / "v"
    with open(p, "wb") as f:
        serialize.dump_value(f, {"samples": torch.randn(2, 4, 8, 8)})
    data = p.read_bytes()
    _expect_corrupt(p, "file over max_bytes", max_bytes=100)
    p.write_bytes(data[:-7])
    _expect_corrupt(p, "truncated")
    p.write_bytes(data + b"junk")
    _expect_corrupt(p, "trailing bytes")


def test_decode_directly_and_float_encoding():
    structure, tensors = serialize.encode([1.5, -0.0, math.inf, float("nan")])
    assert [n["v"] for n in structure["v"]] == [1.5, -0.0, "inf", "nan"]
    json.dumps(structure, allow_nan=False)  # structure is strict JSON
    assert_identical(serialize.decode(structure, tensors), [1.5, -0.0, math.inf, float("nan")])


def test_validate_only_accepts_unregistered_adapter_objects(tmp_path):
    """check() runs outside ComfyUI: an adapter object of a host class validates without
    being rebuilt; normal loading still refuses the unknown class."""
    import io as _io

    from reuse_backend.storage import serialize as ser
    from reuse_backend.errors import CorruptCacheError

    class HostOutput:
        pass

    ser.register_adapter(HostOutput, "host.Output", lambda o: {"x": o.x}, lambda f: HostOutput())
    obj = HostOutput()
    obj.x = torch.arange(4)
    buf = _io.BytesIO()
    ser.dump_value(buf, [obj])
    ser._BY_NAME.pop("host.Output")
    ser._BY_CLS.pop(HostOutput)
    buf.seek(0)
    with pytest.raises(CorruptCacheError, match="unknown adapter"):
        ser.load_value(buf)
    buf.seek(0)
    out = ser.load_value(buf, validate_only=True)
    assert out[0].name == "host.Output" and torch.equal(out[0].fields["x"], torch.arange(4))
