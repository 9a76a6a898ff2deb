"""The soak's model of a segment cache's take history (used by tests/soak/soak.py).

The pack keeps the latest successful take and up to K-1 older ones (K: SEEDREUSE_KEEP_TAKES in
the workers' environment, default 3; reuse_backend/media/segment_takes.py). ``TakeModel`` holds,
newest first, what every kept take must still be: its number, segment count, seed, result video
(a copy, its sha256 and its audio packets' digest) and the sha256 of each of its boundaries
(0..S-2 and the tail S-1).

Invariants, enforced where they are written:

* a failed / interrupted / killed-before-commit request changes no take: the soak compares the
  whole committed manifest byte for byte (``Soak._expect_unchanged``, ``_classify_kill``), the
  take index included;
* a success (also a kill after the commit) publishes take ``max(kept) + 1`` as the latest, keeps
  the K-1 newest takes before it unchanged (same numbers, segment counts, result and boundary
  sha256) and drops the rest (``check_takes``);
* its boundaries 0..N-1 are the chosen take's (same sha256: carried, not recomputed), it holds
  boundaries 0..S'-2 plus the tail, and its segment section names the chosen take
  (``check_takes``); its first P(N) frames are the chosen take's bit-exactly and its audio is the
  encoding of its own track (``Soak._verify_video``, with ``expected_audio``);
* the N a request uses is the one it asked for, or for -1 the longest valid prefix ``predict``
  computes: every committed take of the soak has the same static key and the same sine under its
  segments (a longer track only adds samples after the end of the shorter one), so segments
  0..min(S, S') - 1 of a take are valid for a request of S' segments, and a request generates
  at least one segment: N = min(S' - 1, S).

The request kinds planned here (``plan``): ``extend`` (N = S of the chosen take, S' = S + 1 or
S + 2, at most SMAX), ``longest`` (N = -1, S' drawn in S_BASE..SMAX, the latest or an older take)
and ``from_take`` (an older kept take, N in 1..min(S, S' - 1)).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reuse_backend.media import segments as segmod
from reuse_backend.media import video
from reuse_backend import settings
from reuse_backend.media.segment_takes import DEFAULT_KEEP

ENV_KEEP = settings.KEEP_TAKES
from reuse_backend.store.take_index import MAX_TAKES, TAIL_BOUNDARY

VARIANTS = ("extend", "longest", "from_take")
SMAX = 6                  # the longest take the soak makes (P(6) = 39 frames at F=9, M=3)
SR, FREQ = 16000, 330.0   # the sine segment_graph feeds the loop (SeedReuseTestSineAudio)


class SoakFailure(AssertionError):
    pass


class TakeCorruption(SoakFailure):
    """A success whose committed takes are not what the model says (a corruption, not a slip)."""


def fleet_keep(workers) -> int:
    """K as the workers' segment_takes.keep_takes() reads it (their env: os.environ + their own)."""
    raws = {str((getattr(w, "env", None) or {}).get(ENV_KEEP, os.environ.get(ENV_KEEP, ""))) for w in workers}
    if len(raws) != 1:
        raise SoakFailure(f"the workers run with different {ENV_KEEP}: {sorted(raws)}")
    try:
        v = int(raws.pop())
    except ValueError:
        return DEFAULT_KEEP
    return v if 1 <= v <= MAX_TAKES else DEFAULT_KEEP


@dataclass
class TakeRec:
    number: int
    segments: int
    seed: int | None
    result_copy: Path
    result_sha: str
    boundary_sha: dict = field(default_factory=dict)   # i -> sha256 (0..segments-1; segments-1: the tail)
    audio: str | None = None                          # audio packets digest of its result


def records(manifest: dict) -> list[dict]:
    """The take records of a committed version, newest first, each with its segment section."""
    body = (manifest.get("sections") or {}).get("takes")
    if body is None:
        raise SoakFailure("the committed segment version has no take index (sections.takes)")
    out = []
    for rec in body.get("takes") or []:
        seg = rec.get("segments") or {}
        if seg == {"in_section": "segments"}:
            seg = manifest["sections"].get("segments") or {}
        out.append(dict(rec, segments=seg))
    return out


def take_from_manifest(manifest: dict, rec: dict, copy: Path) -> TakeRec:
    files = manifest["files"]
    return TakeRec(int(rec["take"]), int(rec["segments"]["spec"]["S"]), rec["segments"].get("seed"), copy,
                   files[rec["result"]]["sha256"],
                   {int(i): files[f]["sha256"] for i, f in rec["boundaries"].items()},
                   video.audio_packets_digest(str(copy)))


class TakeModel:
    def __init__(self, keep: int, F: int, M: int, fps: float, out: Path):
        self.keep, self.F, self.M, self.fps, self.out = keep, F, M, fps, Path(out)
        self.takes: list[TakeRec] = []
        self._audio: dict[int, str] = {}

    @property
    def latest(self) -> TakeRec | None:
        return self.takes[0] if self.takes else None

    def find(self, number: int) -> TakeRec | None:
        return self.latest if not number else next((t for t in self.takes if t.number == number), None)

    def next_number(self) -> int:
        return max((t.number for t in self.takes), default=0) + 1

    def expected_numbers(self) -> list[int]:
        """The take numbers a success publishes: the new one, then the K-1 newest kept ones."""
        return [self.next_number()] + [t.number for t in self.takes[:self.keep - 1]]

    def P(self, n: int) -> int:
        return segmod.prefix_frames(n, self.F, self.M)

    # ---------------------------------------------------------------- planning / prediction
    def predict(self, segments: int, N: int, from_take: int) -> tuple[TakeRec | None, int, str]:
        """(the chosen take, the N the pack will use, a rejection reason or "")."""
        take = self.find(from_take) if N else None
        if N and from_take and take is None:
            return None, N, "take not kept"
        if N == -1:
            return take, (0 if take is None else min(segments - 1, take.segments)), ""
        if N > 0 and take is None:
            return None, N, "no committed cache"
        if N > 0 and (N > take.segments or N >= segments):
            return take, N, "N out of range"
        return take, N, ""

    def plan(self, kind: str, rng) -> tuple[int, int, int] | None:
        """(segments S', N, from_take) for a request of ``kind``; None if the kept takes allow none."""
        older = self.takes[1:]
        if kind == "extend":
            cands = [t for t in self.takes if t.segments < SMAX]
            if not cands:
                return None
            # mostly the latest take (the usual "make it longer"); sometimes a kept older one
            t = cands[0] if cands[0] is self.latest and rng.random() < 0.75 else rng.choice(cands)
            grow = rng.choice([d for d in (1, 2) if t.segments + d <= SMAX])
            return t.segments + grow, t.segments, (0 if t is self.latest else t.number)
        if kind == "longest":
            if not self.takes:
                return None
            t = self.latest if not older or rng.random() < 0.6 else rng.choice(older)
            return rng.randint(4, SMAX), -1, (0 if t is self.latest else t.number)
        if kind == "from_take":
            if not older:
                return None
            t = rng.choice(older)
            segs = rng.choice([4, 4, min(SMAX, t.segments + 1)])
            return segs, rng.randint(1, min(t.segments, segs - 1)), t.number
        raise ValueError(kind)

    # ---------------------------------------------------------------- verification
    def expected_audio(self, segments: int) -> str:
        """The audio packets Prefix Merge writes when it encodes the sine of P(S') frames (the
        encoder is deterministic; the packets do not depend on the video)."""
        if segments not in self._audio:
            frames = self.P(segments)
            n = int(round(frames / self.fps * SR))
            t = np.arange(n, dtype=np.float64) / SR
            wave = (0.5 * np.sin(2 * np.pi * FREQ * t)).astype(np.float32).reshape(1, n)
            d = self.out / "audio-reference"
            d.mkdir(parents=True, exist_ok=True)
            chunk, ref = d / f"chunk_{segments}.mp4", d / f"ref_{segments}.mp4"
            video.write_chunk(chunk, np.zeros((2, 16, 16, 3), np.uint8), self.fps)
            video.merge(ref, chunks=[chunk], audio=("encode", wave, SR), fps=self.fps)
            self._audio[segments] = video.audio_packets_digest(str(ref))
        return self._audio[segments]

    def check_takes(self, actual: dict, *, segments: int, N: int, chosen: TakeRec | None) -> list[dict]:
        """The take index of a success (see the module docstring); returns its records."""
        recs = records(actual)
        files = actual["files"]
        got = [r["take"] for r in recs]
        if got != self.expected_numbers():
            raise TakeCorruption(f"kept takes {got} != {self.expected_numbers()} "
                              f"(new take + the {self.keep - 1} newest of {[t.number for t in self.takes]}, K={self.keep})")
        new = recs[0]
        if new["result"] != "result.mp4":
            raise SoakFailure(f"the latest take's result is {new['result']}, not result.mp4")
        want = {str(i) for i in range(segments)}
        if set(new["boundaries"]) != want or new["boundaries"].get(str(segments - 1)) != TAIL_BOUNDARY:
            raise SoakFailure(f"new take's boundaries {sorted(new['boundaries'])} != 0..{segments - 1} (tail last)")
        sec = new["segments"]
        src = chosen.number if N > 0 else None
        if sec.get("take") != new["take"] or sec.get("source_take") != src:
            raise SoakFailure(f"segment section take/source_take {sec.get('take')}/{sec.get('source_take')} "
                              f"!= {new['take']}/{src}")
        for i in range(N):   # the kept prefix's boundaries are the chosen take's, bit for bit
            if files[new["boundaries"][str(i)]]["sha256"] != chosen.boundary_sha[i]:
                raise TakeCorruption(f"boundary {i} differs from take {chosen.number}'s boundary {i}")
        for rec, old in zip(recs[1:], self.takes):
            same = (files[rec["result"]]["sha256"] == old.result_sha and int(rec["segments"]["spec"]["S"]) == old.segments
                    and {int(i): files[f]["sha256"] for i, f in rec["boundaries"].items()} == old.boundary_sha)
            if not same:
                raise TakeCorruption(f"kept take {old.number} changed (result, segment count or boundaries)")
        return recs

    def commit(self, actual: dict, recs: list[dict], copy: Path) -> TakeRec:
        """The model after a checked success: the new take first, the K-1 newest before it kept."""
        new = take_from_manifest(actual, recs[0], copy)
        self.takes = [new] + self.takes[:self.keep - 1]
        return new

    def resync(self, actual: dict | None, store, name: str, tag: str) -> None:
        """Take the committed takes as they are (after a violation); ``store``: the soak's view
        of the cache (folder_view.FolderView, bucket_view.BucketView)."""
        self.takes = []
        if actual is None or "takes" not in (actual.get("sections") or {}):
            return
        for rec in records(actual):
            copy = self.out / f"resync_{tag}_take{rec['take']}.mp4"
            store.copy(name, rec["result"], copy)
            self.takes.append(take_from_manifest(actual, rec, copy))
