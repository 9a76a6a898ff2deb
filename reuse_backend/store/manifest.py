"""The manifest of one committed cache version: schema and strict validation.

JSON only (never pickle).  Exact key sets: an unknown or missing key is a
``CorruptCacheError``, so a manifest written by a newer/older schema is refused rather
than half understood.
"""
from __future__ import annotations

import json
import math
import re

from ..storage import strict_json
from . import roots
from ..errors import CorruptCacheError, InvalidCacheNameError

SCHEMA = "seedreuse-cache/1"
MANIFEST = "manifest.json"
STAGING = "STAGING.json"
RESERVED = frozenset({MANIFEST, STAGING})
MAX_MANIFEST_BYTES = 4 << 20
MAX_BOUNDARY = 99999

TOP_KEYS = frozenset({"schema", "name", "version", "created_at", "run", "slots", "boundaries",
                      "sections", "files"})
RUN_KEYS = frozenset({"run_id", "host", "pid", "prompt_id", "extra"})
SLOT_KEYS = frozenset({"file", "key", "meta"})
BOUNDARY_KEYS = frozenset({"file", "meta"})
FILE_KEYS = frozenset({"bytes", "sha256"})
_VERSION = re.compile(r"[0-9a-f]{32}\Z")
_SHA = re.compile(r"[0-9a-f]{64}\Z")
_BOUNDARY = re.compile(r"(0|[1-9][0-9]{0,4})\Z")


def slot_file(slot: str) -> str:
    return f"slot_{slot}.safetensors"


def boundary_file(i: int) -> str:
    return f"boundary_{i:05d}.safetensors"


def _bad(what: str, *, expected=None, actual=None) -> CorruptCacheError:
    return CorruptCacheError(f"invalid manifest: {what}", expected=expected, actual=actual,
                             fix="this cache version cannot be used; clear it "
                                 "(python -m reuse_backend clear NAME --yes) and rerun")


def _brief(v, limit: int = 120) -> str:
    return strict_json.brief(v, limit)


def _keys(obj, keys: frozenset, where: str) -> dict:
    if type(obj) is not dict:
        raise _bad(f"{where} must be an object", expected="object", actual=type(obj).__name__)
    have = set(obj)
    if have != keys:
        missing, extra = sorted(keys - have), sorted(have - keys)
        raise _bad(f"{where} has the wrong keys", expected=sorted(keys),
                   actual=f"missing {missing}, unknown {extra}")
    return obj


def _typed(v, types, where: str):
    if isinstance(v, bool) and bool not in types or not isinstance(v, types):
        raise _bad(f"{where} has the wrong type", expected=" | ".join(t.__name__ for t in types),
                   actual=f"{type(v).__name__} {_brief(v)}")
    return v


def _name(fn, v, where: str) -> str:
    try:
        return fn(v)
    except InvalidCacheNameError as e:
        raise _bad(f"{where}: {e.message}", expected=e.expected, actual=e.actual) from None


def validate(m, *, name: str | None = None) -> dict:
    """Validate a parsed manifest; returns it unchanged or raises CorruptCacheError."""
    _keys(m, TOP_KEYS, "manifest")
    if m["schema"] != SCHEMA:
        raise _bad("unsupported schema", expected=SCHEMA, actual=_brief(m["schema"]))
    _name(roots.validate_cache_name, _typed(m["name"], (str,), "name"), "name")
    if name is not None and m["name"] != name:
        raise _bad("manifest belongs to another cache", expected=name, actual=m["name"])
    if not isinstance(m["version"], str) or not _VERSION.match(m["version"]):
        raise _bad("version must be a uuid4 hex", expected="32 lowercase hex digits",
                   actual=_brief(m["version"]))
    ts = _typed(m["created_at"], (float, int), "created_at")
    if not math.isfinite(ts) or ts < 0:
        raise _bad("created_at out of range", expected="a unix time", actual=ts)

    run = _keys(m["run"], RUN_KEYS, "run")
    _typed(run["run_id"], (str,), "run.run_id")
    _typed(run["host"], (str,), "run.host")
    _typed(run["pid"], (int,), "run.pid")
    if run["prompt_id"] is not None:
        _typed(run["prompt_id"], (str,), "run.prompt_id")
    _typed(run["extra"], (dict,), "run.extra")

    files = _typed(m["files"], (dict,), "files")
    for fname, entry in files.items():
        _name(roots.validate_file_name, fname, "files")
        if fname in RESERVED:
            raise _bad(f"files lists the reserved name {fname!r}", expected="a data file",
                       actual=fname)
        _keys(entry, FILE_KEYS, f"files[{fname!r}]")
        n = _typed(entry["bytes"], (int,), f"files[{fname!r}].bytes")
        if n < 0:
            raise _bad(f"files[{fname!r}].bytes is negative", expected=">= 0", actual=n)
        if not isinstance(entry["sha256"], str) or not _SHA.match(entry["sha256"]):
            raise _bad(f"files[{fname!r}].sha256 is not a sha256", expected="64 lowercase hex",
                       actual=_brief(entry["sha256"]))

    used: dict[str, str] = {}

    def ref(fname, where: str, want: str) -> None:
        _typed(fname, (str,), f"{where}.file")
        _name(roots.validate_file_name, fname, f"{where}.file")
        if fname != want:
            raise _bad(f"{where}.file has an unexpected name", expected=want, actual=fname)
        if fname not in files:
            raise _bad(f"{where}.file is not listed in files", expected=f"{fname!r} in files",
                       actual=sorted(files)[:20])
        if fname in used:
            raise _bad(f"{fname!r} is referenced twice", expected="one owner",
                       actual=f"{used[fname]} and {where}")
        used[fname] = where

    for slot, entry in _typed(m["slots"], (dict,), "slots").items():
        _name(roots.validate_slot_name, slot, "slots")
        _keys(entry, SLOT_KEYS, f"slots[{slot!r}]")
        ref(entry["file"], f"slots[{slot!r}]", slot_file(slot))
        _typed(entry["key"], (dict,), f"slots[{slot!r}].key")
        _typed(entry["meta"], (dict,), f"slots[{slot!r}].meta")

    for idx, entry in _typed(m["boundaries"], (dict,), "boundaries").items():
        if not _BOUNDARY.match(idx):
            raise _bad("boundary index must be a decimal integer", expected=f"'0'..'{MAX_BOUNDARY}'",
                       actual=_brief(idx))
        _keys(entry, BOUNDARY_KEYS, f"boundaries[{idx}]")
        ref(entry["file"], f"boundaries[{idx}]", boundary_file(int(idx)))
        _typed(entry["meta"], (dict,), f"boundaries[{idx}].meta")

    for sec, body in _typed(m["sections"], (dict,), "sections").items():
        _name(roots.validate_slot_name, sec, "sections")
        _typed(body, (dict,), f"sections[{sec!r}]")
    return m


def parse(data: bytes, *, name: str | None = None) -> dict:
    """Parse and validate manifest bytes (size capped, strict JSON, no NaN, no duplicate keys)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise _bad("manifest.json is too large", expected=f"<= {MAX_MANIFEST_BYTES} bytes",
                   actual=f"{len(data)} bytes")
    try:
        m = strict_json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _bad(f"manifest.json is not valid JSON ({e})".replace("\n", " ")[:300],
                   expected="a JSON object", actual=_brief(data[:60])) from None
    return validate(m, name=name)


def dumps(m: dict) -> bytes:
    """Serialize (after validating) a manifest; refuses anything the reader would refuse."""
    try:
        data = json.dumps(m, indent=1, sort_keys=True, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise _bad(f"manifest is not plain JSON ({e})", expected="JSON values",
                   actual="unserializable value") from None
    parse(data, name=m.get("name"))
    return data
