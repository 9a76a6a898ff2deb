"""Typed, pickle-free serializer for the values ComfyUI passes between nodes.

``encode(value)`` -> ``(structure, tensors)``: a JSON-able tree of tagged nodes
(``{"t": "list", "v": [...]}``, ``{"t": "tensor", "k": "t0"}``, ...) plus the tensors by key;
``decode`` rebuilds the value with the same types. Host classes (``comfy.clip_vision.Output``)
go through adapters registered by ``nodes/``; nothing is imported by a name read from a file.

* Types match exactly (``type(v) is dict``): OrderedDict, IntEnum, namedtuple, Parameter...
  are refused unless an adapter is registered for that exact class.
* A tensor/ndarray object met several times is stored once and decodes to one shared object;
  a shared list/dict/tuple is stored and decoded once per occurrence.
* ``encode`` returns tensors as given (maybe on a GPU: ``tensorfile.write`` copies them to CPU
  chunk-wise); files decode to contiguous CPU tensors without ``requires_grad``.
* ``torch.Size`` (a tuple subclass) has a tag of its own and decodes to ``torch.Size``.
* Anything else raises ``UnsupportedValueError`` naming the type and the path
  (``value[0][1]['clip_vision_output']``): never a silent partial save.
"""
from __future__ import annotations

import json
import math
import re
import struct
from typing import Any, BinaryIO

import numpy as np
import torch

from . import strict_json
from . import tensorfile
from ..errors import CorruptCacheError, UnsupportedValueError
from .adapters import _BY_CLS, _BY_NAME, attribute_adapter, dict_adapter, register_adapter  # noqa: F401
from .strict_json import brief as _brief

FORMAT = "value/1"
META_FORMAT = "seedreuse.format"
META_STRUCTURE = "seedreuse.structure"
MAX_DEPTH = 64                      # container nesting (encode and decode)
MAX_STRUCTURE_BYTES = 16 << 20      # compact JSON of the structure tree

# Allowed keys of every node, by tag (decode rejects anything else).
_SCHEMA: dict[str, frozenset[str]] = {t: frozenset(k) for t, k in {
    "none": {"t"}, "bool": {"t", "v"}, "int": {"t", "v"}, "float": {"t", "v"},
    "str": {"t", "v"}, "list": {"t", "v"}, "tuple": {"t", "v"}, "dict": {"t", "items"},
    "tensor": {"t", "k"}, "ndarray": {"t", "k", "dtype"}, "npscalar": {"t", "k", "dtype"},
    "dtype": {"t", "v"}, "device": {"t", "v"}, "size": {"t", "v"}, "obj": {"t", "cls", "fields"},
}.items()}
_NAN_FLOAT = {"t", "v", "bits"}     # float nodes for NaN also carry the IEEE bits
_HEX_INT = re.compile(r"-?0x[0-9a-f]+\Z")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TORCH_DTYPES = {str(d).removeprefix("torch."): d for d in
                 (getattr(torch, n) for n in dir(torch)) if isinstance(d, torch.dtype)}


# ---------------------------------------------------------------------------- encode

def _unsupported(v: object, path: str, why: str = "") -> UnsupportedValueError:
    tname = f"{type(v).__module__}.{type(v).__qualname__}"
    return UnsupportedValueError(
        f"cannot cache a value of type {tname} at {path}" + (f": {why}" if why else ""),
        expected="None/bool/int/float/str/list/tuple/dict/torch.Tensor/numpy array, "
                 "torch.dtype/device/Size or a registered adapter class",
        actual=tname, details={"path": path, "type": tname},
        fix="register an adapter for this class (reuse_backend.serialize.register_adapter) "
            "or do not route this value through the cache")


def _field_path(path: str, key: object) -> str:
    return f"{path}.{key}" if type(key) is str and _IDENT.match(key) else f"{path}[{key!r}]"


class _Encoder:
    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self._memo: dict[int, str] = {}   # id(tensor/ndarray) -> key; originals kept alive
        self._alive: list[object] = []
        self._active: set[int] = set()    # ids of containers on the current path (cycles)

    def node(self, v: Any, path: str, depth: int) -> dict:
        if depth > MAX_DEPTH:
            raise _unsupported(v, path, f"nested deeper than {MAX_DEPTH} levels")
        tp = type(v)
        if v is None:
            return {"t": "none"}
        if tp is bool:
            return {"t": "bool", "v": v}
        if tp is int:  # JSON int within int64, hex string beyond (arbitrary size)
            return {"t": "int", "v": v if -2**63 <= v < 2**63 else hex(v)}
        if tp is float:
            if math.isfinite(v):  # json writes repr(): exact, incl. -0.0
                return {"t": "float", "v": v}
            if math.isinf(v):
                return {"t": "float", "v": "inf" if v > 0 else "-inf"}
            return {"t": "float", "v": "nan", "bits": struct.pack(">d", v).hex()}
        if tp is str:
            return {"t": "str", "v": v}
        if tp is torch.Tensor:
            return {"t": "tensor", "k": self._store(v, v, path)}
        if tp is np.ndarray or isinstance(v, np.generic):
            arr = np.asarray(v)  # 0-d for numpy scalars
            try:  # copies only non-contiguous or read-only arrays
                t = torch.from_numpy(arr if arr.flags.c_contiguous and arr.flags.writeable
                                     else np.array(arr, order="C"))
            except (TypeError, ValueError) as e:
                raise _unsupported(v, path, f"numpy dtype {arr.dtype} ({e})") from None
            tag = "ndarray" if tp is np.ndarray else "npscalar"
            return {"t": tag, "k": self._store(v, t, path), "dtype": arr.dtype.str}
        if tp is torch.dtype:
            return {"t": "dtype", "v": str(v).removeprefix("torch.")}
        if tp is torch.device:
            return {"t": "device", "v": str(v)}
        if tp is torch.Size:  # a tuple of non-negative ints (ComfyUI 0.33's CLIP vision image_sizes)
            return {"t": "size", "v": [int(x) for x in v]}
        if tp in (list, tuple, dict) or tp in _BY_CLS:
            if id(v) in self._active:
                raise _unsupported(v, path, "cyclic reference (the value contains itself)")
            self._active.add(id(v))
            try:
                if tp is dict:
                    return self._dict(v, path, depth)
                if tp is not list and tp is not tuple:
                    return self._obj(v, path, depth)
                return {"t": tp.__name__,
                        "v": [self.node(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]}
            finally:
                self._active.discard(id(v))
        raise _unsupported(v, path)

    def _dict(self, d: dict, path: str, depth: int, fmt=None) -> dict:
        fmt = fmt or (lambda p, k: f"{p}[{k!r}]")
        return {"t": "dict", "items": [[self._key(k, path, depth + 1),
                                        self.node(x, fmt(path, k), depth + 1)]
                                       for k, x in d.items()]}

    def _key(self, k: Any, path: str, depth: int) -> dict:
        """Dict keys: str, int, float, bool, None, or tuples of those."""
        if type(k) in (str, int, float, bool) or k is None:
            return self.node(k, path, depth)
        if type(k) is tuple and depth <= MAX_DEPTH:
            return {"t": "tuple", "v": [self._key(x, path, depth + 1) for x in k]}
        raise _unsupported(k, f"{path} (a dict key)", "dict keys must be str, int, float, "
                           "bool, None or tuples of those")

    def _obj(self, v: Any, path: str, depth: int) -> dict:
        ad = _BY_CLS[type(v)]
        try:
            fields = ad.to_fields(v)
        except Exception as e:
            why = e.message if isinstance(e, UnsupportedValueError) else repr(e)
            raise _unsupported(v, path, f"adapter {ad.name!r}: {why}") from e
        if type(fields) is not dict:
            raise _unsupported(v, path, f"adapter {ad.name!r} returned "
                               f"{type(fields).__name__}, not dict")
        return {"t": "obj", "cls": ad.name, "fields": self._dict(fields, path, depth, _field_path)}

    def _store(self, orig: object, t: torch.Tensor, path: str) -> str:
        key = self._memo.get(id(orig))
        if key is not None:
            return key
        if (tensorfile.dtype_name(t.dtype) is None or t.layout != torch.strided
                or t.device.type == "meta"):
            raise _unsupported(orig, path, f"dtype {t.dtype}, layout {t.layout}, device "
                               f"{t.device} (supported dtypes: {sorted(tensorfile.DTYPES)})")
        key = f"t{len(self.tensors)}"
        self.tensors[key] = t  # device tensors: tensorfile.write copies them chunk-wise
        self._memo[id(orig)] = key
        self._alive.append(orig)
        return key


def encode(value: Any) -> tuple[dict, dict[str, torch.Tensor]]:
    """Split ``value`` into a JSON-able structure tree and its tensors (see module doc)."""
    enc = _Encoder()
    structure = enc.node(value, "value", 0)
    return structure, enc.tensors


# ---------------------------------------------------------------------------- decode

def _corrupt(path: str, message: str, *, expected=None, actual=None) -> CorruptCacheError:
    return CorruptCacheError(f"bad value structure at {path}: {message}", expected=expected,
                             actual=actual, details={"path": path},
                             fix="delete or clear this cache entry; it will be recomputed")


class UnknownObject:
    """What ``validate_only`` decoding gives for an adapter class this process has not
    registered (e.g. ComfyUI's CLIP vision output inside the plain-Python CLI): the fields
    are fully validated, the host object is not rebuilt."""

    def __init__(self, name: str, fields: dict) -> None:
        self.name, self.fields = name, fields

    def __repr__(self) -> str:
        return f"UnknownObject({self.name!r}, fields={sorted(map(str, self.fields))})"


class _Decoder:
    def __init__(self, tensors: dict[str, torch.Tensor], validate_only: bool = False) -> None:
        self.tensors = tensors
        self.validate_only = validate_only
        self.cache: dict[tuple[str, str], Any] = {}  # (tag, key) -> object: sharing restored

    def node(self, n: Any, path: str, depth: int, key_only: bool = False) -> Any:
        if depth > MAX_DEPTH:
            raise _corrupt(path, f"nested deeper than {MAX_DEPTH} levels")
        t = n.get("t") if type(n) is dict else None
        if type(t) is not str or t not in _SCHEMA:
            raise _corrupt(path, "unknown or missing node tag", expected=sorted(_SCHEMA),
                           actual=_brief(t if type(n) is dict else n))
        keys = set(n)
        if keys != _SCHEMA[t] and not (t == "float" and keys == _NAN_FLOAT):
            raise _corrupt(path, f"{t!r} node has unexpected keys",
                           expected=sorted(_SCHEMA[t]), actual=sorted(keys))
        if key_only and t not in ("none", "bool", "int", "float", "str", "tuple"):
            raise _corrupt(path, f"{t!r} is not a valid dict key type",
                           expected="str/int/float/bool/none/tuple", actual=t)
        v = n.get("v")
        if t == "none":
            return None
        if t == "bool" and type(v) is bool or t == "str" and type(v) is str:
            return v
        if t == "int":
            if type(v) is int:
                return v
            if type(v) is str and _HEX_INT.match(v):
                return int(v, 16)
        elif t == "float":
            return self._float(n, path)
        elif t in ("list", "tuple") and type(v) is list:
            items = [self.node(x, f"{path}[{i}]", depth + 1, key_only)
                     for i, x in enumerate(v)]
            return items if t == "list" else tuple(items)
        elif t == "dict":
            return self._dict(n["items"], path, depth)
        elif t in ("tensor", "ndarray", "npscalar"):
            return self._tensor(n, t, path)
        elif t == "dtype" and type(v) is str and v in _TORCH_DTYPES:
            return _TORCH_DTYPES[v]
        elif t == "device" and type(v) is str:
            try:
                return torch.device(v)
            except (RuntimeError, ValueError):
                pass
        elif t == "size" and type(v) is list and len(v) <= MAX_DEPTH \
                and all(type(x) is int and 0 <= x < 2**63 for x in v):
            return torch.Size(v)
        elif t == "obj":
            return self._obj(n, path, depth)
        raise _corrupt(path, f"invalid value for a {t!r} node", actual=_brief(v))

    def _float(self, n: dict, path: str) -> float:
        v, bits = n["v"], n.get("bits")
        if type(v) is float and "bits" not in n:
            return v
        if v in ("inf", "-inf") and "bits" not in n:
            return float(v)
        if v == "nan" and type(bits) is str and re.fullmatch(r"[0-9a-f]{16}", bits):
            x = struct.unpack(">d", bytes.fromhex(bits))[0]
            if math.isnan(x):
                return x
        raise _corrupt(path, "invalid float node", expected="JSON float, 'inf', '-inf' or "
                       "'nan' with 16 hex digits of IEEE bits", actual=_brief(n))

    def _dict(self, items: Any, path: str, depth: int, fmt=None) -> dict:
        fmt = fmt or (lambda p, k: f"{p}[{k!r}]")
        if type(items) is not list:
            raise _corrupt(path, "dict items must be a list", actual=type(items).__name__)
        out: dict = {}
        for i, pair in enumerate(items):
            if type(pair) is not list or len(pair) != 2:
                raise _corrupt(path, f"dict item {i} must be a [key, value] pair",
                               actual=_brief(pair))
            k = self.node(pair[0], f"{path} (key {i})", depth + 1, key_only=True)
            if k in out:
                raise _corrupt(path, f"duplicate dict key {k!r}")
            out[k] = self.node(pair[1], fmt(path, k), depth + 1)
        return out

    def _tensor(self, n: dict, tag: str, path: str) -> Any:
        k = n["k"]
        if type(k) is not str or k not in self.tensors:
            raise _corrupt(path, "references a tensor missing from the file",
                           expected=f"one of {sorted(self.tensors)[:20]}", actual=_brief(k))
        if (tag, k) in self.cache:
            return self.cache[(tag, k)]
        t = self.tensors[k]
        if tag == "tensor":
            out: Any = t
        else:
            arr = t.numpy()
            if arr.dtype.str != n["dtype"]:
                raise _corrupt(path, f"numpy dtype does not match tensor {k!r}",
                               expected=_brief(n["dtype"]), actual=arr.dtype.str)
            if tag == "npscalar" and arr.ndim != 0:
                raise _corrupt(path, f"numpy scalar tensor {k!r} is not 0-d",
                               expected="shape ()", actual=tuple(arr.shape))
            out = arr[()] if tag == "npscalar" else arr
        self.cache[(tag, k)] = out
        return out

    def _obj(self, n: dict, path: str, depth: int) -> Any:
        name, fields = n["cls"], n["fields"]
        ad = _BY_NAME.get(name) if type(name) is str else None
        if ad is None and self.validate_only and type(name) is str and type(fields) is dict \
                and fields.get("t") == "dict" and set(fields) == {"t", "items"}:
            return UnknownObject(name, self._dict(fields["items"], path, depth, _field_path))
        if ad is None:
            raise _corrupt(path, "unknown adapter class name (not registered in this process)",
                           expected=sorted(_BY_NAME), actual=_brief(name))
        if type(fields) is not dict or fields.get("t") != "dict" or set(fields) != {"t", "items"}:
            raise _corrupt(path, f"fields of {name!r} must be a dict node", actual=_brief(fields))
        values = self._dict(fields["items"], path, depth, _field_path)
        try:
            return ad.from_fields(values)
        except Exception as e:
            raise _corrupt(path, f"adapter {name!r} could not rebuild the object: {e!r}") from e


def decode(structure: dict, tensors: dict[str, torch.Tensor], *, validate_only: bool = False) -> Any:
    """Rebuild the value described by ``structure``; raises ``CorruptCacheError`` on any flaw.

    Every tensor in ``tensors`` must be referenced (a file holding extra tensors is refused).
    ``validate_only``: adapter objects of classes not registered here come back as
    ``UnknownObject`` instead of being refused (for ``check()`` outside the host).
    """
    dec = _Decoder(tensors, validate_only)
    value = dec.node(structure, "value", 0)
    unused = sorted(set(tensors) - {k for _, k in dec.cache})
    if unused:
        raise _corrupt("value", "tensors in the file are not referenced by the structure",
                       expected="every tensor referenced", actual=unused[:20])
    return value


# ------------------------------------------------------------------------------ files

def dump_value(f: BinaryIO, value: Any) -> int:
    """Encode ``value`` and write it as a safetensors file to ``f``; returns bytes written."""
    structure, tensors = encode(value)
    text = json.dumps(structure, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    if len(text) > MAX_STRUCTURE_BYTES:
        raise UnsupportedValueError(
            "value structure too large to cache", expected=f"<= {MAX_STRUCTURE_BYTES} bytes",
            actual=f"{len(text)} bytes", details={"path": "value"},
            fix="cache fewer or larger pieces (e.g. stack many small tensors)")
    return tensorfile.write(f, tensors, {META_FORMAT: FORMAT, META_STRUCTURE: text})


def load_value(f: BinaryIO, *, max_bytes: int = 64 << 30, validate_only: bool = False) -> Any:
    """Read a file written by ``dump_value``; raises ``CorruptCacheError`` on any flaw."""
    tensors, meta = tensorfile.read(f, max_bytes=max_bytes)
    if set(meta) != {META_FORMAT, META_STRUCTURE} or meta[META_FORMAT] != FORMAT:
        raise CorruptCacheError(
            "not a SeedReuse value file (metadata)",
            expected={META_FORMAT: FORMAT, META_STRUCTURE: "<json>"},
            actual={k: _brief(v, 60) for k, v in meta.items()},
            fix="delete or clear this cache entry; it will be recomputed")
    text = meta[META_STRUCTURE]
    if len(text) > MAX_STRUCTURE_BYTES:
        raise _corrupt("value", "structure JSON too large",
                       expected=f"<= {MAX_STRUCTURE_BYTES} bytes", actual=f"{len(text)} bytes")
    try:
        structure = strict_json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _corrupt("value", "structure is not valid JSON",
                       actual=f"{type(e).__name__}: {e}") from None
    return decode(structure, tensors, validate_only=validate_only)
