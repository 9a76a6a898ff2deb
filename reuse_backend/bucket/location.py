"""Where a cache lives in an object store, and the object keys of one cache.

A location is ``s3://<bucket>/<prefix>`` (``SEEDREUSE_CACHE_URL``) with the namespace folders
the folder store uses appended (``/.users/<user>``, ``/.auto``). One cache ``<name>`` owns the
keys under ``<prefix>/<name>/``:

    log/<seq, 20 digits>.json    commit records, created once each (If-None-Match: *); the highest
                                 is the cache's current state (records.py, log.py); numbers are
                                 1..MAX_SEQ, a key out of range is foreign (ignored, reported)
    data/<run id>/<sha256>       immutable data objects, named by the run that uploaded them and
                                 their content hash; a record names them relative to the cache
    leases/<run id>.json         a run's lease (heartbeat: its LastModified, the server's clock)
    readers/<id>.json            a reader's lease while it downloads (collect.py keeps its version)
    claims/<slot>-<digest>.json  a single-flight claim; ``.entry.json`` beside it: its encoding
    used/<host id>               last use of the cache by one host (the size budget's LRU order)

Invariant (no key outside the cache): every key the store reads or deletes is built here from a
validated location, a validated cache name and validated parts; a key found in a listing or a
record is accepted only when it parses back into those parts (``seq_of``, ``parse_data``,
``parse_lease``, ``parse_claim``), so a record naming ``../other`` or another namespace's object
is refused, never followed, and a key someone else put under ``leases/`` or ``claims/`` (a
console's zero-byte folder marker, a note) is nobody's run: never fenced, judged or deleted.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..errors import InvalidRequestError
from ..store import roots

SCHEME = "s3://"
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]{1,128}\Z")
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
SHA = re.compile(r"[0-9a-f]{64}\Z")
DATA_REL = re.compile(r"data/(?P<run>[A-Za-z0-9_-]{1,64})/(?P<sha>[0-9a-f]{64})\Z")
SEQ_DIGITS = 20
ENTRY_SUFFIX = ".entry.json"
MAX_SEQ = 10 ** 18 - 1          # keys keep 20 digits (their order); a larger number is not ours
_LEASE_TAIL = re.compile(r"(?P<run>[A-Za-z0-9_-]{1,64})\.json\Z")
_CLAIM_TAIL = re.compile(r"[A-Za-z0-9_-]{1,64}-[A-Za-z0-9]{1,32}(\.entry)?\.json\Z")


def _bad(url, why: str) -> InvalidRequestError:
    return InvalidRequestError(f"invalid object-store location {url!r}: {why}",
                               expected="s3://<bucket>/<prefix>, e.g. s3://my-bucket/seedreuse",
                               actual=repr(url), fix="set SEEDREUSE_CACHE_URL=s3://<bucket>/<prefix> "
                               "(bucket: 3-63 lowercase letters, digits, '.', '-'; prefix: plain folder names)")


@dataclass(frozen=True)
class Location:
    bucket: str
    prefix: str          # "" or "a/b/": always ends with "/" when not empty

    @property
    def url(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}".rstrip("/")

    def child(self, segment: str) -> "Location":
        if not _SEGMENT.fullmatch(segment) or segment in (".", ".."):
            raise _bad(f"{self.url}/{segment}", f"{segment!r} is not a plain folder name")
        return Location(self.bucket, f"{self.prefix}{segment}/")

    def cache(self, name: str) -> "CacheKeys":
        return CacheKeys(self, roots.validate_cache_name(name))

    def store_id(self) -> str:
        """Names this bucket's local tier folder (one per bucket, all prefixes and namespaces)."""
        return hashlib.sha256(self.bucket.encode()).hexdigest()[:16]


def parse(url) -> Location:
    if not isinstance(url, str) or not url.startswith(SCHEME):
        raise _bad(url, f"it does not start with {SCHEME}")
    rest = url[len(SCHEME):].rstrip("/")
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise _bad(url, f"{bucket!r} is not a bucket name")
    loc = Location(bucket, "")
    for seg in (prefix.split("/") if prefix else []):
        if seg == "":
            raise _bad(url, "empty folder name (//) in the prefix")
        loc = loc.child(seg)
    return loc


def _folder(name: str) -> property:
    """The key prefix of one folder of a cache, ``<base><name>/`` (each folder named once here)."""
    return property(lambda keys: f"{keys.base}{name}/", doc=f"the prefix of the cache's {name}/ folder")


@dataclass(frozen=True)
class CacheKeys:
    loc: Location
    name: str

    log_prefix = _folder("log")
    data_prefix = _folder("data")
    lease_prefix = _folder("leases")
    reader_prefix = _folder("readers")
    claim_prefix = _folder("claims")
    used_prefix = _folder("used")

    @property
    def base(self) -> str:
        return f"{self.loc.prefix}{self.name}/"

    def log(self, seq: int) -> str:
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_SEQ:
            raise ValueError(f"log sequence out of range: {seq!r}")
        return f"{self.log_prefix}{seq:0{SEQ_DIGITS}d}.json"

    def seq_of(self, key: str) -> int | None:
        """The sequence number of a log key of this cache (None: not one)."""
        if not key.startswith(self.log_prefix):
            return None
        tail = key[len(self.log_prefix):]
        if len(tail) != SEQ_DIGITS + 5 or not tail.endswith(".json") or not tail[:SEQ_DIGITS].isdigit():
            return None
        seq = int(tail[:SEQ_DIGITS])
        return seq if 1 <= seq <= MAX_SEQ else None

    def data_rel(self, run_id: str, sha: str) -> str:
        if not RUN_ID.fullmatch(run_id) or not SHA.fullmatch(sha):
            raise ValueError(f"bad data object name parts: {run_id!r}, {sha!r}")
        return f"data/{run_id}/{sha}"

    def data(self, rel: str) -> str:
        """The key of a data object named relative to the cache (validated: never outside it)."""
        if not isinstance(rel, str) or not DATA_REL.fullmatch(rel):
            raise ValueError(f"not a data object of this cache: {rel!r}")
        return f"{self.base}{rel}"

    def parse_data(self, key: str) -> tuple[str, str] | None:
        """(run id, sha256) of a data key of this cache, or None."""
        if not key.startswith(self.base):
            return None
        m = DATA_REL.fullmatch(key[len(self.base):])
        return (m["run"], m["sha"]) if m else None

    def parse_lease(self, key: str) -> str | None:
        """The run id of a run lease key of this cache (``leases/<run id>.json``), or None."""
        if not key.startswith(self.lease_prefix):
            return None
        m = _LEASE_TAIL.fullmatch(key[len(self.lease_prefix):])
        return m["run"] if m else None

    def parse_reader(self, key: str) -> str | None:
        """The id of a reader lease key of this cache (``readers/<id>.json``), or None."""
        if not key.startswith(self.reader_prefix):
            return None
        m = _LEASE_TAIL.fullmatch(key[len(self.reader_prefix):])
        return m["run"] if m else None

    def parse_claim(self, key: str) -> bool:
        """Whether ``key`` is a claim or an entry key of this cache."""
        return key.startswith(self.claim_prefix) and bool(_CLAIM_TAIL.fullmatch(key[len(self.claim_prefix):]))

    def lease(self, run_id: str) -> str:
        if not RUN_ID.fullmatch(run_id):
            raise ValueError(f"bad run id {run_id!r}")
        return f"{self.lease_prefix}{run_id}.json"

    def reader(self, reader_id: str) -> str:
        return f"{self.reader_prefix}{reader_id}.json"

    def claim(self, slot: str, digest: str) -> str:
        roots.validate_slot_name(slot)
        tail = "".join(c for c in str(digest) if c.isalnum())[:32] or "nokey"
        return f"{self.claim_prefix}{slot}-{tail}.json"

    def entry(self, slot: str, digest: str) -> str:
        return self.claim(slot, digest)[:-len(".json")] + ENTRY_SUFFIX

    def used(self, host_id: str) -> str:
        return f"{self.used_prefix}{host_id}"
