"""Per-segment validity: which kept segments of a cached take a new request may reuse.

Segment ``i`` of a take depends only on what segments ``0..i`` consumed:

* the **static** part, the same for every segment: everything upstream of the loop's End
  node (encoder slots' inputs, models, LoRAs, every body input, sampler settings), F, M and
  fps: the graph walk of the segment key *without* the per-segment inputs of Segment Loop
  Start (``total_frames``, ``audio``, ``audio_features``), without Segment Prompt's literal
  ``prompts`` and without the segment count S;
* the **per-segment** part: the audio under segment j's frames ``[start(j), start(j) + F)``,
  segment j's cut of the audio features and segment j's line of every Segment Prompt of the
  loop, for every j <= i, exactly as the loop hands them to the body (zero-padded past the end
  of the track). Each input is kept as a chain
  ``c_i = sha256(c_{i-1} | digest(window_i))``, so ``c_i`` alone pins segments 0..i.

Invariant (checked by ``first_invalid`` before any sampling): a resume at N is valid iff the
static key is equal and every chain agrees at ``N - 1``; what changed after segment N-1 (a
longer track, other audio after P(N), more segments) never matters. The seed is recorded
per take but is not part of validity: a new seed at N keeps segments 0..N-1 and re-rolls
N.. (the documented "new seed, same prefix" use). A take recorded before this module
(no ``validity`` record) is judged by the whole segment key, as before.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from . import segments
from .audio_features import slice_features
from ..errors import SegmentInvalidError
from ..keys.key import ReuseKey, canonical_json, diff

RECORD_VERSION = 1
CHAINS = ("audio", "audio_features", "prompt")   # the per-segment inputs, in the order they are compared
LABELS = {"audio": "audio", "audio_features": "audio features", "prompt": "segment prompt"}
NONE = "none"


def audio_slice(audio, i: int, spec):
    """The AUDIO under segment i's F frames (zero-padded past the end of the track)."""
    if audio is None:
        return None
    wf, sr = audio["waveform"], int(audio["sample_rate"])
    a, b = segments.audio_window(i, spec.F, spec.M, spec.fps, sr)
    out = wf[..., a:b]
    if out.shape[-1] < b - a:  # past the end of the track: silence
        out = torch.nn.functional.pad(out, (0, b - a - out.shape[-1]))
    return {"waveform": out, "sample_rate": sr}


def _feed(h, v) -> None:
    """Canonical bytes of a value tree (tensors by dtype, shape and content)."""
    if isinstance(v, torch.Tensor):
        t = v.detach().to("cpu").contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(v, dict):
        h.update(b"{")
        for k in sorted(v, key=str):
            h.update(repr(str(k)).encode())
            _feed(h, v[k])
        h.update(b"}")
    elif isinstance(v, (list, tuple)):
        h.update(b"[")
        for x in v:
            _feed(h, x)
        h.update(b"]")
    else:
        h.update(repr(v).encode())


def prompt_chain(prompts, S: int) -> list[str]:
    return chain([prompt_line(lines, i) for lines in prompts] if prompts else None for i in range(S))


def value_digest(v) -> str:
    h = hashlib.sha256()
    _feed(h, v)
    return h.hexdigest()


def chain(windows) -> list[str]:
    """c_i = sha256(c_{i-1} | digest(window_i)); a None window digests as 'none'."""
    out, prev = [], ""
    for w in windows:
        d = NONE if w is None else value_digest(w)
        prev = hashlib.sha256(f"{prev}|{d}".encode()).hexdigest()
        out.append(prev)
    return out


@dataclass
class RequestValidity:
    """What this request's segments would consume: the static key and, per chain, c_0..c_{S-1}."""
    static: ReuseKey
    chains: dict = field(default_factory=dict)     # name -> [c_0 .. c_{S-1}]
    audio_source: ReuseKey | None = None           # the graph upstream of the loop's audio inputs
    track: str | None = None                       # digest of the whole audio track (None: no audio)


def prompt_line(lines: list[str], i: int) -> str:
    """Segment i's line of a Segment Prompt: line i, the last line for later segments ('' if none)."""
    return lines[min(i, len(lines) - 1)] if lines else ""


def request_validity(static: ReuseKey, spec, *, audio=None, audio_features=None,
                     audio_source: ReuseKey | None = None, prompts=()) -> RequestValidity:
    """``prompts``: the lines of each Segment Prompt of the loop (a list of line lists)."""
    S = spec.S
    chains = {"audio": chain(audio_slice(audio, i, spec) for i in range(S)),
              "audio_features": chain(None if audio_features is None else
                                      slice_features(audio_features, i, spec.F, spec.M, spec.fps)
                                      for i in range(S)),
              "prompt": prompt_chain(prompts, S)}
    track = None if audio is None else value_digest({"waveform": audio["waveform"],
                                                     "sample_rate": int(audio["sample_rate"])})
    return RequestValidity(static, chains, audio_source, track)


def record(req: RequestValidity, seed: int) -> dict:
    """The JSON record stored with a take (per kept boundary i: its key over segments 0..i)."""
    S = len(req.chains["audio"])
    segs = []
    for i in range(S):
        per = {name: req.chains[name][i] for name in CHAINS}
        key = hashlib.sha256(canonical_json({"static": req.static.digest, **per}).encode()).hexdigest()
        segs.append({"key": key, "seed": segments.segment_seed(seed, i), **per})
    return {"version": RECORD_VERSION, "static": req.static.to_dict(), "track": req.track,
            "audio_source": req.audio_source.to_dict() if req.audio_source is not None else None,
            "segments": segs}


@dataclass
class Mismatch:
    segment: int
    field: str
    cached: object
    current: object
    fields: list = field(default_factory=list)      # every differing static field (segment 0)

    def describe(self) -> str:
        def short(v):
            s = canonical_json(v) if v is not None else "<absent>"
            return s if len(s) <= 80 else s[:77] + "..."
        return f"{self.field}: cached {short(self.cached)} != current {short(self.current)}"


def static_mismatch(rec: dict, static: ReuseKey) -> Mismatch | None:
    cached = rec.get("static") or {}
    if cached.get("digest") == static.digest and cached.get("fields") == static.fields:
        return None
    diffs = diff(cached, static) or []
    if not diffs:
        return Mismatch(0, "(digest)", cached.get("digest"), static.digest)
    d = diffs[0]
    plain = lambda v: None if v is not None and type(v).__name__ == "object" else v   # noqa: E731
    return Mismatch(0, d.field, plain(d.cached), plain(d.current),
                    [{"field": x.field, "cached": plain(x.cached), "current": plain(x.current)} for x in diffs])


def _window_text(i: int, spec_F: int, spec_M: int) -> str:
    a = segments.segment_start(i, spec_F, spec_M)
    return f"frames [{a}, {a + spec_F})"


def first_invalid(rec: dict, req: RequestValidity, upto: int, F: int, M: int) -> Mismatch | None:
    """The first segment among 0..upto-1 whose inputs differ from the take's (None: all valid)."""
    m = static_mismatch(rec, req.static)
    if m is not None:
        return m
    segs = rec.get("segments") or []
    for i in range(min(upto, len(segs))):
        for name in CHAINS:
            cur = req.chains[name][i] if i < len(req.chains[name]) else None
            if segs[i].get(name) != cur:
                return Mismatch(i, f"{LABELS[name]} under segment {i} ({_window_text(i, F, M)})",
                                segs[i].get(name), cur)
    if upto > len(segs):
        return Mismatch(len(segs), "(segment count)", len(segs), upto)
    return None


def longest_valid(rec: dict, req: RequestValidity, limit: int, F: int, M: int) -> tuple[int, Mismatch | None]:
    """(n, the first mismatch or None): the most leading segments (<= limit) still valid."""
    m = first_invalid(rec, req, limit, F, M)
    return (limit, None) if m is None else (m.segment, m)


def ensure_valid(rec: dict, req: RequestValidity, N: int, *, cache_name: str, take: int, F: int, M: int) -> None:
    """Raise SegmentInvalidError naming the first invalid kept segment and its field."""
    m = first_invalid(rec, req, N, F, M)
    if m is None:
        return
    listed = "; ".join(f["field"] for f in m.fields[:8]) if m.fields else m.field
    raise SegmentInvalidError(
        f"cache '{cache_name}', take {take}: segment {m.segment} cannot be kept for "
        f"reuse_prefix_segments={N}: its inputs differ from this request's ({m.describe()})"
        + (f"; {len(m.fields)} static field(s) differ: {listed}" if len(m.fields) > 1 else ""),
        expected=f"segments 0..{N - 1} made from this request's inputs", actual=f"segment {m.segment}: {m.field}",
        fix=f"use reuse_prefix_segments={m.segment} (or -1: as many as are still valid)"
            if m.segment > 0 else "use reuse_prefix_segments=0 (nothing of this take is valid for this graph)",
        details={"take": take, "segment": m.segment, "field": m.field, "cached": m.cached,
                 "current": m.current, "fields": m.fields})


def dry_states(rec: dict | None, static: ReuseKey, audio_source: ReuseKey | None, count: int,
               prompts=()) -> list[dict]:
    """Per segment of a take, judged without running anything (the dry run): 'valid', 'invalid'
    (with the field: the static part, or a changed Segment Prompt line, known from the graph), or
    'run_time' (only the audio source changed: its samples are compared before the first sampling)."""
    if not rec:
        return [{"segment": i, "state": "unknown", "reason": "recorded before per-segment validity"}
                for i in range(count)]
    m = static_mismatch(rec, static)
    if m is not None:
        return [{"segment": i, "state": "invalid", "field": m.field} for i in range(count)]
    segs, pc = rec.get("segments") or [], prompt_chain(prompts, count)
    bad = next((i for i in range(count) if i >= len(segs) or segs[i].get("prompt") != pc[i]), count)
    same = (rec.get("audio_source") or {}).get("digest") == (audio_source.digest if audio_source else None)
    return [{"segment": i, "state": "invalid", "field": f"{LABELS['prompt']} under segment {bad}"} if i >= bad else
            {"segment": i, "state": "valid"} if same else
            {"segment": i, "state": "run_time", "reason": "the audio source changed: its samples under "
             "each segment are compared when the request runs, before any sampling"} for i in range(count)]
