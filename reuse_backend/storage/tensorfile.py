"""Reader/writer of the safetensors file format, without pickle and without mmap.

Layout (https://github.com/huggingface/safetensors#format)::

    u64 little-endian N | N bytes of UTF-8 JSON header | data area

The header maps tensor name -> {"dtype", "shape", "data_offsets": [begin, end]} (offsets
relative to the data area) plus an optional "__metadata__" str -> str map. We pad the header
with spaces so the data area starts 8-byte aligned and lay tensors out by decreasing item
size, so every tensor is naturally aligned (as the official writer does). Files are
interoperable with the official ``safetensors`` library in both directions.

``read`` trusts nothing: every header field is validated and any problem raises
``CorruptCacheError`` naming the tensor/field, what was expected and what was found.
"""
from __future__ import annotations

import io
import json
import math
import os
import stat
import sys
from typing import BinaryIO, Collection, Mapping

import torch

from . import strict_json
from ..errors import CorruptCacheError, UnsupportedValueError

if sys.byteorder != "little":  # raw tensor bytes are written/read in host order
    raise ImportError("reuse_backend.tensorfile requires a little-endian host")

_TORCH_NAMES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
    "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}
#: safetensors dtype name -> torch dtype (fp8 entries only when this torch has them).
DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, attr) for name, attr in _TORCH_NAMES.items()
    if isinstance(getattr(torch, attr, None), torch.dtype)}
ALLOWED_DTYPES: frozenset[str] = frozenset(DTYPES)
_NAME_OF: dict[torch.dtype, str] = {dt: name for name, dt in DTYPES.items()}

HEADER_CAP = 100 << 20      # largest header we parse (the official reader uses the same cap)
MAX_NDIM = 64
CHUNK = 16 << 20            # write granularity: bounds extra memory for device->CPU copies
_ENTRY_KEYS = {"dtype", "shape", "data_offsets"}


def dtype_name(dtype: torch.dtype) -> str | None:
    """The safetensors name of a torch dtype, or None when this format can't store it."""
    return _NAME_OF.get(dtype)


def _corrupt(message: str, *, expected=None, actual=None) -> CorruptCacheError:
    return CorruptCacheError(message, expected=expected, actual=actual,
                             fix="delete or clear this cache entry; it will be recomputed")


def _unsupported(message: str, *, expected=None, actual=None) -> UnsupportedValueError:
    return UnsupportedValueError(message, expected=expected, actual=actual,
                                 fix="pass CPU/GPU strided tensors of a supported dtype")


# ----------------------------------------------------------------------------- write

def write(f: BinaryIO, tensors: Mapping[str, torch.Tensor],
          metadata: Mapping[str, str] | None = None) -> int:
    """Write ``tensors`` (and optional str->str ``metadata``) to the binary file ``f``.

    Tensors on any device are copied to CPU chunk by chunk; non-contiguous ones are made
    contiguous first. Returns the number of bytes written. Does not flush or fsync.
    """
    header: dict[str, object] = {}
    if metadata is not None:
        for k, v in metadata.items():
            if type(k) is not str or type(v) is not str:
                raise _unsupported("safetensors metadata must map str to str",
                                   expected="str -> str",
                                   actual=f"{type(k).__name__} -> {type(v).__name__} ({k!r})")
        header["__metadata__"] = dict(metadata)

    prepared = []  # (name, flat uint8 view, itemsize)
    for name, t in tensors.items():
        if type(name) is not str or not name or name == "__metadata__":
            raise _unsupported("invalid tensor name", expected="non-empty str, not '__metadata__'",
                               actual=repr(name))
        if not isinstance(t, torch.Tensor):
            raise _unsupported(f"tensor {name!r} is not a torch.Tensor",
                               expected="torch.Tensor", actual=type(t).__name__)
        if t.layout != torch.strided or t.device.type == "meta":
            raise _unsupported(f"tensor {name!r} has no plain storage",
                               expected="strided layout on a real device",
                               actual=f"layout={t.layout}, device={t.device}")
        dname = _NAME_OF.get(t.dtype)
        if dname is None:
            raise _unsupported(f"tensor {name!r} has an unsupported dtype",
                               expected=sorted(ALLOWED_DTYPES), actual=str(t.dtype))
        # contiguous() copies only when needed; reshape/view are views of that memory.
        flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
        prepared.append((name, flat, t.element_size()))
        header[name] = {"dtype": dname, "shape": list(t.shape), "data_offsets": None}

    # Largest item size first: with an 8-aligned data area every tensor is aligned.
    offset = 0
    for name, flat, _ in sorted(prepared, key=lambda p: -p[2]):
        n = flat.numel()
        header[name]["data_offsets"] = [offset, offset + n]  # type: ignore[index]
        offset += n
    order = sorted(prepared, key=lambda p: header[p[0]]["data_offsets"][0])  # type: ignore

    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    raw += b" " * (-(8 + len(raw)) % 8)
    total = _write_all(f, memoryview(len(raw).to_bytes(8, "little") + raw))
    for _, flat, _ in order:
        if flat.device.type == "cpu":
            mv = memoryview(flat.numpy())
            for i in range(0, len(mv), CHUNK):
                total += _write_all(f, mv[i:i + CHUNK])
        else:
            for i in range(0, flat.numel(), CHUNK):
                total += _write_all(f, memoryview(flat[i:i + CHUNK].cpu().numpy()))
    return total


def _write_all(f: BinaryIO, mv: memoryview) -> int:
    """Write all of ``mv`` (raw file objects may write partially)."""
    n = len(mv)
    while len(mv):
        w = f.write(mv)
        if w is None:
            raise BlockingIOError("non-blocking file object would block")
        mv = mv[w:]
    return n


# ------------------------------------------------------------------------------ read

def read(f: BinaryIO, *, max_bytes: int = 64 << 30,
         allowed_dtypes: Collection[str] = ALLOWED_DTYPES
         ) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Read a whole safetensors file from the seekable binary file ``f`` (from offset 0).

    Returns ``(tensors, metadata)``; tensors are CPU tensors in header order. Any
    deviation from the format, a dtype outside ``allowed_dtypes`` or a data area larger
    than ``max_bytes`` raises ``CorruptCacheError``.
    """
    size = _file_size(f)
    f.seek(0)
    if size < 8:
        raise _corrupt("file truncated: no header length", expected=">= 8 bytes",
                       actual=f"{size} bytes")
    head = bytearray(8)
    _readinto_exact(f, memoryview(head), "header length")
    n = int.from_bytes(head, "little")
    if n > HEADER_CAP:
        raise _corrupt("header length over the cap", expected=f"<= {HEADER_CAP} bytes",
                       actual=f"{n} bytes")
    if 8 + n > size:
        raise _corrupt("header length beyond the end of the file",
                       expected=f"<= {size - 8} bytes (file size {size})", actual=f"{n} bytes")
    data_size = size - 8 - n
    if data_size > max_bytes:
        raise _corrupt("file over max_bytes", expected=f"data area <= {max_bytes} bytes",
                       actual=f"{data_size} bytes")
    raw = bytearray(n)
    _readinto_exact(f, memoryview(raw), "header")
    header = _parse_json(bytes(raw))

    metadata = header.pop("__metadata__", {})
    if type(metadata) is not dict or not all(
            type(k) is str and type(v) is str for k, v in metadata.items()):
        raise _corrupt("header field '__metadata__' must map str to str",
                       expected="object of strings", actual=strict_json.brief(metadata))

    entries = []  # (begin, end, name, dtype, shape)
    for name, e in header.items():
        entries.append(_check_entry(name, e, allowed_dtypes))

    # Invariant: sorted by offset, the tensors tile [0, data_size) with no gap or overlap.
    entries.sort(key=lambda x: (x[0], x[1]))
    pos = 0
    for begin, end, name, _, _ in entries:
        if begin < pos:
            raise _corrupt(f"tensor {name!r} overlaps the previous tensor",
                           expected=f"begin >= {pos}", actual=f"data_offsets [{begin}, {end}]")
        if begin > pos:
            raise _corrupt(f"gap in the data area before tensor {name!r}",
                           expected=f"begin == {pos}", actual=f"data_offsets [{begin}, {end}]")
        pos = end
    if pos < data_size:
        raise _corrupt("trailing bytes after the last tensor (file oversized)",
                       expected=f"data area of {pos} bytes", actual=f"{data_size} bytes")
    if pos > data_size:
        raise _corrupt("file truncated: tensors extend past the end of the file",
                       expected=f"data area of {pos} bytes", actual=f"{data_size} bytes")

    # One copy per tensor: file bytes -> a fresh uint8 buffer that becomes the tensor.
    f.seek(8 + n)
    loaded: dict[str, torch.Tensor] = {}
    for begin, end, name, dtype, shape in entries:
        buf = torch.empty(end - begin, dtype=torch.uint8)
        _readinto_exact(f, memoryview(buf.numpy()), f"tensor {name!r}")
        if dtype == torch.bool and buf.numel() and int(buf.max()) > 1:
            raise _corrupt(f"tensor {name!r}: BOOL data holds bytes other than 0/1",
                           expected="0 or 1", actual=f"max byte {int(buf.max())}")
        loaded[name] = buf.view(dtype).reshape(shape)
    return {name: loaded[name] for name in header}, dict(metadata)


def _file_size(f: BinaryIO) -> int:
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        return st.st_size
    return f.seek(0, io.SEEK_END)


def _parse_json(raw: bytes) -> dict:
    try:
        header = strict_json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _corrupt("header is not valid JSON", expected="a UTF-8 JSON object",
                       actual=f"{type(e).__name__}: {e}") from None
    if type(header) is not dict:
        raise _corrupt("header is not a JSON object", expected="object",
                       actual=type(header).__name__)
    return header


def _check_entry(name: str, e: object, allowed: Collection[str]):
    """Validate one header entry; returns (begin, end, name, torch dtype, shape)."""
    if type(e) is not dict or set(e) != _ENTRY_KEYS:
        raise _corrupt(f"tensor {name!r}: entry must have exactly the keys "
                       "dtype/shape/data_offsets", expected=sorted(_ENTRY_KEYS),
                       actual=sorted(e) if type(e) is dict else type(e).__name__)
    dname, shape, offsets = e["dtype"], e["shape"], e["data_offsets"]
    if type(dname) is not str or dname not in allowed or dname not in DTYPES:
        raise _corrupt(f"tensor {name!r}: dtype not allowed",
                       expected=sorted(set(allowed) & set(DTYPES)), actual=strict_json.brief(dname))
    if (type(shape) is not list or len(shape) > MAX_NDIM
            or not all(type(d) is int and d >= 0 for d in shape)):
        raise _corrupt(f"tensor {name!r}: shape must be a list of non-negative ints",
                       expected=f"list of <= {MAX_NDIM} ints >= 0", actual=strict_json.brief(shape))
    if (type(offsets) is not list or len(offsets) != 2
            or not all(type(o) is int for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise _corrupt(f"tensor {name!r}: data_offsets must be [begin, end] with "
                       "0 <= begin <= end", expected="[begin, end]", actual=strict_json.brief(offsets))
    dtype = DTYPES[dname]
    nbytes = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if nbytes != offsets[1] - offsets[0]:
        raise _corrupt(f"tensor {name!r}: size of shape x dtype does not match data_offsets",
                       expected=f"{nbytes} bytes ({shape} x {dname})",
                       actual=f"{offsets[1] - offsets[0]} bytes {offsets}")
    return offsets[0], offsets[1], name, dtype, tuple(shape)


def _readinto_exact(f: BinaryIO, mv: memoryview, what: str) -> None:
    got = 0
    while got < len(mv):
        r = f.readinto(mv[got:])
        if not r:
            raise _corrupt(f"file ended while reading {what} (changed while reading?)",
                           expected=f"{len(mv)} bytes", actual=f"{got} bytes")
        got += r

