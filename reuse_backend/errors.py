"""Typed errors of the reuse backend.

Every error says what was expected, what was found and what to do about it, so a
ComfyUI user (or an API client) can act on the message alone.
"""
from __future__ import annotations


class ReuseError(Exception):
    """Base class: ``expected`` / ``actual`` / ``fix`` are always filled in."""

    code = "reuse_error"

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


class InvalidCacheNameError(ReuseError):
    code = "invalid_cache_name"


class CacheBusyError(ReuseError):
    """Another run holds the writer lock of this cache."""
    code = "cache_busy"


class NoCommittedCacheError(ReuseError):
    """``require`` (or a segment resume) found no successful run in the cache."""
    code = "no_committed_cache"


class KeyMismatchError(ReuseError):
    """The committed artifact was made from different inputs. ``details['fields']`` lists them."""
    code = "key_mismatch"


class SegmentInvalidError(KeyMismatchError):
    """A kept segment of a cached take is not valid for this request: what it consumed differs
    (``details``: take, segment, field, cached, current)."""
    code = "segment_invalid"


class CorruptCacheError(ReuseError):
    """A cache folder failed validation; nothing from it was used."""
    code = "corrupt_cache"


class UnsupportedValueError(ReuseError):
    """A value that the pickle-free serializer cannot represent (``details['path']``)."""
    code = "unsupported_value"


class InvalidRequestError(ReuseError):
    """A request that cannot be served (e.g. reuse_prefix_segments >= segment count)."""
    code = "invalid_request"


class UnknownUserError(InvalidRequestError):
    """A request names a ComfyUI user the server does not know (HTTP 403 on every route, as
    ComfyUI's own user routes answer)."""
    code = "unknown_user"


class PreviousResultError(ReuseError):
    """The previous result video needed for a prefix is missing, short or unreadable."""
    code = "previous_result"


class TransactionError(ReuseError):
    """The staging/commit lifecycle was used out of order or lost its lock."""
    code = "transaction"


class StorageFullError(ReuseError):
    """The cache root ran out of space (ENOSPC) or quota (EDQUOT) while a run wrote to it, after
    the size budget (if set) evicted what it could and the write was retried once;
    ``details``: root, cache, errno, root_bytes, budget."""
    code = "storage_full"


class UnsupportedFilesystemError(ReuseError):
    """The cache root's filesystem lacks a primitive the lifecycle relies on."""
    code = "unsupported_filesystem"


class ObjectStoreError(ReuseError):
    """The object store (``SEEDREUSE_CACHE_URL``) could not do what the store asked: unreachable,
    refused, throttled past the retries, or a client library missing; ``details``: operation,
    key, the endpoint's code and HTTP status."""
    code = "object_store"


class UnsupportedEndpointError(ObjectStoreError):
    """The object store's endpoint failed the probe the store depends on (a create race with more
    than one winner, a compare-and-swap that does not hold, a listing or read that lags)."""
    code = "unsupported_endpoint"
