"""Registry of host classes that may appear inside cached values (pickle-free).

Only a class registered here can be rebuilt from a cache file: a file names an adapter, never a
class to import. nodes/adapters.py registers the host's classes (e.g. comfy.clip_vision.Output).
"""
from __future__ import annotations

import re
import threading
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

_ADAPTER_NAME = re.compile(r"[A-Za-z0-9_.:\-]{1,200}\Z")


class _Adapter(NamedTuple):
    cls: type
    name: str
    to_fields: Callable[[Any], dict]
    from_fields: Callable[[dict], Any]


_BY_CLS: dict[type, _Adapter] = {}
_BY_NAME: dict[str, _Adapter] = {}
_REGISTRY_LOCK = threading.Lock()
_BUILTIN = (type(None), bool, int, float, str, list, tuple, dict, torch.dtype, torch.device)


def register_adapter(cls: type, name: str, to_fields: Callable[[Any], dict],
                     from_fields: Callable[[dict], Any]) -> None:
    """Let values of exactly ``cls`` be stored as ``{"t": "obj", "cls": name, "fields": ...}``.

    ``to_fields(obj)`` returns a dict of serializable values; ``from_fields(fields)`` rebuilds
    the object. Registering a class or name again replaces the previous registration.
    """
    if not isinstance(cls, type) or type(name) is not str or not _ADAPTER_NAME.match(name):
        raise ValueError(f"register_adapter needs a class and a name matching "
                         f"{_ADAPTER_NAME.pattern}, got {cls!r}, {name!r}")
    if cls in _BUILTIN or issubclass(cls, (torch.Tensor, np.ndarray, np.generic)):
        raise ValueError(f"{cls!r} is handled by the serializer itself")
    with _REGISTRY_LOCK:
        for old in (_BY_NAME.get(name), _BY_CLS.get(cls)):
            if old is not None:
                _BY_NAME.pop(old.name, None)
                _BY_CLS.pop(old.cls, None)
        _BY_CLS[cls] = _BY_NAME[name] = _Adapter(cls, name, to_fields, from_fields)


def attribute_adapter(cls: type, name: str, attrs: list[str], *, strict: bool = True):
    """Register an adapter for a plain attribute bag; returns ``(to_fields, from_fields)``.

    Only the listed attributes present on the object are stored (missing ones are allowed
    and stay unset on decode; objects are rebuilt with ``cls.__new__`` + ``setattr``). With
    ``strict``, an instance attribute outside ``attrs`` raises ``UnsupportedValueError``.
    """
    attrs = list(attrs)

    def to_fields(obj):
        if strict:
            extra = sorted(set(getattr(obj, "__dict__", {})) - set(attrs))
            if extra:
                raise ValueError(f"attributes {extra} are not in the adapter's list {attrs}")
        return {a: getattr(obj, a) for a in attrs if hasattr(obj, a)}

    def from_fields(fields):
        unknown = sorted(set(fields) - set(attrs))
        if unknown:
            raise ValueError(f"unknown attributes {unknown}")
        obj = cls.__new__(cls)
        for a, v in fields.items():
            setattr(obj, a, v)
        return obj

    register_adapter(cls, name, to_fields, from_fields)
    return to_fields, from_fields


def dict_adapter(cls: type, name: str):
    """Register an adapter for a trivial ``dict`` subclass (items only, no attributes)."""
    def to_fields(obj):
        if getattr(obj, "__dict__", None):
            raise ValueError(f"instance attributes {sorted(vars(obj))} besides the items")
        return dict(obj)

    def from_fields(fields):
        obj = cls.__new__(cls)
        dict.update(obj, fields)
        return obj

    register_adapter(cls, name, to_fields, from_fields)
    return to_fields, from_fields
