"""The take history of one cache version: the ``takes`` section and its file names.

A committed version holds the last K successful takes of a segment run (K >= 1). The latest
take keeps the classic names (``result.mp4``, ``boundary_<i>.safetensors`` for i < S-1) plus
``tail_boundary.safetensors`` (the boundary of its last segment, so a longer request can
extend it); an older take ``k`` keeps ``take-<k>.result.mp4`` and
``take-<k>.boundary_<i>.safetensors``. All of them are listed in the manifest's ``files``
(sizes, sha256) like any other file, so the commit, the readers, crash recovery and check()
treat every take exactly like the latest one. Files of a take carried into the next version
are hard links: K takes cost the K result videos and their boundaries, never a copy, and the
encoder slots exist once per version.

``sections["takes"]`` = ``{"schema": 1, "takes": [record, ...]}``, newest first; a record is
``{"take": k, "result": file, "boundaries": {"<i>": file}, "segments": {...}}`` (``segments``:
the take's segment section). ``problems()`` validates it against the manifest (every named
file is listed; take numbers unique and positive); what the segments mean is media's business.
"""
from __future__ import annotations

from .. import settings

SECTION = "takes"
SCHEMA = 1
TAIL_BOUNDARY = "tail_boundary.safetensors"
RESULT = "result.mp4"
MAX_TAKES = settings.MAX_KEEP_TAKES     # the bound of the index and of SEEDREUSE_KEEP_TAKES
RECORD_KEYS = frozenset({"take", "result", "boundaries", "segments"})


TAKE_PREFIX = "take-"       # the files of the older kept takes, and only those


def is_kept_take_file(fname: str) -> bool:
    """A file that only an older kept take uses (the latest take keeps the classic names)."""
    return fname.startswith(TAKE_PREFIX)


def result_file(take: int) -> str:
    return f"{TAKE_PREFIX}{int(take):06d}.result.mp4"


def boundary_file(take: int, i: int) -> str:
    return f"{TAKE_PREFIX}{int(take):06d}.boundary_{int(i):05d}.safetensors"


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def problems(manifest: dict) -> list[str]:
    """What is wrong with the version's take index (empty: fine, or no index at all)."""
    body = (manifest.get("sections") or {}).get(SECTION)
    if body is None:
        return []
    if not isinstance(body, dict) or body.get("schema") != SCHEMA or not isinstance(body.get("takes"), list):
        return [f"sections.takes is not a take index of schema {SCHEMA}"]
    files, out, seen = manifest.get("files") or {}, [], set()
    if not body["takes"] or len(body["takes"]) > MAX_TAKES:
        out.append(f"sections.takes lists {len(body['takes'])} takes (1..{MAX_TAKES} expected)")
    for n, rec in enumerate(body["takes"]):
        where = f"sections.takes[{n}]"
        if not isinstance(rec, dict) or set(rec) != RECORD_KEYS:
            out.append(f"{where} has the wrong keys (expected {sorted(RECORD_KEYS)})")
            continue
        if not _int(rec["take"]) or rec["take"] < 1 or rec["take"] in seen:
            out.append(f"{where}.take is not a new positive integer: {rec['take']!r}")
        seen.add(rec["take"])
        named = [rec["result"]] + list((rec["boundaries"] or {}).values()) \
            if isinstance(rec["boundaries"], dict) else None
        if named is None or not isinstance(rec["segments"], dict):
            out.append(f"{where}: boundaries and segments must be objects")
            continue
        for i in rec["boundaries"]:
            if not (isinstance(i, str) and i.isdigit()):
                out.append(f"{where}.boundaries has a non-index key {i!r}")
        for f in named:
            if not isinstance(f, str) or f not in files:
                out.append(f"{where} names {f!r}, which the manifest does not list")
    return out


def records(manifest: dict) -> list[dict] | None:
    """The take records, newest first (None: a version without a take index, or a broken one)."""
    if problems(manifest):
        return None
    body = (manifest.get("sections") or {}).get(SECTION)
    return None if body is None else body["takes"]
