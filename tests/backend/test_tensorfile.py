"""reuse_backend.tensorfile: round trips, strict validation, interop with safetensors."""
import json
import os

import numpy as np
import pytest
import safetensors.torch
import torch

from reuse_backend.storage import tensorfile
from reuse_backend.errors import CorruptCacheError, UnsupportedValueError


def _raw(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and _raw(a) == _raw(b)


def _write(path, tensors, metadata=None) -> int:
    with open(path, "wb") as f:
        return tensorfile.write(f, tensors, metadata)


def _read(path, **kw):
    # Open the way the store does: through a directory fd, refusing symlinks.
    dfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = os.open(os.path.basename(path), os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        return tensorfile.read(f, **kw)


def _all_dtypes() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    out = {}
    for name, dt in tensorfile.DTYPES.items():
        if dt == torch.bool:
            t = torch.rand(3, 5, generator=g) > 0.5
        elif dt.is_floating_point:
            t = (torch.randn(3, 5, generator=g) * 100).to(dt)
        else:
            info = torch.iinfo(dt)
            t = torch.randint(info.min, info.max, (3, 5), generator=g, dtype=torch.int64).to(dt)
        out[name] = t
    return out


def _with_special_floats() -> dict[str, torch.Tensor]:
    """Float tensors holding NaN payloads (both signs), +-inf, -0.0 and subnormals, as raw bits."""
    bits = {torch.float16: (np.uint16, [0x7E01, 0xFC00, 0x8000, 0x0001, 0xFE55, 0x7C01]),
            torch.bfloat16: (np.uint16, [0x7FC1, 0xFF80, 0x8000, 0x0001, 0xFFAB, 0x7F81]),
            torch.float32: (np.uint32, [0x7FC00123, 0xFF800000, 0x80000000, 1, 0x7F800001]),
            torch.float64: (np.uint64, [0x7FF8000000000ABC, 0x8000000000000000, 1,
                                        0xFFF0000000000001])}
    return {f"special_{dt}": torch.from_numpy(np.array(v, dtype=u).view(u.__name__[1:])).view(dt)
            for dt, (u, v) in bits.items()}


def test_round_trip_every_dtype_bit_exact(tmp_path):
    ts = {**_all_dtypes(), **_with_special_floats()}
    p = tmp_path / "a.safetensors"
    n = _write(p, ts, {"k": "v", "empty": ""})
    assert n == p.stat().st_size
    out, meta = _read(str(p))
    assert meta == {"k": "v", "empty": ""}
    assert list(out) == list(ts)  # header order preserved
    for k in ts:
        assert _same(ts[k], out[k]), k
    bf = out["special_torch.bfloat16"]
    assert torch.equal(bf.view(torch.int16), ts["special_torch.bfloat16"].view(torch.int16))


def test_zero_size_scalar_and_non_contiguous(tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    ts = {"empty": torch.zeros(0, 7, dtype=torch.bfloat16), "empty2": torch.zeros(3, 0),
          "scalar": torch.tensor(1.5, dtype=torch.float64), "transposed": base.t(),
          "strided": base[:, ::2], "expanded": torch.tensor([1, 2], dtype=torch.int8).expand(3, 2),
          "grad": torch.ones(2, requires_grad=True)}
    _write(tmp_path / "a", ts)
    out, meta = _read(str(tmp_path / "a"))
    assert meta == {}
    for k, t in ts.items():
        assert torch.equal(out[k], t.detach()) and out[k].shape == t.shape, k
        assert out[k].is_contiguous() and not out[k].requires_grad


def test_empty_file_and_alignment(tmp_path):
    _write(tmp_path / "e", {})
    assert _read(str(tmp_path / "e")) == ({}, {})
    raw = (tmp_path / "e").read_bytes()
    assert raw[:8] == (len(raw) - 8).to_bytes(8, "little") and len(raw) % 8 == 0
    # Mixed item sizes: every tensor starts aligned to its item size.
    ts = {"a": torch.ones(3, dtype=torch.uint8), "b": torch.ones(3, dtype=torch.float64),
          "c": torch.ones(1, dtype=torch.int16), "d": torch.ones(2, dtype=torch.float32)}
    _write(tmp_path / "m", ts)
    raw = (tmp_path / "m").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert (8 + n) % 8 == 0
    for k, e in json.loads(raw[8:8 + n]).items():
        assert e["data_offsets"][0] % ts[k].element_size() == 0


def test_large_tensor_written_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(tensorfile, "CHUNK", 1000)
    t = torch.randn(10_007)
    _write(tmp_path / "big", {"t": t})
    assert torch.equal(_read(str(tmp_path / "big"))[0]["t"], t)


def test_write_rejects_unsupported(tmp_path):
    for bad in ({"c": torch.zeros(2, dtype=torch.complex64)}, {"u": torch.zeros(2, dtype=torch.uint16)},
                {"m": torch.empty(2, device="meta")}, {"s": torch.zeros(2, 2).to_sparse()},
                {"__metadata__": torch.zeros(1)}, {"x": [1, 2]}):
        with open(tmp_path / "x", "wb") as f, pytest.raises(UnsupportedValueError):
            tensorfile.write(f, bad)
    with open(tmp_path / "x", "wb") as f, pytest.raises(UnsupportedValueError, match="metadata"):
        tensorfile.write(f, {}, {"k": 1})


# ------------------------------------------------------------------- interop both ways

def test_official_library_reads_our_files(tmp_path):
    ts = {**_all_dtypes(), **_with_special_floats(), "empty": torch.zeros(0, 2),
          "scalar": torch.tensor(3, dtype=torch.int32), "nc": torch.randn(3, 4).t()}
    _write(tmp_path / "ours.safetensors", ts, {"seedreuse.format": "x"})
    loaded = safetensors.torch.load_file(str(tmp_path / "ours.safetensors"))
    assert set(loaded) == set(ts)
    for k in ts:
        assert _same(ts[k], loaded[k]), k
    with safetensors.safe_open(str(tmp_path / "ours.safetensors"), "pt") as f:
        assert f.metadata() == {"seedreuse.format": "x"}


def test_we_read_official_files(tmp_path):
    ts = {**_all_dtypes(), **_with_special_floats(), "empty": torch.zeros(0, 2),
          "scalar": torch.tensor(3, dtype=torch.int32)}
    safetensors.torch.save_file(ts, str(tmp_path / "theirs.safetensors"), metadata={"a": "b"})
    out, meta = _read(str(tmp_path / "theirs.safetensors"))
    assert meta == {"a": "b"}
    for k in ts:
        assert _same(ts[k], out[k]), k
    (tmp_path / "b").write_bytes(safetensors.torch.save({"x": torch.ones(2, 2)}))
    assert torch.equal(_read(str(tmp_path / "b"))[0]["x"], torch.ones(2, 2))


# ------------------------------------------------------------------------ corrupt files

def _build(header: dict, data: bytes, pad: bool = True) -> bytes:
    raw = json.dumps(header).encode()
    if pad:
        raw += b" " * (-(8 + len(raw)) % 8)
    return len(raw).to_bytes(8, "little") + raw + data


def _good(tmp_path) -> bytes:
    _write(tmp_path / "g", {"a": torch.arange(4, dtype=torch.float32),
                            "b": torch.arange(3, dtype=torch.int16)}, {"m": "1"})
    return (tmp_path / "g").read_bytes()


def _expect_corrupt(tmp_path, data: bytes, match: str, **kw) -> CorruptCacheError:
    p = tmp_path / "bad"
    p.write_bytes(data)
    with pytest.raises(CorruptCacheError, match=match) as ei:
        _read(str(p), **kw)
    return ei.value


def test_truncated_file(tmp_path):
    good = _good(tmp_path)
    e = _expect_corrupt(tmp_path, good[:-1], "truncated")
    assert "22 bytes" in str(e.expected) and "21 bytes" in str(e.actual)
    _expect_corrupt(tmp_path, good[:5], "truncated: no header length")
    _expect_corrupt(tmp_path, b"", "truncated")


def test_trailing_bytes(tmp_path):
    _expect_corrupt(tmp_path, _good(tmp_path) + b"\0", "trailing bytes")


def test_header_length_beyond_file(tmp_path):
    good = _good(tmp_path)
    _expect_corrupt(tmp_path, (len(good)).to_bytes(8, "little") + good[8:],
                    "header length beyond the end of the file")
    _expect_corrupt(tmp_path, (200 << 20).to_bytes(8, "little") + good[8:], "over the cap")


def test_bad_json(tmp_path):
    for header in (b"{not json", b'{"a": NaN}', b"\xff\xfe{}", b'{"a": 1, "a": 2}',
                   b"[" * 100_000):
        _expect_corrupt(tmp_path, len(header).to_bytes(8, "little") + header, "not valid JSON")
    _expect_corrupt(tmp_path, _build([1, 2], b""), "not a JSON object")  # type: ignore[arg-type]


def test_bad_entries(tmp_path):
    e = _expect_corrupt(tmp_path, _build({"x": {"dtype": "F17", "shape": [1],
                                                "data_offsets": [0, 4]}}, b"\0" * 4),
                        "tensor 'x': dtype not allowed")
    assert "F17" in str(e.actual) and "F32" in str(e.expected)
    _expect_corrupt(tmp_path, _build({"x": {"dtype": "F32", "shape": [1],
                                            "data_offsets": [0, 4], "extra": 1}}, b"\0" * 4),
                    "tensor 'x': entry must have exactly the keys")
    for shape in ([-1], [1.0], "4", [True]):
        _expect_corrupt(tmp_path, _build({"x": {"dtype": "F32", "shape": shape,
                                                "data_offsets": [0, 4]}}, b"\0" * 4),
                        "tensor 'x': shape must be")
    _expect_corrupt(tmp_path, _build({"x": {"dtype": "F32", "shape": [1],
                                            "data_offsets": [4, 0]}}, b"\0" * 4),
                    "data_offsets must be")
    _expect_corrupt(tmp_path, _build({"__metadata__": {"a": 1}}, b""), "__metadata__")
    # dtype allowed by the format but not by the caller
    _expect_corrupt(tmp_path, _good(tmp_path), "dtype not allowed", allowed_dtypes={"F32"})


def test_shape_itemsize_mismatch(tmp_path):
    e = _expect_corrupt(tmp_path, _build({"x": {"dtype": "F32", "shape": [3],
                                                "data_offsets": [0, 8]}}, b"\0" * 8),
                        "tensor 'x': size of shape x dtype does not match")
    assert "12 bytes" in str(e.expected) and "8 bytes" in str(e.actual)


def test_overlapping_and_gaps(tmp_path):
    h = {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
         "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}
    _expect_corrupt(tmp_path, _build(h, b"\0" * 6), "tensor 'b' overlaps")
    h["b"]["data_offsets"] = [0, 4]
    _expect_corrupt(tmp_path, _build(h, b"\0" * 4), "overlaps")  # aliasing the same bytes
    h["b"]["data_offsets"] = [5, 9]
    _expect_corrupt(tmp_path, _build(h, b"\0" * 9), "gap in the data area before tensor 'b'")
    h["b"]["data_offsets"] = [4, 8]
    assert len(_read_bytes(tmp_path, _build(h, b"\1" * 8))[0]) == 2


def _read_bytes(tmp_path, data: bytes):
    (tmp_path / "ok").write_bytes(data)
    return _read(str(tmp_path / "ok"))


def test_bool_bytes_validated(tmp_path):
    h = {"b": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}
    _expect_corrupt(tmp_path, _build(h, b"\x01\x07"), "BOOL data holds bytes other than 0/1")
    assert _read_bytes(tmp_path, _build(h, b"\x01\x00"))[0]["b"].tolist() == [True, False]


def test_max_bytes(tmp_path):
    good = _good(tmp_path)
    e = _expect_corrupt(tmp_path, good, "file over max_bytes", max_bytes=10)
    assert "22 bytes" in str(e.actual)
    assert _read_bytes(tmp_path, good)[0]["a"].tolist() == [0, 1, 2, 3]
    (tmp_path / "ok").write_bytes(good)
    assert len(_read(str(tmp_path / "ok"), max_bytes=22)[0]) == 2


def test_error_carries_fix_and_dict(tmp_path):
    e = _expect_corrupt(tmp_path, _good(tmp_path)[:-3], "truncated")
    d = e.to_dict()
    assert d["code"] == "corrupt_cache" and d["fix"]
