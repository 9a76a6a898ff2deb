"""Take history of a segment cache: the last K successful takes, any of which a request may resume.

Layout and file names: store/take_index.py. Here: what a take is for Segment Reuse (its
segment section, result video and boundaries), reading the takes of a version (a version
written before take history is one take: the classic ``segments`` section, ``result.mp4`` and
boundaries), choosing the take a request resumes from, carrying the kept takes into the new
version (hard links, renamed to the take's own names when the latest becomes an older take),
and writing the new index. Invariant: the chain stays serial and transactional: the kept
takes and the new take are published by one commit, so a failed request changes no take.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from .. import settings
from ..errors import CorruptCacheError, InvalidRequestError
from ..storage import fsops, serialize
from ..store import manifest as mf
from ..store import take_index
from ..store.take_index import RESULT, TAIL_BOUNDARY

log = logging.getLogger("seedreuse")
SECTION = "segments"
DEFAULT_KEEP = settings.DEFAULT_KEEP_TAKES
IN_SECTION = {"in_section": SECTION}     # a take record's segments: the version's segment section


def keep_takes() -> int:
    """K, the successful takes a cache keeps (``SEEDREUSE_KEEP_TAKES``, settings.py); 1 is the single
    latest-success chain of before."""
    return settings.keep_takes()


@dataclass
class Take:
    number: int
    result: str                                    # file name of its result video in the version
    boundaries: dict = field(default_factory=dict)  # int i -> file name of boundary i
    section: dict = field(default_factory=dict)     # its segment section (key, spec, seed, validity, ...)
    latest: bool = False
    damaged: str | None = None                      # why it cannot be used (a file of it is damaged)

    @property
    def segments(self) -> int:
        return int((self.section.get("spec") or {}).get("S") or 0)

    @property
    def validity(self) -> dict | None:
        return self.section.get("validity")

    def to_record(self) -> dict:
        return {"take": self.number, "result": self.result, "segments": self.section,
                "boundaries": {str(i): f for i, f in sorted(self.boundaries.items())}}


def section_of(m: dict, rec: dict) -> dict:
    """A take record's segment section: the latest take's is the version's ``sections.segments``
    (stored once; its record says IN_SECTION), an older take's is in its record."""
    seg = rec.get("segments")
    if seg == IN_SECTION:
        seg = (m.get("sections") or {}).get(SECTION)
    return seg if isinstance(seg, dict) else {}


def read_takes(base) -> list[Take]:
    """The takes of a committed version, newest first ([] when it holds no segment run)."""
    if base is None:
        return []
    m = base.manifest
    recs = take_index.records(m)
    if recs is not None:   # the latest take's section is the version's segment section (stored once)
        takes = [Take(r["take"], r["result"], {int(i): f for i, f in r["boundaries"].items()},
                      section_of(m, r), latest=(n == 0)) for n, r in enumerate(recs)]
        damaged = getattr(base, "damaged", None) or {}
        for t in takes:      # a damaged file of an older take disables that take alone (reader.py)
            bad = [f for f in [t.result, *t.boundaries.values()] if f in damaged]
            if bad:
                t.damaged = f"{bad[0]}: {damaged[bad[0]]}"
        return takes
    section = (m.get("sections") or {}).get(SECTION)
    if not section or RESULT not in (m.get("files") or {}):
        return []
    bounds = {int(i): e["file"] for i, e in (m.get("boundaries") or {}).items()}
    if TAIL_BOUNDARY in m["files"]:
        bounds[int((section.get("spec") or {}).get("S", 1)) - 1] = TAIL_BOUNDARY
    return [Take(int(section.get("take") or 1), RESULT, bounds, section, latest=True)]


def choose(takes: list[Take], from_take: int, cache_name: str) -> Take | None:
    """``from_take`` 0: the latest take; k > 0: the take numbered k (typed error if not kept)."""
    if not from_take:
        return takes[0] if takes else None
    for t in takes:
        if t.number == from_take:
            if t.damaged:
                raise CorruptCacheError(
                    f"cache '{cache_name}': take {from_take} is damaged ({t.damaged})",
                    expected="every file of the take intact", actual=t.damaged,
                    fix=f"pick another kept take (the dry run lists them) or 0 for the latest; the next "
                        f"take of this cache drops take {from_take} (python -m reuse_backend check "
                        f"{cache_name} lists what is damaged)",
                    details={"cache": cache_name, "from_take": from_take})
            return t
    raise InvalidRequestError(
        f"cache '{cache_name}' keeps no take {from_take}",
        expected=f"one of the kept takes {[t.number for t in takes] or '(none)'}, or 0 for the latest",
        actual=from_take, fix="pick a take the dry run lists (POST /seedreuse/check), or 0 for the latest",
        details={"cache": cache_name, "from_take": from_take, "kept": [t.number for t in takes]})


def next_number(takes: list[Take]) -> int:
    return max((t.number for t in takes), default=0) + 1


def carry_prefix(tx, take: Take, N: int, F: int, M: int) -> None:
    """Boundaries 0..N-1 of the chosen take become boundaries 0..N-1 of the new take."""
    for i in range(N):
        src = take.boundaries[i]
        if src == mf.boundary_file(i):
            tx.carry_boundary(i)
        else:
            tx.carry_boundary(i, src=src, meta={"index": i, "F": F, "M": M})


def carry_history(tx, takes: list[Take], keep: int) -> list[dict]:
    """Carry the newest ``keep`` takes of the base into the new version under their own names
    (the latest one's classic names become take-<k>.* names); returns their records."""
    out = []
    for t in [t for t in takes if not t.damaged][:max(0, keep)]:   # a damaged take is dropped
        if t.latest:
            result = take_index.result_file(t.number)
            tx.carry_file(result, src=t.result)
            bounds = {}
            for i, src in sorted(t.boundaries.items()):
                bounds[i] = take_index.boundary_file(t.number, i)
                tx.carry_file(bounds[i], src=src)
            t = Take(t.number, result, bounds, t.section)
        else:
            tx.carry_file(t.result)
            for src in t.boundaries.values():
                tx.carry_file(src)
        out.append(t.to_record())
    return out


def stage_tail_boundary(tx, value) -> None:
    """The last segment's boundary (not a manifest boundary: segment S consumes it when a longer
    request extends this take)."""
    path = tx.stage_path(TAIL_BOUNDARY)
    with tx.writing(f"write {TAIL_BOUNDARY}"):
        # created through the hook point, with the cache's file mode, as every staged file is
        with os.fdopen(fsops.open_exclusive(path, tx.cache.file_mode), "wb") as f:
            serialize.dump_value(fsops.HookedWriter(f, path), value)
    tx.add_file(TAIL_BOUNDARY)


def new_take_boundaries(S: int, has_tail: bool) -> dict:
    bounds = {i: mf.boundary_file(i) for i in range(S - 1)}
    if has_tail:
        bounds[S - 1] = TAIL_BOUNDARY
    return bounds


def publish_index(tx, new: Take, kept: list[dict]) -> None:
    """The new version's take index: the new take first, then the kept ones."""
    rec = dict(new.to_record(), segments=IN_SECTION)     # its section is sections.segments
    tx.set_section(take_index.SECTION, {"schema": take_index.SCHEMA, "takes": [rec] + kept})
