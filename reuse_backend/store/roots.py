"""Cache root resolution and name validation (names never become paths unchecked)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from .. import settings
from ..storage import fsops
from ..errors import InvalidCacheNameError, InvalidRequestError

_DEFAULT_ROOT: list = [None]          # the host's default folder (set_default_root), after env
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
FILE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
_NAME_RE = re.compile(NAME_PATTERN)
_FILE_RE = re.compile(FILE_PATTERN)


URL_SCHEMES = ("s3://",)


def is_url(location) -> bool:
    """A location served by the object store (``s3://bucket/prefix``), not a folder."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def set_default_root(folder) -> None:
    """The folder a host uses when neither an argument nor ``SEEDREUSE_CACHE_ROOT`` names one
    (ComfyUI's user folder: nodes/host.py); the object store's local tier lives there too."""
    _DEFAULT_ROOT[0] = str(folder) if folder else None


def resolve_root(explicit: str | None = None, default: str | None = None) -> Path:
    """explicit > env ``SEEDREUSE_CACHE_ROOT`` > default > the host's default; created when missing."""
    raw = explicit or settings.cache_root() or default or _DEFAULT_ROOT[0]
    if not raw:
        raise InvalidRequestError(
            "no cache root configured", expected=f"a directory path (argument or ${settings.CACHE_ROOT})",
            actual="nothing", fix=f"set {settings.CACHE_ROOT}=/shared/seedreuse or pass a root explicitly")
    root = Path(os.path.abspath(os.path.expanduser(str(raw))))
    if not root.is_dir():
        if root.exists():
            raise InvalidRequestError("cache root is not a directory", expected="a directory",
                                      actual=str(root), fix="point the cache root at a directory")
        fsops.mkdir(root, parents=True, exist_ok=True)
    return root


def _check(kind: str, regex, pattern: str, value, fix: str) -> str:
    if not isinstance(value, str) or not regex.fullmatch(value):
        raise InvalidCacheNameError(f"invalid {kind}: {value!r}", expected=f"a name matching {pattern}",
                                    actual=repr(value), fix=fix)
    return value


def validate_cache_name(name) -> str:
    """A plain name: letters, digits, '_' and '-', at most 64 chars; never a path."""
    return _check("cache name", _NAME_RE, NAME_PATTERN, name,
                  "use a plain name such as 'talk-480p' (letters, digits, '_' and '-'); "
                  "the cache root setting decides where it lives")


def is_valid_cache_name(name) -> bool:
    return isinstance(name, str) and bool(_NAME_RE.fullmatch(name))


def validate_slot_name(name) -> str:
    return _check("slot name", _NAME_RE, NAME_PATTERN, name,
                  "use a plain slot name such as 'text' (letters, digits, '_' and '-')")


def validate_file_name(name) -> str:
    """A manifest file name: plain, may contain '.', never '..' nor a leading dot."""
    _check("file name", _FILE_RE, FILE_PATTERN, name,
           "file names in a cache are plain names such as 'result.mp4'")
    if ".." in name:
        raise InvalidCacheNameError(f"invalid file name: {name!r}", expected="no '..'",
                                    actual=repr(name), fix="use a plain file name")
    return name
