"""A value file's structure without its tensor data: the cheap check of a cached value.

``load_skeleton(f)`` runs every check ``serialize.load_value`` runs on the safetensors header
(length, JSON, dtypes, shapes, offsets tiling the data area exactly, our metadata and the
structure tree, every tensor referenced) but reads no tensor bytes: the value comes back with
shape-only tensors (``device="meta"``, no memory) in place of the real ones, so callers can
compare dtypes and shapes with what the slot should hold (``keys.value_checks``).

What it cannot see: tensor contents (NaN/Inf, BOOL bytes other than 0/1) and a sha256
mismatch; a full load or ``python -m reuse_backend check`` finds those.
"""
from __future__ import annotations

from typing import Any, BinaryIO

import numpy as np
import torch

from . import serialize, strict_json, tensorfile
from ..errors import CorruptCacheError


def read_header(f: BinaryIO, *, max_bytes: int = 64 << 30
                ) -> tuple[dict[str, tuple[torch.dtype, tuple]], dict[str, str]]:
    """``({name: (dtype, shape)}, metadata)`` of a safetensors file, validated like
    ``tensorfile.read`` (same errors, same messages) without reading the data area."""
    size = tensorfile._file_size(f)
    f.seek(0)
    if size < 8:
        raise tensorfile._corrupt("file truncated: no header length", expected=">= 8 bytes",
                                  actual=f"{size} bytes")
    head = bytearray(8)
    tensorfile._readinto_exact(f, memoryview(head), "header length")
    n = int.from_bytes(head, "little")
    if n > tensorfile.HEADER_CAP:
        raise tensorfile._corrupt("header length over the cap",
                                  expected=f"<= {tensorfile.HEADER_CAP} bytes", actual=f"{n} bytes")
    if 8 + n > size:
        raise tensorfile._corrupt("header length beyond the end of the file",
                                  expected=f"<= {size - 8} bytes (file size {size})", actual=f"{n} bytes")
    data_size = size - 8 - n
    if data_size > max_bytes:
        raise tensorfile._corrupt("file over max_bytes", expected=f"data area <= {max_bytes} bytes",
                                  actual=f"{data_size} bytes")
    raw = bytearray(n)
    tensorfile._readinto_exact(f, memoryview(raw), "header")
    header = tensorfile._parse_json(bytes(raw))
    metadata = header.pop("__metadata__", {})
    if type(metadata) is not dict or not all(
            type(k) is str and type(v) is str for k, v in metadata.items()):
        raise tensorfile._corrupt("header field '__metadata__' must map str to str",
                                  expected="object of strings", actual=strict_json.brief(metadata))
    entries = sorted((tensorfile._check_entry(name, e, tensorfile.ALLOWED_DTYPES)
                      for name, e in header.items()), key=lambda x: (x[0], x[1]))
    pos = 0
    for begin, end, name, _, _ in entries:
        if begin < pos:
            raise tensorfile._corrupt(f"tensor {name!r} overlaps the previous tensor",
                                      expected=f"begin >= {pos}", actual=f"data_offsets [{begin}, {end}]")
        if begin > pos:
            raise tensorfile._corrupt(f"gap in the data area before tensor {name!r}",
                                      expected=f"begin == {pos}", actual=f"data_offsets [{begin}, {end}]")
        pos = end
    if pos < data_size:
        raise tensorfile._corrupt("trailing bytes after the last tensor (file oversized)",
                                  expected=f"data area of {pos} bytes", actual=f"{data_size} bytes")
    if pos > data_size:
        raise tensorfile._corrupt("file truncated: tensors extend past the end of the file",
                                  expected=f"data area of {pos} bytes", actual=f"{data_size} bytes")
    by_name = {name: (dtype, shape) for _, _, name, dtype, shape in entries}
    return {name: by_name[name] for name in header}, dict(metadata)


class _SkeletonDecoder(serialize._Decoder):
    """Decodes onto meta tensors; numpy arrays become zero-stride stand-ins (no memory)."""

    def _tensor(self, n: dict, tag: str, path: str) -> Any:
        if tag == "tensor":
            return super()._tensor(n, tag, path)
        k = n["k"]
        if type(k) is not str or k not in self.tensors:
            return super()._tensor(n, tag, path)     # the same "missing tensor" error
        if (tag, k) in self.cache:
            return self.cache[(tag, k)]
        t = self.tensors[k]
        try:
            dt = torch.empty(0, dtype=t.dtype).numpy().dtype
        except TypeError:
            raise serialize._corrupt(path, f"tensor {k!r} has no numpy dtype",
                                     expected=strict_json.brief(n["dtype"]), actual=str(t.dtype)) from None
        if dt.str != n["dtype"]:
            raise serialize._corrupt(path, f"numpy dtype does not match tensor {k!r}",
                                     expected=strict_json.brief(n["dtype"]), actual=dt.str)
        if tag == "npscalar" and t.ndim != 0:
            raise serialize._corrupt(path, f"numpy scalar tensor {k!r} is not 0-d",
                                     expected="shape ()", actual=tuple(t.shape))
        one = np.zeros(1, dtype=dt)
        out = one[0] if tag == "npscalar" else \
            np.lib.stride_tricks.as_strided(one, shape=tuple(t.shape), strides=(0,) * t.ndim, writeable=False)
        self.cache[(tag, k)] = out
        return out


def load_skeleton(f: BinaryIO, *, max_bytes: int = 64 << 30) -> Any:
    """The value of a ``serialize.dump_value`` file with meta tensors (no tensor data read).
    Raises ``CorruptCacheError`` for everything ``serialize.load_value`` would refuse from the
    header and structure alone."""
    entries, meta = read_header(f, max_bytes=max_bytes)
    if set(meta) != {serialize.META_FORMAT, serialize.META_STRUCTURE} \
            or meta[serialize.META_FORMAT] != serialize.FORMAT:
        raise CorruptCacheError(
            "not a SeedReuse value file (metadata)",
            expected={serialize.META_FORMAT: serialize.FORMAT, serialize.META_STRUCTURE: "<json>"},
            actual={k: strict_json.brief(v, 60) for k, v in meta.items()},
            fix="delete or clear this cache entry; it will be recomputed")
    text = meta[serialize.META_STRUCTURE]
    if len(text) > serialize.MAX_STRUCTURE_BYTES:
        raise serialize._corrupt("value", "structure JSON too large",
                                 expected=f"<= {serialize.MAX_STRUCTURE_BYTES} bytes", actual=f"{len(text)} bytes")
    try:
        structure = strict_json.loads(text)
    except (ValueError, RecursionError) as e:
        raise serialize._corrupt("value", "structure is not valid JSON",
                                 actual=f"{type(e).__name__}: {e}") from None
    tensors = {name: torch.empty(shape, dtype=dtype, device="meta") for name, (dtype, shape) in entries.items()}
    dec = _SkeletonDecoder(tensors)
    value = dec.node(structure, "value", 0)
    unused = sorted(set(tensors) - {k for _, k in dec.cache})
    if unused:
        raise serialize._corrupt("value", "tensors in the file are not referenced by the structure",
                                 expected="every tensor referenced", actual=unused[:20])
    return value
