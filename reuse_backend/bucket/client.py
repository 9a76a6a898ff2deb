"""The object store's client: boto3 (botocore), configured only by the standard AWS settings.

Endpoint (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``), region, credentials (environment, the
shared config/credentials files, ``AWS_PROFILE``, container and instance roles), addressing style
(``s3 = addressing_style = path`` in the config file) and retries (``AWS_RETRY_MODE``,
``AWS_MAX_ATTEMPTS``; default here: standard mode, 5 attempts) come from botocore's own chain;
the pack signs nothing itself. boto3 is imported only when a bucket is used (``pip install boto3``).

Every call maps the endpoint's answer to what the store needs: ``Precondition`` (412: a
conditional write lost), ``NotFound`` (404), a retried ``409 ConditionalRequestConflict``, or an
``ObjectStoreError`` that names the operation, the key, the endpoint's code and a fix. Reads are
bounded: an object larger than the caller's limit is refused before its body is read, and
downloads stream in chunks into a file (never a whole object in memory).

What this does not guarantee: a request that timed out may have been carried out, now or later
(a proxy or gateway queue). So a commit record is created one attempt at a time (``put(...,
once=True)``, no botocore retry): each failed attempt says whether the endpoint answered it
(``details["answered"]``: an HTTP error other than 500/502/504 means it was not carried out), and
log.py reads the record back, or takes the number away from a late write, when one was not.
"""
from __future__ import annotations

import email.utils
import logging
import threading
import time

from ..errors import ObjectStoreError
from .. import settings
from ..storage import fsops

log = logging.getLogger("seedreuse")

MULTIPART_BYTES = 64 << 20
CHUNK = 8 << 20
CONFLICT_RETRIES = 5


class Precondition(Exception):
    """A conditional write found the object in another state (HTTP 412)."""


class NotFound(Exception):
    """The key does not exist (HTTP 404)."""


class TooLarge(Exception):
    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


def _import():
    try:
        import boto3
        import botocore.config
        import botocore.exceptions
    except ImportError as e:
        raise ObjectStoreError(
            "SEEDREUSE_CACHE_URL names an object store, but boto3 is not installed in ComfyUI's Python",
            expected="the boto3 package", actual=f"ImportError: {e}",
            fix="pip install boto3 (the Python that runs ComfyUI), or unset SEEDREUSE_CACHE_URL") from None
    return boto3, botocore


class Obj:
    def __init__(self, key: str, size: int, etag: str, modified: float, body: bytes | None = None):
        self.key, self.size, self.etag, self.modified, self.body = key, size, etag, modified, body


class Client:
    """One client per bucket and process (thread-safe: botocore clients are)."""

    def __init__(self, bucket: str):
        boto3, botocore = _import()
        self.bucket, self._exc = bucket, botocore.exceptions
        retries, self.max_attempts = settings.aws_retries()
        timeout = self.timeout_s = settings.s3_timeout_s()
        cfg = botocore.config.Config(retries=retries, connect_timeout=min(10.0, timeout),
                                     read_timeout=timeout, max_pool_connections=32)
        session = boto3.session.Session()
        region = session.region_name or "us-east-1"
        self.s3 = session.client("s3", region_name=region, config=cfg)
        # one attempt per call (the commit record's create: log.py retries it itself, so that it
        # knows what each attempt got)
        self.s3_once = session.client("s3", region_name=region, config=cfg.merge(
            botocore.config.Config(retries={"mode": retries["mode"], "total_max_attempts": 1})))
        self.attempts = settings.aws_attempts()      # of a record create
        self.endpoint = self.s3.meta.endpoint_url
        self.quoted_if_match = False       # RGW refuses quoted ETags in If-Match; AWS takes both
        self._skew = 0.0                   # server clock - local clock, from the last response
        self._lock = threading.Lock()
        self.multipart_bytes = MULTIPART_BYTES
        self._transfer = boto3.s3.transfer.TransferConfig(multipart_threshold=MULTIPART_BYTES,
                                                          multipart_chunksize=max(5 << 20, min(16 << 20, MULTIPART_BYTES)),
                                                          max_concurrency=4)

    def twin(self) -> "Client":
        """Another client of the same bucket and endpoint, with its own connections (the probe's
        racers)."""
        return Client(self.bucket)

    # ------------------------------------------------------------------ errors and clock
    def _seen(self, resp) -> None:
        date = ((resp or {}).get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
        if date:
            try:
                server = email.utils.parsedate_to_datetime(date).timestamp()
            except (TypeError, ValueError):
                return
            with self._lock:
                self._skew = server - time.time()

    def server_now(self) -> float:
        """The object store's clock now (from the Date of its last answer): leases are judged by
        the server's LastModified against this, so client clocks need not agree."""
        return time.time() + self._skew

    def error(self, e: Exception, op: str, key: str) -> Exception:
        """The typed error of a failed call (Precondition, NotFound, or ObjectStoreError naming
        the endpoint, the key, the attempts made and the fix)."""
        where = f"s3://{self.bucket}/{key}"
        if isinstance(e, self._exc.ClientError):
            err = e.response.get("Error") or {}
            meta = e.response.get("ResponseMetadata") or {}
            status = meta.get("HTTPStatusCode")
            code = str(err.get("Code") or status)
            if status == 412 or code == "PreconditionFailed":
                return Precondition(key)
            if status == 404 or code in ("NoSuchKey", "NotFound", "404"):
                return NotFound(key)
            tries = int(meta.get("RetryAttempts") or 0) + 1
            answered = status not in (500, 502, 504)
            fix = {"NoSuchBucket": "create the bucket, or fix the bucket name in SEEDREUSE_CACHE_URL",
                   "AccessDenied": "give these credentials read, write, list and delete on the prefix",
                   "InvalidAccessKeyId": "check the AWS credentials this worker uses (AWS_PROFILE, "
                                         "AWS_ACCESS_KEY_ID, the credentials file)",
                   "SignatureDoesNotMatch": "check the secret key and the endpoint/region",
                   "SlowDown": f"the store throttles this prefix: lower the request rate (fewer workers "
                               f"committing at once) or raise AWS_MAX_ATTEMPTS (now {self.max_attempts}), then rerun",
                   "ConditionalRequestConflict": "another write to the same key kept conflicting; rerun",
                   }.get(code, "check the endpoint and credentials (python -m reuse_backend probe "
                               f"s3://{self.bucket}/...), then rerun")
            return ObjectStoreError(
                f"the object store at {self.endpoint} refused {op} of {where} after {tries} attempt"
                f"{'s' if tries > 1 else ''}: {code} ({err.get('Message') or 'no message'})",
                expected="success", actual=f"HTTP {status} {code}",
                fix=fix, details={"operation": op, "key": key, "code": code, "status": status,
                                  "endpoint": self.endpoint, "attempts": tries, "answered": answered})
        if isinstance(e, (self._exc.BotoCoreError, OSError)) or type(e).__module__.startswith(("urllib3", "http.", "boto3")):
            # never sent (no connection) is a definite answer; anything later may have been carried out
            unsent = isinstance(e, (self._exc.EndpointConnectionError, self._exc.ConnectTimeoutError))
            return ObjectStoreError(
                f"the object store at {self.endpoint} did not answer {op} of {where} within the retries "
                f"(AWS_MAX_ATTEMPTS: {self.max_attempts}; {settings.S3_TIMEOUT_S}: {self.timeout_s:g} s): {type(e).__name__}: {e}",
                expected="an answer within the retries", actual=str(e)[:300],
                fix="check that the endpoint is reachable from this worker (AWS_ENDPOINT_URL_S3), or raise "
                    f"{settings.S3_TIMEOUT_S} / AWS_MAX_ATTEMPTS if it is slow, then rerun",
                details={"operation": op, "key": key, "endpoint": self.endpoint, "answered": unsent})
        return e

    def _call(self, op: str, key: str, fn, *, once: bool = False, **kw):
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                resp = fn(Bucket=self.bucket, **kw)
                self._seen(resp)
                return resp
            except Exception as e:  # noqa: BLE001 - mapped to a typed error
                if isinstance(e, self._exc.ClientError):
                    self._seen(e.response)
                    if (e.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") == 409 \
                            and attempt < CONFLICT_RETRIES and not once:
                        time.sleep(0.05 * 2 ** attempt)   # ConditionalRequestConflict: retry
                        continue
                raise self.error(e, op, key) from e
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ operations
    def get(self, key: str, max_bytes: int) -> Obj:
        """The object's bytes (NotFound; TooLarge before reading a body over ``max_bytes``)."""
        r = self._call("get", key, self.s3.get_object, Key=key)
        size = int(r.get("ContentLength") or 0)
        if size > max_bytes:
            r["Body"].close()
            raise TooLarge(size)
        body = r["Body"].read(max_bytes + 1)
        if len(body) > max_bytes:
            raise TooLarge(len(body))
        return Obj(key, len(body), r.get("ETag", "").strip('"'), r["LastModified"].timestamp(), body)

    def head(self, key: str) -> Obj:
        r = self._call("head", key, self.s3.head_object, Key=key)
        return Obj(key, int(r.get("ContentLength") or 0), r.get("ETag", "").strip('"'),
                   r["LastModified"].timestamp())

    def put(self, key: str, data: bytes, *, create_only: bool = False, if_match: str | None = None,
            once: bool = False) -> str:
        """Write a small object in one PUT (never multipart: some stores ignore conditions on a
        multipart completion); ``create_only``: If-None-Match: *; ``if_match``: that ETag;
        ``once``: one attempt, no retry (its ObjectStoreError says ``details["answered"]``).
        Returns the new ETag; Precondition when the condition failed."""
        kw = {"Key": key, "Body": data}
        if create_only:
            kw["IfNoneMatch"] = "*"
        if if_match is not None:
            kw["IfMatch"] = f'"{if_match}"' if self.quoted_if_match else if_match
        s3 = self.s3_once if once else self.s3
        r = self._call("put", key, s3.put_object, once=once, **kw)
        return r.get("ETag", "").strip('"')

    def delete(self, key: str) -> None:
        try:
            self._call("delete", key, self.s3.delete_object, Key=key)
        except NotFound:
            pass

    def delete_many(self, keys: list[str]) -> None:
        """Delete these keys, up to 1000 per request (absent ones are no error)."""
        for i in range(0, len(keys), 1000):
            batch = keys[i:i + 1000]
            r = self._call("delete", batch[0], self.s3.delete_objects,
                           Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
            failed = [e for e in r.get("Errors") or [] if e.get("Code") != "NoSuchKey"]
            if failed:
                e = failed[0]
                raise ObjectStoreError(
                    f"the object store at {self.endpoint} refused to delete s3://{self.bucket}/{e.get('Key')}: "
                    f"{e.get('Code')} ({e.get('Message')})", expected="deleted", actual=e.get("Code"),
                    fix="give these credentials delete on the prefix, then rerun",
                    details={"operation": "delete", "key": e.get("Key"), "code": e.get("Code"),
                             "endpoint": self.endpoint, "failed": len(failed)})

    def list(self, prefix: str, *, start_after: str | None = None, delimiter: str | None = None,
             limit: int | None = None) -> tuple[list[Obj], list[str]]:
        """Every object under ``prefix`` (after ``start_after``) and, with ``delimiter``, the
        common prefixes; ``limit`` stops early (listing order is key order)."""
        objs, prefixes, token = [], [], None
        while True:
            kw = {"Prefix": prefix}
            if start_after:
                kw["StartAfter"] = start_after
            if delimiter:
                kw["Delimiter"] = delimiter
            if token:
                kw["ContinuationToken"] = token
            if limit:
                kw["MaxKeys"] = min(1000, limit - len(objs))
            r = self._call("list", prefix, self.s3.list_objects_v2, **kw)
            for o in r.get("Contents") or []:
                objs.append(Obj(o["Key"], int(o.get("Size") or 0), str(o.get("ETag", "")).strip('"'),
                                o["LastModified"].timestamp()))
            prefixes += [p["Prefix"] for p in r.get("CommonPrefixes") or []]
            token = r.get("NextContinuationToken")
            if not r.get("IsTruncated") or not token or (limit and len(objs) >= limit):
                return objs, prefixes

    def multipart_uploads(self, prefix: str) -> list[tuple[str, str, float]]:
        """(key, upload id, initiated: the store's clock) of the unfinished multipart uploads
        under ``prefix``."""
        out, kw = [], {"Prefix": prefix}
        while True:
            r = self._call("list uploads", prefix, self.s3.list_multipart_uploads, **kw)
            out += [(u["Key"], u["UploadId"], u["Initiated"].timestamp()) for u in r.get("Uploads") or []]
            if not r.get("IsTruncated"):
                return out
            kw.update(KeyMarker=r.get("NextKeyMarker"), UploadIdMarker=r.get("NextUploadIdMarker"))

    def abort_upload(self, key: str, upload_id: str) -> None:
        try:
            self._call("abort upload", key, self.s3.abort_multipart_upload, Key=key, UploadId=upload_id)
        except NotFound:
            pass

    def download(self, key: str, fd: int, expected_bytes: int, hasher) -> int:
        """Stream the object into ``fd`` in chunks, hashing as it goes; returns the bytes
        written (the caller compares size and hash with what the record says)."""
        r = self._call("get", key, self.s3.get_object, Key=key)
        size = int(r.get("ContentLength") or 0)
        if size != expected_bytes:
            r["Body"].close()
            return size
        n, chunks = 0, r["Body"].iter_chunks(CHUNK)
        while n <= expected_bytes:
            try:
                chunk = next(chunks, None)
            except Exception as e:  # noqa: BLE001 - the connection broke mid-body: typed
                raise self.error(e, "download", key) from e
            if not chunk:
                break
            fsops.write_all(fd, chunk, key)  # the local tier's write (hooked); ENOSPC stays an OSError
            hasher.update(chunk)
            n += len(chunk)
        return n

    def upload(self, path: str, key: str, size: int) -> None:
        """Upload a file: one PUT, or a multipart upload (parallel parts) for a large one."""
        try:
            if size <= self.multipart_bytes:
                with open(path, "rb") as f:
                    self._call("upload", key, self.s3.put_object, Key=key, Body=f)
                return
            self.s3.upload_file(path, self.bucket, key, Config=self._transfer)
        except (Precondition, NotFound, ObjectStoreError):
            raise
        except Exception as e:  # noqa: BLE001 - mapped to a typed error
            if "NoSuchUpload" in str(e):
                raise aborted_upload(self, key, e) from e
            raise self.error(e, "upload", key) from e


def aborted_upload(client, key: str, e: Exception) -> ObjectStoreError:
    """A multipart upload that someone else aborted while it ran (a collection that judged its run
    dead, an operator, a lifecycle rule on incomplete uploads)."""
    return ObjectStoreError(
        f"the multipart upload of s3://{client.bucket}/{key} was aborted by someone else while it ran",
        expected="the upload completed", actual=str(e)[:300],
        fix="rerun. If it recurs: this worker was paused longer than SEEDREUSE_LEASE_S (raise it), or a "
            "lifecycle rule aborts incomplete multipart uploads under the prefix sooner than an upload takes "
            "(docs/OBJECT_STORAGE.md, what an operator must not do)",
        details={"operation": "upload", "key": key, "endpoint": client.endpoint, "answered": True})


_CLIENTS: dict[str, Client] = {}
_GUARD = threading.Lock()


def for_bucket(bucket: str) -> Client:
    with _GUARD:
        c = _CLIENTS.get(bucket)
        if c is None:
            c = _CLIENTS[bucket] = Client(bucket)
        return c


def forget_clients() -> None:
    """Drop the process's clients (tests that change the endpoint settings)."""
    with _GUARD:
        _CLIENTS.clear()
