"""Typed errors of the reuse backend.

Every error says what was expected, what was found and what to do about it, so a
ComfyUI user (or an API client) can act on the message alone.
"""
from __future__ import annotations


class ReuseError(Exception):
    """Base class: ``expected`` / ``actual`` / ``fix`` are always filled in."""

    code = "reuse_error"

    def __init_subclass__(cls, code: str | None = None, **kw):
        """``class XError(ReuseError, code="x")``: the error's stable code (to_dict()["code"])."""
        super().__init_subclass__(**kw)
        if code is not None:
            cls.code = code

    def __init__(self, message: str, *, expected: object = None, actual: object = None,
                 fix: str = "", details: dict | None = None):
        self.message = message
        self.expected = expected
        self.actual = actual
        self.fix = fix
        self.details = details or {}
        super().__init__(self.__str__())

    def __str__(self) -> str:
        parts = [self.message]
        if self.expected is not None:
            parts.append(f"expected: {self.expected}")
        if self.actual is not None:
            parts.append(f"actual: {self.actual}")
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return "\n".join(parts)

    def to_dict(self) -> dict:
        return {"code": self.code, "type": type(self).__name__, "message": self.message,
                "expected": _jsonable(self.expected), "actual": _jsonable(self.actual),
                "fix": self.fix, "details": _jsonable(self.details)}


def _jsonable(v):
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return repr(v)


class InvalidCacheNameError(ReuseError, code="invalid_cache_name"):
    """A cache, slot or file name that does not match the allowed pattern (or holds "..")."""


class CacheBusyError(ReuseError, code="cache_busy"):
    """Another run holds the writer lock of this cache."""


class NoCommittedCacheError(ReuseError, code="no_committed_cache"):
    """``require`` (or a segment resume) found no successful run in the cache."""


class KeyMismatchError(ReuseError, code="key_mismatch"):
    """The committed artifact was made from different inputs. ``details['fields']`` lists them."""


class SegmentInvalidError(KeyMismatchError, code="segment_invalid"):
    """A kept segment of a cached take is not valid for this request: what it consumed differs
    (``details``: take, segment, field, cached, current)."""


class CorruptCacheError(ReuseError, code="corrupt_cache"):
    """A cache folder failed validation; nothing from it was used."""


class UnsupportedValueError(ReuseError, code="unsupported_value"):
    """A value that the pickle-free serializer cannot represent (``details['path']``)."""


class InvalidRequestError(ReuseError, code="invalid_request"):
    """A request that cannot be served (e.g. reuse_prefix_segments >= segment count)."""


class UnknownUserError(InvalidRequestError, code="unknown_user"):
    """A request names a ComfyUI user the server does not know (HTTP 403 on every route, as
    ComfyUI's own user routes answer)."""


class PreviousResultError(ReuseError, code="previous_result"):
    """The previous result video needed for a prefix is missing, short or unreadable."""


class TransactionError(ReuseError, code="transaction"):
    """The staging/commit lifecycle was used out of order, or the run was fenced (lost its run lease,
    its staging directory or, in a folder's commit, its writer lock: docs/ARCHITECTURE.md, "Glossary")."""


class StorageFullError(ReuseError, code="storage_full"):
    """The cache root ran out of space (ENOSPC) or quota (EDQUOT) while a run wrote to it, after
    the size budget (if set) evicted what it could and the write was retried once;
    ``details``: root, cache, errno, root_bytes, budget."""


class UnsupportedFilesystemError(ReuseError, code="unsupported_filesystem"):
    """The cache root's filesystem lacks a primitive the lifecycle relies on."""


class ObjectStoreError(ReuseError, code="object_store"):
    """The object store (``SEEDREUSE_CACHE_URL``) could not do what the store asked: unreachable,
    refused, throttled past the retries, or a client library missing; ``details``: operation,
    key, the endpoint's code and HTTP status."""


class UnsupportedEndpointError(ObjectStoreError, code="unsupported_endpoint"):
    """The object store's endpoint failed the probe the store depends on (a create race with more
    than one winner, a compare-and-swap that does not hold, a listing or read that lags)."""
