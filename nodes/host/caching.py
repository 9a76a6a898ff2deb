"""ComfyUI 0.33's external cache providers: the ones registered, and the one NaN that keeps the
pack's nodes (and everything downstream of them) out of every provider."""
from __future__ import annotations

# ComfyUI 0.33's external cache providers (comfy_execution/cache_provider.py, registered through
# comfy_api.latest.Caching) are asked for a node's outputs on every local miss, from any process
# sharing the provider, and are given every executed node's outputs as it finishes (also in a
# prompt that fails later). The host leaves a node out of both when its cache key is not equal to
# itself (cache_provider._contains_self_unequal: a NaN anywhere in it, e.g. in a change token).
# The pack's change tokens carry this one NaN object: the key of a SeedReuse node, and of every
# node downstream of one, then holds NaN (no provider sees it), while ComfyUI's own in-memory
# cache still matches the next prompt's key, because containers compare an object with itself
# by identity first and the object is the same one in every prompt (a fresh float("nan") per
# prompt would also turn the local cache off: every re-queue would run the pack's nodes again).
LOCAL_ONLY = float("nan")
_PROVIDERS: list = []       # [module or None], looked up once


def _provider_module():
    if not _PROVIDERS:
        try:
            from comfy_execution import cache_provider
        except ImportError:  # 0.3.x: no provider API
            cache_provider = None
        _PROVIDERS.append(cache_provider)
    return _PROVIDERS[0]


def local_only(token):
    """A change token that keeps the node (and everything downstream of it) out of every
    external cache provider; unchanged on a host without the provider API."""
    return token if _provider_module() is None else (token, LOCAL_ONLY)


def cache_provider_names() -> list[str]:
    """Class names of the external cache providers registered now ([] without the API)."""
    mod = _provider_module()
    get = getattr(mod, "_get_cache_providers", None) if mod is not None else None
    if get is None:
        return []
    try:
        return [type(p).__name__ for p in get()]
    except Exception:  # noqa: BLE001 - a registry we cannot read: reported as unknown
        return ["<unreadable provider registry>"]


def providers_skip_local_only() -> bool:
    """True when this host keeps a key holding LOCAL_ONLY away from its providers (0.33's
    rule), or has no provider API at all."""
    mod = _provider_module()
    if mod is None:
        return True
    rule = getattr(mod, "_contains_self_unequal", None)
    try:
        return bool(rule is not None and rule(frozenset({(0, (("", 0), LOCAL_ONLY))})))
    except Exception:  # noqa: BLE001
        return False
