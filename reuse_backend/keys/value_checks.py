"""Is a cached value usable? Structure (dtype, shape) by the slot's type, and finite numbers.

A slot file can load and still be wrong: NaN tensors, an int64 conditioning, a boundary of
another frame size. Such values used to fail deep inside the sampler (or silently produce
garbage), so every cached value is checked before any sampling:

- ``check_value(io_type, value)``: the shape of value the node type implies (below), and no
  NaN/Inf in floating tensors (``finite=False`` skips the data pass; shape-only ``meta``
  tensors from ``storage.skeleton`` are never read);
- ``check_boundary(value, M=, height=, width=)``: a motion boundary holds M RGB frames at the
  body's frame size (the previous result's, which the segment key pins);
- ``inspect_slot(snapshot, ...)``: load (or, for the dry run, structurally validate) one
  committed slot and check it; raises ``CorruptCacheError`` with the message for ``require``
  and ``details["reason"]`` for ``auto`` (see ``keys.slots.decide_slot``).

Expected structures (ComfyUI's types):

=====================  ===========================================================
CONDITIONING           list of [float tensor [B, L, D], dict]
LATENT                 {"samples": float tensor [B, C, H, W] / [B, C, T, H, W] (or an audio
                       latent [B, C, L]), or a nested tensor: an adapter object whose only
                       field "tensors" lists such tensors (the audio-video latents of LTX-2
                       and MiniMax H3: video and audio)}
IMAGE                  float tensor [B, H, W, C], C in 1..4
CLIP_VISION_OUTPUT     an object with last_hidden_state float [B, T, D] (image_embeds [B, D],
                       penultimate_hidden_states [B, T, D] when present)
AUDIO_ENCODER_OUTPUT   {"encoded_audio": float [B, T, D], "encoded_audio_all_layers": [...]}
AUDIO                  {"waveform": float [B, C, T], "sample_rate": int > 0}
STRING                 a str (a prompt enhancer's text)
=====================  ===========================================================

Additive attention masks may hold -inf: tensors under a key containing "mask" are checked
for NaN only.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import CorruptCacheError
from ..storage import adapters, serialize

CHUNK = 1 << 22          # elements per finite-check step (bounds the temporary mask)
MAX_DEPTH = 64
_LOW_PRECISION = tuple(d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if d)


@dataclass
class Problem:
    path: str
    expected: str
    actual: str

    def text(self) -> str:
        return f"{self.path} is {self.actual}, expected {self.expected}"


def describe(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"{str(v.dtype).removeprefix('torch.')} tensor {list(v.shape)}"
    if isinstance(v, np.ndarray):
        return f"numpy {v.dtype} array {list(v.shape)}"
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__} of {len(v)}"
    return type(v).__name__


def _tensor(v, path: str, ndims: tuple, dims: str, what: str = "float tensor") -> Problem | None:
    want = f"{what} {dims}"
    if not isinstance(v, torch.Tensor):
        return Problem(path, want, describe(v))
    if not v.is_floating_point() or v.ndim not in ndims or any(d == 0 for d in v.shape):
        return Problem(path, want, describe(v))
    return None


def _first(*problems):
    return next((p for p in problems if p is not None), None)


def _dict(value, path: str, required: str, want: str) -> Problem | None:
    if type(value) is not dict or required not in value:
        return Problem(path, want, describe(value) if type(value) is not dict
                       else f"dict with keys {sorted(map(str, value))}")
    return None


def _conditioning(value) -> Problem | None:
    want = "a non-empty list of [float tensor [B, L, D], dict]"
    if type(value) not in (list, tuple) or not value:
        return Problem("value", want, describe(value))
    for i, item in enumerate(value):
        if type(item) not in (list, tuple) or len(item) != 2:
            return Problem(f"value[{i}]", "[float tensor [B, L, D], dict]", describe(item))
        p = _tensor(item[0], f"value[{i}][0]", (3,), "[B, L, D]")
        if p is not None:
            return p
        if type(item[1]) is not dict:
            return Problem(f"value[{i}][1]", "a dict of conditioning options", describe(item[1]))
        pooled = item[1].get("pooled_output")
        if pooled is not None:
            p = _tensor(pooled, f"value[{i}][1]['pooled_output']", (1, 2, 3), "[B, D]")
            if p is not None:
                return p
    return None


def _latent(value, path: str = "value") -> Problem | None:
    want = "{'samples': float tensor [B, C, H, W] or [B, C, T, H, W]}"
    dims = "[B, C, H, W] or [B, C, T, H, W]"
    p = _dict(value, path, "samples", want)
    if p is not None:
        return p
    samples = value["samples"]
    nested = None if isinstance(samples, (dict, list, tuple, torch.Tensor)) else _fields(samples)
    if nested is None:
        return _tensor(samples, f"{path}['samples']", (3, 4, 5), dims)
    tensors = nested.get("tensors")
    if set(nested) != {"tensors"} or type(tensors) not in (list, tuple) or not tensors:
        return Problem(f"{path}['samples']", "a float tensor or a nested tensor (a non-empty list of float tensors)",
                       f"an object with fields {sorted(map(str, nested))}")
    return _first(*(_tensor(t, f"{path}['samples'].tensors[{i}]", (3, 4, 5), dims) for i, t in enumerate(tensors)))


def _image(value) -> Problem | None:
    p = _tensor(value, "value", (4,), "[B, H, W, C] with C in 1..4")
    if p is None and not 1 <= value.shape[-1] <= 4:
        return Problem("value", "float tensor [B, H, W, C] with C in 1..4", describe(value))
    return p


def _fields(obj) -> dict | None:
    ad = adapters._BY_CLS.get(type(obj))
    if ad is not None:
        try:
            fields = ad.to_fields(obj)
        except Exception:
            return None
        return fields if type(fields) is dict else None
    if isinstance(obj, serialize.UnknownObject) and isinstance(obj.fields, dict):
        return obj.fields          # validate_only decoding outside the host
    return None


def _clip_vision(value) -> Problem | None:
    fields = None if isinstance(value, (dict, list, tuple, torch.Tensor)) else _fields(value)
    if fields is None:
        return Problem("value", "a CLIP vision output object", describe(value))
    if "last_hidden_state" not in fields:
        return Problem("value", "a CLIP vision output with last_hidden_state",
                       f"fields {sorted(map(str, fields))}")
    checks = [("last_hidden_state", (3,), "[B, T, D]"), ("image_embeds", (2,), "[B, D]"),
              ("penultimate_hidden_states", (3,), "[B, T, D]"), ("all_hidden_states", (4,), "[B, N, T, D]")]
    return _first(*(_tensor(fields[k], f"value.{k}", nd, dims) for k, nd, dims in checks
                    if k in fields and (k == "last_hidden_state" or fields[k] is not None)))


def _dict_of_tensor(value, key: str, dims: str, want: str) -> Problem | None:
    """A dict whose ``key`` holds a 3-d float tensor of ``dims`` (the audio values' main field)."""
    return _dict(value, "value", key, want) or _tensor(value[key], f"value['{key}']", (3,), dims)


def _int_field(value: dict, key: str, low: int, optional: bool) -> Problem | None:
    """``value[key]`` is an int >= ``low`` (numpy ints too, never a bool); may be absent if optional."""
    n = value.get(key)
    if n is None and optional:
        return None
    if type(n) is bool or not isinstance(n, (int, np.integer)) or n < low:
        return Problem(f"value['{key}']", f"an int >= {low}" if low == 0 else f"an int > {low - 1}", repr(n)[:60])
    return None


def _audio_features(value) -> Problem | None:
    p = _dict_of_tensor(value, "encoded_audio", "[B, T, D]", "{'encoded_audio': float tensor [B, T, D], ...}")
    if p is not None:
        return p
    layers = value.get("encoded_audio_all_layers")
    if layers is not None:
        if type(layers) not in (list, tuple):
            return Problem("value['encoded_audio_all_layers']", "a list of float tensors [B, T, D]",
                           describe(layers))
        p = _first(*(_tensor(t, f"value['encoded_audio_all_layers'][{i}]", (3,), "[B, T, D]")
                     for i, t in enumerate(layers)))
    return p or _int_field(value, "audio_samples", 0, optional=True)


def _audio(value) -> Problem | None:
    return (_dict_of_tensor(value, "waveform", "[B, C, T]", "{'waveform': float tensor [B, C, T], 'sample_rate': int}")
            or _int_field(value, "sample_rate", 1, optional=False))


def _text(value) -> Problem | None:
    return None if type(value) is str else Problem("value", "a str", describe(value))


STRUCTURES = {"CONDITIONING": _conditioning, "LATENT": _latent, "IMAGE": _image,
              "CLIP_VISION_OUTPUT": _clip_vision, "AUDIO_ENCODER_OUTPUT": _audio_features, "AUDIO": _audio,
              "STRING": _text}


# ------------------------------------------------------------------ finite numbers

def _walk(v, path: str, depth: int = 0, mask: bool = False):
    """(path, tensor or array, under a mask key) for every tensor/array in a value tree."""
    if depth > MAX_DEPTH:
        return
    if isinstance(v, (torch.Tensor, np.ndarray)):
        yield path, v, mask
    elif type(v) in (list, tuple):
        for i, x in enumerate(v):
            yield from _walk(x, f"{path}[{i}]", depth + 1, mask)
    elif type(v) is dict:
        for k, x in v.items():
            yield from _walk(x, f"{path}[{k!r}]", depth + 1, mask or "mask" in str(k).lower())
    else:
        fields = _fields(v)
        for k, x in (fields or {}).items():
            yield from _walk(x, f"{path}.{k}", depth + 1, mask or "mask" in str(k).lower())


_NUMPY_EXACT = (torch.float32, torch.float64)   # numpy reduces these exactly (NaN propagates)


def _extremes(t: torch.Tensor) -> tuple[float, float]:
    """min and max in one pass without a temporary (NaN when any element is NaN; no overflow,
    unlike a sum): about memory bandwidth, where isfinite().all() is ~30x slower on CPU."""
    if t.dtype in _LOW_PRECISION:         # no CPU kernels for fp8: chunk-wise through float32
        lo, hi = math.inf, -math.inf
        for i in range(0, t.numel(), CHUNK):
            a, b = (float(x) for x in torch.aminmax(t[i:i + CHUNK].float()))
            if math.isnan(a) or math.isnan(b):
                return math.nan, math.nan
            lo, hi = min(lo, a), max(hi, b)
        return lo, hi
    if t.dtype in _NUMPY_EXACT and t.is_contiguous():
        # one thread: torch.aminmax splits the pass over the intra-op threads, and their join
        # waits for the slowest; with the worker's other core busy (its server thread, another
        # worker) a 32 MB hit's check took 2.5-17 ms in 13 of 14 hits and 119 ms in one, against
        # 3.2-8.6 ms in 12 hits this way (2 cores, 2026-12-01)
        a = t.numpy()
        return float(a.min()), float(a.max())
    lo, hi = torch.aminmax(t)
    return float(lo), float(hi)


def _nonfinite(t, nan_only: bool) -> str | None:
    if isinstance(t, np.ndarray):
        if t.dtype.kind not in "fc" or t.size == 0:
            return None
        t = torch.from_numpy(np.ascontiguousarray(t))
    if not t.is_floating_point() or t.device.type == "meta" or t.numel() == 0:
        return None
    flat = t.reshape(-1)
    lo, hi = _extremes(flat)
    if not (math.isnan(lo) or math.isnan(hi)) and (nan_only or (math.isfinite(lo) and math.isfinite(hi))):
        return None
    x = flat.float() if flat.dtype in _LOW_PRECISION else flat    # a bad value: count (rare path)
    nan, inf = int(torch.isnan(x).sum()), 0 if nan_only else int(torch.isinf(x).sum())
    return ", ".join(s for s in (f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else "") if s)


def check_finite(value, path: str = "value") -> Problem | None:
    for p, t, mask in _walk(value, path):
        bad = _nonfinite(t, nan_only=mask)
        if bad:
            return Problem(p, "finite numbers (no NaN/Inf)" if not mask else "no NaN",
                           f"{describe(t)} holding {bad} of {t.numel() if hasattr(t, 'numel') else t.size} values")
    return None


def check_value(io_type: str, value, *, finite: bool = True) -> Problem | None:
    """The first problem of ``value`` as a cached ``io_type`` (None: usable)."""
    fn = STRUCTURES.get(io_type)
    p = fn(value) if fn is not None else None
    return p if p is not None or not finite else check_finite(value)


def check_boundary(value, *, M: int, height: int | None, width: int | None, finite: bool = True) -> Problem | None:
    """A motion boundary: {'motion_frames': float [M, H, W, 3], 'motion_latent': LATENT (optional)}."""
    want = (f"float tensor [{M}, {height}, {width}, 3] ({M} motion frames at the body's frame size "
            f"{width}x{height})") if height and width else f"float tensor [{M}, H, W, 3] ({M} RGB motion frames)"
    p = _dict(value, "boundary", "motion_frames", "{'motion_frames': IMAGE, ...}")
    if p is not None:
        return p
    mf = value["motion_frames"]
    ok = isinstance(mf, torch.Tensor) and mf.is_floating_point() and mf.ndim == 4 \
        and mf.shape[0] == M and mf.shape[3] == 3 and all(d > 0 for d in mf.shape[1:]) \
        and (not (height and width) or tuple(mf.shape[1:3]) == (height, width))
    if not ok:
        p = Problem("boundary['motion_frames']", want, describe(mf))
    if p is None and value.get("motion_latent") is not None:
        p = _latent(value["motion_latent"], "boundary['motion_latent']")
    return p if p is not None or not finite else check_finite(value, "boundary")


# ------------------------------------------------------------------ committed slots

def fix_text(cache_name: str) -> str:
    return (f"run with reuse 'auto' to rebuild it (the encoder runs and the successful run replaces "
            f"the broken version), or clear the cache: python -m reuse_backend clear {cache_name} --yes")


def _inner(e: CorruptCacheError, cache_name: str, fname: str | None = None) -> str:
    msg = e.message
    for prefix in (f"cache '{cache_name}': ", f"{fname}: " if fname else None):
        if prefix and msg.startswith(prefix):
            msg = msg[len(prefix):]
    return msg


def unreadable_cache_error(cache_name: str, e: CorruptCacheError) -> CorruptCacheError:
    """The whole committed version cannot be opened (manifest, sizes, symlinks ...)."""
    inner = _inner(e, cache_name)
    return CorruptCacheError(f"cache '{cache_name}' is unreadable: {inner}", expected=e.expected,
                             actual=e.actual, fix=fix_text(cache_name),
                             details={"cache": cache_name, "kind": "unreadable",
                                      "reason": f"cache unreadable: {inner}; encoding (the successful "
                                                "run replaces it)"})


def unreadable_slot_error(cache_name: str, slot: str, fname: str, e: CorruptCacheError) -> CorruptCacheError:
    inner = _inner(e, cache_name, fname)
    return CorruptCacheError(f"cache '{cache_name}' is unreadable: slot '{slot}' ({fname}) cannot be loaded: {inner}",
                             expected=e.expected, actual=e.actual, fix=fix_text(cache_name),
                             details={"cache": cache_name, "slot": slot, "file": fname, "kind": "unreadable",
                                      "reason": f"cache slot unreadable: {fname}: {inner}; encoding (the "
                                                "successful run replaces it)"})


def unusable_slot_error(cache_name: str, slot: str, fname: str, io_type: str, p: Problem) -> CorruptCacheError:
    return CorruptCacheError(f"cache '{cache_name}' holds an unusable value in slot '{slot}' ({fname}): {p.text()}",
                             expected=f"{io_type}: {p.expected}", actual=p.actual, fix=fix_text(cache_name),
                             details={"cache": cache_name, "slot": slot, "file": fname, "kind": "unusable",
                                      "path": p.path, "reason": f"cache slot unusable: {p.text()}; encoding "
                                                                "(the successful run replaces it)"})


def inspect_slot(snapshot, *, cache_name: str, slot: str, io_type: str, load: bool):
    """Check the committed slot ``slot`` of ``snapshot``: with ``load``, read it fully and check
    structure and finite numbers (returns ``(value, load_seconds)``); without, validate the file's
    header and the value's structure from the header alone (returns ``(None, 0.0)``). Raises
    ``CorruptCacheError`` (from the functions above) when the slot cannot be used."""
    entry = snapshot.slot_entry(slot) or {}
    fname = entry.get("file") or f"slot_{slot}.safetensors"
    t0 = time.perf_counter()
    try:
        value = snapshot.load_slot(slot) if load else snapshot.validate_file(fname)
    except CorruptCacheError as e:
        raise unreadable_slot_error(cache_name, slot, fname, e) from None
    load_s = time.perf_counter() - t0
    p = check_value(io_type, value, finite=load)
    if p is not None:
        raise unusable_slot_error(cache_name, slot, fname, io_type, p)
    return (value, load_s) if load else (None, 0.0)
