"""Every setting of the pack, read from the environment here and nowhere else (docs/CONFIGURATION.md).

The rest of the pack asks this module for typed values (``settings.lease_s()``). Each function
reads the environment when it is called: a worker reads a setting when it needs it, as an
operator's shell sets it. One parsing per kind, one rule for a bad value:

* seconds: a finite number > 0 (>= 0 where 0 means "off"); anything else is logged and the
  default is used;
* sizes: plain bytes or a suffix K, M, G, T, P (powers of 1024; ``500M``, ``20G``); anything else
  is refused (InvalidRequestError naming the setting) where it is read;
* switches: ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``/empty; flags: ``1`` or not.

The object store's client also takes the standard AWS settings; botocore reads them itself, and
this module reads the two whose default the pack changes (``aws_retries``).
"""
from __future__ import annotations

import logging
import os
import re

from .errors import InvalidRequestError

log = logging.getLogger("seedreuse")

CACHE_ROOT = "SEEDREUSE_CACHE_ROOT"
CACHE_URL = "SEEDREUSE_CACHE_URL"
LOCAL_TIER_BYTES = "SEEDREUSE_LOCAL_TIER_BYTES"
S3_TIMEOUT_S = "SEEDREUSE_S3_TIMEOUT_S"
AUTO = "SEEDREUSE_AUTO"
MAX_BYTES = "SEEDREUSE_MAX_BYTES"
KEEP_TAKES = "SEEDREUSE_KEEP_TAKES"
LEASE_S = "SEEDREUSE_LEASE_S"
COMMIT_WAIT_S = "SEEDREUSE_COMMIT_WAIT_S"
SINGLE_FLIGHT_S = "SEEDREUSE_SINGLE_FLIGHT_S"
SHARED_NAMESPACE = "SEEDREUSE_SHARED_NAMESPACE"
GROUP_WRITABLE = "SEEDREUSE_GROUP_WRITABLE"
TRUSTED_FILESYSTEM = "SEEDREUSE_TRUSTED_FILESYSTEM"
ALLOW_SPARSE = "SEEDREUSE_ALLOW_SPARSE"
VERIFY_ON_LOAD = "SEEDREUSE_VERIFY_ON_LOAD"
FULL_MODEL_HASH = "SEEDREUSE_FULL_MODEL_HASH"

DEFAULT_LEASE_S = 120.0
DEFAULT_SINGLE_FLIGHT_S = 300.0
DEFAULT_S3_TIMEOUT_S = 30.0
DEFAULT_LOCAL_TIER_BYTES = 20 << 30
DEFAULT_KEEP_TAKES = 3
MAX_KEEP_TAKES = 32
DEFAULT_AWS_ATTEMPTS = 5
_ON, _OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:I?B)?\s*$", re.IGNORECASE)


def raw(name: str) -> str:
    """The setting's text as given (stripped; "" when unset)."""
    return os.environ.get(name, "").strip()


# ---------------------------------------------------------------------- the kinds
def seconds(name: str, default: float, *, allow_zero: bool = False) -> float:
    """``name`` as seconds (> 0, or >= 0 with ``allow_zero``; finite), else ``default`` (a bad
    value is logged and ignored)."""
    text = raw(name)
    if not text:
        return default
    try:
        v = float(text)
        if v == v and v != float("inf") and (v > 0 or allow_zero and v == 0):
            return v
    except ValueError:
        pass
    log.warning("ignoring %s=%r (expected seconds %s 0)", name, text, ">=" if allow_zero else ">")
    return default


def parse_bytes(text, *, what: str = MAX_BYTES) -> int:
    """``"1048576"``, ``"500M"``, ``"20G"``, ``"1.5T"`` (K/M/G/T/P are powers of 1024; an optional
    ``B``/``iB`` is accepted) -> bytes (> 0). InvalidRequestError otherwise."""
    m = _SIZE_RE.match(str(text)) if isinstance(text, (str, int)) and not isinstance(text, bool) else None
    n = int(float(m.group(1)) * _UNITS[m.group(2).upper()]) if m else 0
    if n <= 0:
        raise InvalidRequestError(f"invalid size for {what}: {text!r}",
                                  expected="bytes > 0, optionally with a suffix K, M, G, T (powers of 1024)",
                                  actual=repr(text), fix=f"set {what} to e.g. 500M or 20G")
    return n


def switch(name: str) -> bool:
    """On for 1/true/yes/on, off for 0/false/no/off or unset; anything else is an
    InvalidRequestError (the caller says what it does with it)."""
    text = raw(name).lower()
    if text in _ON:
        return True
    if text in _OFF:
        return False
    raise InvalidRequestError(f"{name}={text!r} is not a switch", expected="1 or 0 (true/false, yes/no, on/off)",
                              actual=repr(text), fix=f"set {name}=1 to turn it on, or unset it")


def flag(name: str) -> bool:
    """``name=1``."""
    return raw(name) == "1"


# ---------------------------------------------------------------------- where the caches live
def cache_root() -> str | None:
    """``SEEDREUSE_CACHE_ROOT``: the folder of the caches (with a cache URL: the local tier)."""
    return raw(CACHE_ROOT) or None


def cache_url() -> str | None:
    """``SEEDREUSE_CACHE_URL`` when set: an ``s3://`` URL (bucket/location.py checks the rest).
    Any other value is refused (InvalidRequestError), never taken for a folder: a mistyped scheme
    (``S3://``, ``gs://``) would otherwise become a relative folder in the working directory."""
    text = raw(CACHE_URL)
    if text and not text.startswith("s3://"):
        raise InvalidRequestError(f"{CACHE_URL}={text!r} is not an object-store location",
                                  expected="s3://<bucket>/<prefix>", actual=repr(text),
                                  fix=f"set {CACHE_URL}=s3://<bucket>/<prefix>, or unset it to keep the caches "
                                      f"in the folder {CACHE_ROOT}")
    return text or None


def shared_namespace() -> bool:
    """``SEEDREUSE_SHARED_NAMESPACE``: one namespace for every user of a --multi-user server."""
    return raw(SHARED_NAMESPACE).lower() in _ON


def group_writable() -> bool:
    """``SEEDREUSE_GROUP_WRITABLE=1``: directories and files created group-writable."""
    return flag(GROUP_WRITABLE)


def trusted_filesystem() -> str | None:
    """``SEEDREUSE_TRUSTED_FILESYSTEM``: a filesystem type whose first-use refusal is lifted."""
    return raw(TRUSTED_FILESYSTEM) or None


# ---------------------------------------------------------------------- leases, waits
def lease_s() -> float:
    """``SEEDREUSE_LEASE_S`` (seconds, > 0) or 120 s: the lease of every lease (glossary,
    docs/ARCHITECTURE.md)."""
    return seconds(LEASE_S, DEFAULT_LEASE_S)


def commit_wait_s(lease: float) -> float:
    """How long a commit waits for the writer lock: ``SEEDREUSE_COMMIT_WAIT_S`` or the lease plus
    60 s (a dead committer's lock is broken after its lease; a live commit takes seconds)."""
    return seconds(COMMIT_WAIT_S, lease + 60.0)


def single_flight_s() -> float:
    """``SEEDREUSE_SINGLE_FLIGHT_S``: the longest wait for another run's encoding of the same slot
    key (0: no single flight)."""
    return seconds(SINGLE_FLIGHT_S, DEFAULT_SINGLE_FLIGHT_S, allow_zero=True)


# ---------------------------------------------------------------------- sizes
def max_bytes() -> int | None:
    """``SEEDREUSE_MAX_BYTES`` in bytes, or None when unset (no size budget)."""
    text = raw(MAX_BYTES)
    return parse_bytes(text) if text else None


def local_tier_bytes() -> int:
    """``SEEDREUSE_LOCAL_TIER_BYTES`` or 20 GiB: the bound of a bucket's local tier on this host."""
    text = raw(LOCAL_TIER_BYTES)
    return parse_bytes(text, what=LOCAL_TIER_BYTES) if text else DEFAULT_LOCAL_TIER_BYTES


def keep_takes() -> int:
    """``SEEDREUSE_KEEP_TAKES`` (1..32) or 3: the successful takes a segment cache keeps; another
    value is logged and ignored."""
    text = raw(KEEP_TAKES)
    try:
        v = int(text)
    except ValueError:
        v = 0
    if 1 <= v <= MAX_KEEP_TAKES:
        return v
    if text:
        log.warning("ignoring %s=%r (expected 1..%d)", KEEP_TAKES, text, MAX_KEEP_TAKES)
    return DEFAULT_KEEP_TAKES


# ---------------------------------------------------------------------- reads and keys
def allow_sparse() -> bool:
    """``SEEDREUSE_ALLOW_SPARSE=1``: accept files that allocate much less than they claim."""
    return flag(ALLOW_SPARSE)


def verify_on_load() -> bool:
    """``SEEDREUSE_VERIFY_ON_LOAD=1``: check every artifact's sha256 before using it."""
    return flag(VERIFY_ON_LOAD)


def full_model_hash() -> bool:
    """``SEEDREUSE_FULL_MODEL_HASH=1``: identify model files by a full sha256."""
    return flag(FULL_MODEL_HASH)


def auto() -> bool:
    """``SEEDREUSE_AUTO`` (automatic mode): a switch; an unknown value is an InvalidRequestError."""
    return switch(AUTO)


# ---------------------------------------------------------------------- the object store's client
def s3_timeout_s() -> float:
    """``SEEDREUSE_S3_TIMEOUT_S`` or 30 s: the read timeout of each object-store request."""
    return seconds(S3_TIMEOUT_S, DEFAULT_S3_TIMEOUT_S)


def aws_attempts() -> int:
    """Attempts per object-store request: ``AWS_MAX_ATTEMPTS`` (a positive integer) or 5."""
    text = raw("AWS_MAX_ATTEMPTS")
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_AWS_ATTEMPTS


def aws_retries() -> tuple[dict, str]:
    """(botocore's ``retries`` config, how the attempts are set, for messages): the pack's
    defaults (standard mode, 5 attempts) where ``AWS_RETRY_MODE`` / ``AWS_MAX_ATTEMPTS`` are unset."""
    retries = {"mode": raw("AWS_RETRY_MODE") or "standard"}
    attempts = raw("AWS_MAX_ATTEMPTS")
    if not attempts:
        retries["max_attempts"] = DEFAULT_AWS_ATTEMPTS
    return retries, attempts or f"{DEFAULT_AWS_ATTEMPTS}, the default"
