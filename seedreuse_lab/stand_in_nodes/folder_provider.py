"""A test-only external cache provider (ComfyUI 0.33's ``comfy_api.latest.Caching``): node outputs
shared between workers through one folder, as a Redis- or disk-backed provider shares them.

Registered by the stand-in pack when ``SEEDREUSE_TEST_PROVIDER_DIR`` names a folder (only the
workers of tests/test_cache_provider.py set it). Every worker given the same folder serves its
local misses from the others' stores:

    <dir>/entries/<cache_key_hash>.pt     torch.save({"outputs", "ui"}), loaded with weights_only=True
    <dir>/entries/<cache_key_hash>.json   who stored it: class_type, node_id, pid
    <dir>/journal.<pid>.jsonl             one line per store / hit / miss / skip of this process:
                                          {"op", "class_type", "node_id", "key"}

With ``SEEDREUSE_TEST_PROVIDER_WITHOUT_NAN_RULE=1`` the host's rule that keeps NaN-keyed nodes
away from providers is switched off in this process (``_contains_self_unequal`` answers False):
a stand-in for a host with providers but without that rule, on which the pack must refuse.

Only values made of tensors, numbers, strings, None, lists, tuples and str-keyed dicts are
stored; a model, a VAE or a video object is skipped (``should_cache`` says no), as a provider
that cannot serialize it would skip it.
"""
from __future__ import annotations

import json
import logging
import os

import torch

from comfy_api.latest import Caching

ENV = "SEEDREUSE_TEST_PROVIDER_DIR"
_log = logging.getLogger("seedreuse.test.provider")
_PLAIN = (bool, int, float, str, type(None))


def _storable(v, depth: int = 0) -> bool:
    if depth > 12:
        return False
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, _PLAIN):
        return True
    if isinstance(v, (list, tuple)):
        return all(_storable(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _storable(x, depth + 1) for k, x in v.items())
    return False


def _cpu(v):
    if isinstance(v, torch.Tensor):
        return v.detach().to("cpu").clone()
    if isinstance(v, list):
        return [_cpu(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_cpu(x) for x in v)
    if isinstance(v, dict):
        return {k: _cpu(x) for k, x in v.items()}
    return v


class FolderCacheProvider(Caching.CacheProvider):
    def __init__(self, folder: str):
        self.folder = folder
        self.entries = os.path.join(folder, "entries")
        os.makedirs(self.entries, exist_ok=True)

    def _journal(self, op: str, context) -> None:
        line = json.dumps({"op": op, "class_type": context.class_type, "node_id": context.node_id,
                           "key": context.cache_key_hash})
        with open(os.path.join(self.folder, f"journal.{os.getpid()}.jsonl"), "a") as f:
            f.write(line + "\n")

    def _path(self, context, ext: str) -> str:
        return os.path.join(self.entries, context.cache_key_hash + ext)

    def should_cache(self, context, value=None) -> bool:
        if value is None:
            return True
        ok = _storable(list(value.outputs)) and _storable(value.ui if value.ui is not None else {})
        if not ok:
            self._journal("skip", context)
        return ok

    async def on_lookup(self, context):
        path = self._path(context, ".pt")
        if not os.path.isfile(path):
            self._journal("miss", context)
            return None
        data = torch.load(path, weights_only=True)
        self._journal("hit", context)
        return Caching.CacheValue(outputs=list(data["outputs"]), ui=data["ui"])

    async def on_store(self, context, value) -> None:
        path = self._path(context, ".pt")
        tmp = f"{path}.{os.getpid()}.tmp"
        torch.save({"outputs": _cpu(list(value.outputs)), "ui": _cpu(value.ui)}, tmp)
        with open(tmp + ".json", "w") as f:
            json.dump({"class_type": context.class_type, "node_id": context.node_id, "pid": os.getpid()}, f)
        os.replace(tmp + ".json", self._path(context, ".json"))
        os.replace(tmp, path)          # the value last: a reader that finds it finds its record
        self._journal("store", context)


_REGISTERED: list = []


async def register() -> FolderCacheProvider | None:
    """Registers the provider once per process (the entry point may be called again)."""
    folder = os.environ.get(ENV)
    if not folder or _REGISTERED:
        return _REGISTERED[0] if _REGISTERED else None
    provider = FolderCacheProvider(folder)
    _REGISTERED.append(provider)
    if os.environ.get("SEEDREUSE_TEST_PROVIDER_WITHOUT_NAN_RULE") == "1":
        from comfy_execution import cache_provider
        cache_provider._contains_self_unequal = lambda obj: False
        _log.warning("seedreuse test: the host's NaN-key rule for cache providers is switched off")
    await Caching().register_provider(provider)
    _log.info("seedreuse test: FolderCacheProvider registered on %s", folder)
    return provider
