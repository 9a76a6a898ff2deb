"""An in-memory S3 double for the fast lane: the bucket backend's client interface
(reuse_backend/bucket/client.py ``Client``) over a dict, with linearizable conditional writes.

Test support only, never product code, and never the proof: every claim about the object store is
proven on the real Ceph RGW (the object-store tier); the double lets a protocol test run in
seconds (the backend tier), so a change to the protocol is judged before RGW starts.

What it keeps of S3 (as RGW and AWS answer): one lock makes every request atomic and every read
see every earlier write (strong read-after-write and listing); ``If-None-Match: *`` and
``If-Match`` decide exactly one winner; keys list in byte order with ``StartAfter``, ``MaxKeys``
and ``Delimiter``; an object's ``LastModified`` is the store's clock (``advance`` moves it, so a
lease expires without sleeping); ETags are the MD5 of the body; multipart uploads are listed
(with their initiation time) until completed or aborted, and completing an aborted one fails.

Faults (the fault proxy's, tests/object_store/fault_proxy.py, for the fast lane):
``fault(op, pattern, action, times)`` where action is ``refuse`` (a 503 answer: not carried out),
``lose`` (carried out, the answer lost), ``down`` (no answer, not carried out) or ``delay`` (no
answer; the request waits in a queue and is carried out by ``land_delayed()``, its condition
judged then). ``calls`` records every request by its S3 operation name.

    mem = MemoryS3()
    client = mem.install("bucket")        # BucketCache("s3://bucket/p", ...) now uses it
    ...
    mem.uninstall()
"""
from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid
from dataclasses import dataclass, field

from reuse_backend.bucket import client as clients, probe
from reuse_backend.bucket.client import NotFound, Obj, Precondition, TooLarge
from reuse_backend.errors import ObjectStoreError
from reuse_backend.storage import fsops

ENDPOINT = "memory://s3-double"


@dataclass
class _Stored:
    body: bytes
    etag: str
    modified: float


@dataclass
class _Upload:
    key: str
    initiated: float
    parts: list = field(default_factory=list)


@dataclass
class Fault:
    op: str
    pattern: re.Pattern
    action: str
    left: int | None
    hits: int = 0


class MemoryS3:
    """One endpoint: buckets of objects, a clock, the requests seen, scripted faults."""

    def __init__(self, endpoint: str = ENDPOINT):
        self.endpoint = endpoint
        self.lock = threading.RLock()
        self.buckets: dict[str, dict[str, _Stored]] = {}
        self.uploads: dict[str, dict[str, _Upload]] = {}
        self.offset = 0.0
        self.calls: list[str] = []
        self.faults: list[Fault] = []
        self.delayed: list = []
        self.multipart_bytes = clients.MULTIPART_BYTES
        self.on_part = None              # a test's hook, called between the parts of a multipart upload
        self._installed: list[str] = []

    # ------------------------------------------------------------------ the test's handles
    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        """Move the store's clock on (leases expire without a sleep)."""
        with self.lock:
            self.offset += seconds

    def client(self, bucket: str) -> "MemoryClient":
        with self.lock:
            self.buckets.setdefault(bucket, {})
            self.uploads.setdefault(bucket, {})
        return MemoryClient(self, bucket)

    def install(self, bucket: str) -> "MemoryClient":
        """Make ``bucket`` this store's for every BucketCache / BucketStore of this process
        (client.for_bucket), replacing whatever served it (an endpoint switch)."""
        c = self.client(bucket)
        with clients._GUARD:
            clients._CLIENTS[bucket] = c
        self._installed.append(bucket)
        probe.forget()
        return c

    def uninstall(self) -> None:
        with clients._GUARD:
            for b in self._installed:
                if isinstance(clients._CLIENTS.get(b), MemoryClient):
                    del clients._CLIENTS[b]
        self._installed.clear()
        probe.forget()

    def fault(self, op: str, pattern: str, action: str, times: int | None = 1) -> Fault:
        assert action in ("refuse", "lose", "down", "delay"), action
        f = Fault(op, re.compile(pattern), action, times)
        with self.lock:
            self.faults.append(f)
        return f

    def land_delayed(self) -> int:
        """Carry out the delayed requests now, in order (their conditions judged now)."""
        with self.lock:
            todo, self.delayed = self.delayed, []
            for fn in todo:
                try:
                    fn()
                except (Precondition, NotFound):
                    pass                     # the late request fails; nobody hears of it
        return len(todo)

    def wipe(self, bucket: str, prefix: str = "") -> int:
        """Delete every object under ``prefix`` (an operator, a lifecycle rule)."""
        with self.lock:
            objs = self.buckets.get(bucket, {})
            gone = [k for k in objs if k.startswith(prefix)]
            for k in gone:
                del objs[k]
            return len(gone)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        with self.lock:
            return sorted(k for k in self.buckets.get(bucket, {}) if k.startswith(prefix))

    def count(self, *ops: str) -> int:
        return sum(1 for c in self.calls if c in ops) if ops else len(self.calls)

    # ------------------------------------------------------------------ internals
    def _fault(self, op: str, key: str) -> str | None:
        for f in self.faults:
            if f.left != 0 and f.op in ("*", op) and f.pattern.search(key):
                f.hits += 1
                if f.left is not None:
                    f.left -= 1
                return f.action
        return None


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class MemoryClient:
    """``reuse_backend.bucket.client.Client`` over a MemoryS3 (the same methods and answers)."""

    quoted_if_match = False
    max_attempts = "5, the default"
    timeout_s = 30.0
    attempts = 5

    def __init__(self, mem: MemoryS3, bucket: str):
        self.mem, self.bucket, self.endpoint = mem, bucket, mem.endpoint

    @property
    def multipart_bytes(self) -> int:
        return self.mem.multipart_bytes

    def twin(self) -> "MemoryClient":
        return MemoryClient(self.mem, self.bucket)

    def server_now(self) -> float:
        return self.mem.now()

    # ------------------------------------------------------------------ plumbing
    @property
    def _objs(self) -> dict[str, _Stored]:
        return self.mem.buckets[self.bucket]

    def _unanswered(self, op: str, key: str) -> ObjectStoreError:
        return ObjectStoreError(
            f"the object store at {self.endpoint} did not answer {op} of s3://{self.bucket}/{key} within the "
            "retries (injected by the in-memory double)", expected="an answer within the retries",
            actual="no answer", fix="check that the endpoint is reachable from this worker, then rerun",
            details={"operation": op, "key": key, "endpoint": self.endpoint, "answered": False})

    def _request(self, s3_op: str, op: str, key: str, fn):
        """One request: recorded, faults applied, carried out under the store's lock."""
        with self.mem.lock:
            self.mem.calls.append(s3_op)
            action = self.mem._fault(s3_op, key)
            if action == "refuse":
                raise ObjectStoreError(
                    f"the object store at {self.endpoint} refused {op} of s3://{self.bucket}/{key}: SlowDown "
                    "(injected by the in-memory double)", expected="success", actual="HTTP 503 SlowDown",
                    fix="lower the request rate, then rerun",
                    details={"operation": op, "key": key, "code": "SlowDown", "status": 503,
                             "endpoint": self.endpoint, "attempts": 1, "answered": True})
            if action == "down":
                raise self._unanswered(op, key)
            if action == "delay":
                self.mem.delayed.append(fn)
                raise self._unanswered(op, key)
            out = fn()
            if action == "lose":
                raise self._unanswered(op, key)
            return out

    # ------------------------------------------------------------------ operations
    def get(self, key: str, max_bytes: int) -> Obj:
        def go():
            o = self._objs.get(key)
            if o is None:
                raise NotFound(key)
            if len(o.body) > max_bytes:
                raise TooLarge(len(o.body))
            return Obj(key, len(o.body), o.etag, o.modified, o.body)
        return self._request("GetObject", "get", key, go)

    def head(self, key: str) -> Obj:
        def go():
            o = self._objs.get(key)
            if o is None:
                raise NotFound(key)
            return Obj(key, len(o.body), o.etag, o.modified)
        return self._request("HeadObject", "head", key, go)

    def _write(self, key: str, data: bytes, create_only: bool, if_match: str | None) -> str:
        o = self._objs.get(key)
        if create_only and o is not None:
            raise Precondition(key)
        if if_match is not None and (o is None or o.etag != if_match):
            if o is None:
                raise NotFound(key)
            raise Precondition(key)
        etag = _md5(data)
        self._objs[key] = _Stored(bytes(data), etag, self.mem.now())
        return etag

    def put(self, key: str, data: bytes, *, create_only: bool = False, if_match: str | None = None,
            once: bool = False) -> str:
        return self._request("PutObject", "put", key, lambda: self._write(key, data, create_only, if_match))

    def delete(self, key: str) -> None:
        self._request("DeleteObject", "delete", key, lambda: self._objs.pop(key, None))

    def delete_many(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            batch = keys[i:i + 1000]
            self._request("DeleteObjects", "delete", batch[0], lambda b=batch: [self._objs.pop(k, None) for k in b])

    def list(self, prefix: str, *, start_after: str | None = None, delimiter: str | None = None,
             limit: int | None = None) -> tuple[list[Obj], list[str]]:
        objs, prefixes = [], []
        pages = 0
        with self.mem.lock:
            keys = sorted(k for k in self._objs if k.startswith(prefix) and (start_after is None or k > start_after))
            seen_prefixes: set[str] = set()
            entries = []
            for k in keys:
                rest = k[len(prefix):]
                if delimiter and delimiter in rest:
                    p = prefix + rest[:rest.index(delimiter) + len(delimiter)]
                    if p not in seen_prefixes:
                        seen_prefixes.add(p)
                        entries.append(("p", p))
                    continue
                entries.append(("o", k))
            # one request per 1000 entries, as ListObjectsV2 pages
            for kind, k in entries:
                if kind == "p":
                    prefixes.append(k)
                    continue
                if limit and len(objs) >= limit:
                    break
                o = self._objs[k]
                objs.append(Obj(k, len(o.body), o.etag, o.modified))
            counted = len(objs) + len(prefixes)
            pages = max(1, -(-counted // 1000))
        for _ in range(pages):
            self._request("ListObjectsV2", "list", prefix, lambda: None)
        return objs, prefixes

    def multipart_uploads(self, prefix: str) -> list[tuple[str, str, float]]:
        def go():
            ups = self.mem.uploads[self.bucket]
            return sorted((u.key, uid, u.initiated) for uid, u in ups.items() if u.key.startswith(prefix))
        return self._request("ListMultipartUploads", "list uploads", prefix, go)

    def abort_upload(self, key: str, upload_id: str) -> None:
        self._request("AbortMultipartUpload", "abort upload", key,
                      lambda: self.mem.uploads[self.bucket].pop(upload_id, None))

    def download(self, key: str, fd: int, expected_bytes: int, hasher) -> int:
        def go():
            o = self._objs.get(key)
            if o is None:
                raise NotFound(key)
            return o.body
        body = self._request("GetObject", "get", key, go)
        if len(body) != expected_bytes:
            return len(body)
        view = memoryview(body)
        for i in range(0, len(body), clients.CHUNK):
            chunk = view[i:i + clients.CHUNK]
            fsops.write_all(fd, chunk, key)        # the local tier's write (hooked); ENOSPC stays an OSError
            hasher.update(chunk)
        return len(body)

    def upload(self, path: str, key: str, size: int) -> None:
        with open(path, "rb") as f:
            data = f.read()
        if size <= self.multipart_bytes:
            self.put(key, data)
            return
        uid = uuid.uuid4().hex
        self._request("CreateMultipartUpload", "upload", key,
                      lambda: self.mem.uploads[self.bucket].__setitem__(uid, _Upload(key, self.mem.now())))
        part = max(5 << 20, self.multipart_bytes)
        for i in range(0, len(data), part):
            if self.mem.on_part is not None:
                self.mem.on_part(key, i)
            self._request("UploadPart", "upload", key, lambda: None)

        def complete():
            if self.mem.uploads[self.bucket].pop(uid, None) is None:
                raise clients.aborted_upload(self, key, RuntimeError("NoSuchUpload (in-memory double)"))
            self._write(key, data, False, None)
        self._request("CompleteMultipartUpload", "upload", key, complete)


def plant(client, key: str, body: bytes) -> None:
    """Write an object as someone else would (a plain PUT, no condition): the test's hand."""
    client.put(key, body)


__all__ = ["MemoryS3", "MemoryClient", "plant", "ENDPOINT"]
