"""The local read-through tier of a bucket on this host, under ``SEEDREUSE_CACHE_ROOT``.

``<root>/.bucket/<bucket id>/``:

    blobs/<sha[:2]>/<sha256>   files this host already fetched (or uploaded), by content hash;
                               shared by every cache, prefix and namespace of the bucket
    records/<cache id>.json    the newest commit record this host read of each cache, with the
                               ETag it had (log.Head)
    staging/<cache id>/<id>/   the staging of this host's running runs (store/staging.py)

A hit on a version this host holds (its record here, every file in blobs/) costs one LIST to
confirm the record is still there as it was and still the newest (log.py ``look``: a record the
bucket no longer holds, after a wipe or a switch of store, is dropped, never served), then local
reads only. A first hit downloads only the
files the prompt loads, each streamed to a temp name in chunks (bounded memory), fsynced, its
size and sha256 checked against the record, then renamed into place: a blob is complete and of
the right content, or absent.

Invariant (the tier never decides what is current): it holds copies; the bucket's log says which
version is current, and a blob is used only for a file whose sha256 the current record names.
The tier is bounded by ``SEEDREUSE_LOCAL_TIER_BYTES`` (default 20 GiB): least recently used blobs
are removed (a blob open in a snapshot stays readable: its descriptor is pinned). A fetch that
finds the disk full trims the tier and tries once more, then fails with ``StorageFullError``.

Invariant (a run's local staging is removed only when its process is provably gone): STAGING.json
names host, pid, pid start time and pid namespace; the sweep removes a staging only when it was
made on this host name, in this pid namespace, and that pid is gone or now another process
(containers sharing a host name and a tier have their own pid namespaces: never each other's).
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import time
import uuid
from pathlib import Path

from ..errors import CorruptCacheError, StorageFullError
from ..storage import fsops
from .. import settings
from ..store.lease import owner_dead
from . import records
from .client import Client
from .location import CacheKeys
from .log import Head

log = logging.getLogger("seedreuse")

TIER_DIR = ".bucket"


def _full(e: OSError) -> bool:
    return e.errno in (errno.ENOSPC, errno.EDQUOT)


def cache_id(keys: CacheKeys) -> str:
    return hashlib.sha256(f"{keys.loc.bucket}/{keys.base}".encode()).hexdigest()[:32]


class LocalTier:
    def __init__(self, local_root, store_id: str):
        self.root = Path(local_root) / TIER_DIR / store_id
        self.blobs = self.root / "blobs"
        self._fetched_since_trim = 0

    def blob(self, sha: str) -> Path:
        return self.blobs / sha[:2] / sha

    def has(self, sha: str, size: int) -> bool:
        try:
            return os.stat(self.blob(sha)).st_size == size
        except FileNotFoundError:
            return False

    def holds(self, manifest: dict) -> bool:
        """Every file of the version is here."""
        return all(self.has(e["sha256"], e["bytes"]) for e in manifest["files"].values())

    def staging_parent(self, keys: CacheKeys) -> Path:
        return self.root / "staging" / cache_id(keys)

    # ------------------------------------------------------------------ fetching
    def fetch(self, client: Client, keys: CacheKeys, fname: str, rel: str, entry: dict, *,
              again: bool = False) -> Path:
        """The local blob of ``fname`` (object ``rel`` of the cache), downloaded when missing.
        ``again``: downloaded and checked even when this host holds it (``check`` verifies the
        bucket's object, not this host's copy; the copy is replaced by the same content). A full
        disk: the tier is trimmed and the download tried once more, then StorageFullError."""
        try:
            return self._fetch(client, keys, fname, rel, entry, again)
        except OSError as e:
            if not _full(e):
                raise
            self.trim(keep=entry["bytes"])
            try:
                return self._fetch(client, keys, fname, rel, entry, again)
            except OSError as e2:
                if not _full(e2):
                    raise
                raise StorageFullError(
                    f"the local tier {self.root} is full: cannot fetch {fname} of cache '{keys.name}' "
                    f"({entry['bytes']} bytes; {e2.strerror}) even after trimming it; nothing was used",
                    expected=f"{entry['bytes']} free bytes on SEEDREUSE_CACHE_ROOT", actual=str(e2),
                    fix="free space on this host's SEEDREUSE_CACHE_ROOT, lower SEEDREUSE_LOCAL_TIER_BYTES below "
                        "what the disk holds, or point SEEDREUSE_CACHE_ROOT at a larger local disk, then rerun",
                    details={"root": str(self.root), "cache": keys.name, "file": fname,
                             "errno": e2.errno}) from e2

    def _fetch(self, client: Client, keys: CacheKeys, fname: str, rel: str, entry: dict, again: bool) -> Path:
        sha, size = entry["sha256"], entry["bytes"]
        path = self.blob(sha)
        if not again and self.has(sha, size):
            try:
                fsops.utime(path)           # its last use, for the tier's LRU
            except OSError:
                pass
            return path
        fsops.mkdir(path.parent, parents=True, exist_ok=True)
        part = path.with_name(f".{sha}.part-{uuid.uuid4().hex}")
        fd = fsops.open_exclusive(part)
        key = keys.data(rel)
        ok = False
        try:
            h = hashlib.sha256()
            n = client.download(key, fd, size, h)
            if n != size or h.hexdigest() != sha:
                raise CorruptCacheError(
                    f"cache '{keys.name}': the object s3://{keys.loc.bucket}/{key} ({fname}) does not match "
                    "its commit record", expected=f"{size} bytes, sha256 {sha}",
                    actual=f"{n} bytes" + (f", sha256 {h.hexdigest()}" if n == size else ""),
                    fix=f"the object was replaced or damaged in the bucket; nothing from it was used. Clear the "
                        f"cache (python -m reuse_backend --root {keys.loc.url} clear {keys.name} --yes) and rerun",
                    details={"cache": keys.name, "key": key, "file": fname})
            fsops.fsync_file(fd, part)
            fsops.rename(part, path)
            ok = True
        finally:
            os.close(fd)
            if not ok:
                fsops.unlink(part, missing_ok=True)
        self._fetched_since_trim += size
        if self._fetched_since_trim > settings.local_tier_bytes() // 10:
            self._fetched_since_trim = 0
            self.trim()
        return path

    def adopt(self, src: Path, sha: str) -> None:
        """Keep a file this host just uploaded (a hard link: its next hit here is local)."""
        path = self.blob(sha)
        if path.exists():
            return
        try:
            fsops.mkdir(path.parent, parents=True, exist_ok=True)
            fsops.link_or_copy(src, path)
        except FileExistsError:
            pass
        except OSError as e:
            log.debug("seedreuse: not keeping %s in the local tier: %s", src, e)

    def trim(self, keep: int = 0) -> list[str]:
        """Remove least recently used blobs until the tier is within its bound and, with ``keep``,
        at least ``keep`` bytes were freed (room for a fetch that found the disk full)."""
        found = []
        for d in sorted(self.blobs.glob("??")) if self.blobs.is_dir() else []:
            for p in d.iterdir():
                try:
                    st = p.stat()
                except FileNotFoundError:
                    continue
                found.append((st.st_mtime, st.st_size, p))
        total, removed = sum(s for _, s, _ in found), []
        bound = min(settings.local_tier_bytes(), total - keep) if keep else settings.local_tier_bytes()
        for _, size, p in sorted(found):
            if total <= bound:
                break
            try:
                fsops.unlink(p)
                total -= size
                removed.append(p.name)
            except FileNotFoundError:
                continue
        return removed

    # ------------------------------------------------------------------ records
    def _record_path(self, keys: CacheKeys) -> Path:
        return self.root / "records" / f"{cache_id(keys)}.json"

    def record(self, keys: CacheKeys) -> tuple[Head | None, dict | None]:
        """The newest record this host read of the cache and the ETag it had (validated again: a
        local file too can be damaged), or (None, None)."""
        p = self._record_path(keys)
        try:
            wrapped = json.loads(p.read_bytes())
            seq, etag = wrapped["seq"], wrapped["etag"]
            if not isinstance(etag, str) or not etag:
                raise ValueError("no ETag")
            return Head(seq, etag), records.parse(json.dumps(wrapped["record"]).encode(), keys, keys.log(seq), seq)
        except (FileNotFoundError, ValueError, KeyError, TypeError, CorruptCacheError) as e:
            if not isinstance(e, FileNotFoundError):
                log.debug("seedreuse: local record of cache '%s' ignored: %s", keys.name, e)
            return None, None

    def remember(self, keys: CacheKeys, head: Head, rec: dict) -> None:
        try:
            fsops.mkdir(self._record_path(keys).parent, parents=True, exist_ok=True)
            fsops.write_file_atomic(self._record_path(keys), json.dumps(
                {"seq": head.seq, "etag": head.etag, "record": rec}).encode())
        except OSError as e:
            log.debug("seedreuse: could not keep the record of cache '%s' locally: %s", keys.name, e)

    def forget(self, keys: CacheKeys) -> None:
        fsops.unlink(self._record_path(keys), missing_ok=True)

    def sweep_staging(self, keys: CacheKeys) -> list[str]:
        """Remove the local staging of this host's runs whose owner is provably dead (store/lease.py's
        judge: the same host and pid namespace, the pid gone or reused, or this process no longer
        holding the run), or that is a day old (a host name that changed); a live run's is never
        touched."""
        parent, done = self.staging_parent(keys), []
        try:
            entries = os.listdir(parent)
        except FileNotFoundError:
            return done
        for e in entries:
            d = parent / e
            try:
                owner = json.loads((d / "STAGING.json").read_bytes())
                age = time.time() - os.stat(d / "STAGING.json").st_mtime
            except (OSError, ValueError):
                continue
            if (isinstance(owner, dict) and owner_dead(owner) is not None) or age > 86400:
                fsops.rmtree(d)
                done.append(f"removed local staging {e} of a run that is gone")
        return done
