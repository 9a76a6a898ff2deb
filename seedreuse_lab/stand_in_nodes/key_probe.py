"""``POST /seedreuse_test/key_mutations``: the key mutation checker (seedreuse_lab/key_mutations.py)
run inside a worker, against the real pack's own key function and the host's node classes.

Body: ``{"prompt": <API prompt, made reusable>, "schemas": {class: /object_info entry},
"extra_pnginfo": ...}``; answer: the checker's report. Test-only: the real pack is found among
the modules the host loaded (by file, under the repository this stand-in pack lives in).
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _pack_module(rel: str):
    """The real pack's module ``rel`` (e.g. "nodes/graph_view.py") as the host loaded it."""
    want = (REPO_ROOT / rel).resolve()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and Path(f).resolve() == want:
            return mod
    raise RuntimeError(f"the SeedReuse pack's {rel} is not loaded in this worker")


def keys_function():
    """keys_of(prompt, extra_pnginfo) -> {Encode-or-Reuse node id: digest} through the pack's own graph_view."""
    gv = _pack_module("nodes/graph_view.py")
    classes = gv.host.NodeClasses()

    def keys_of(prompt: dict, extra_pnginfo=None) -> dict:
        view = gv.GraphView(prompt, extra_pnginfo=extra_pnginfo, classes=classes)
        out = {}
        for nid, node in prompt.items():
            ct = node.get("class_type", "")
            if isinstance(ct, str) and ct.startswith(gv.ENCODE_PREFIX):
                try:
                    out[nid] = gv.slot_key(view, nid, gv.SLOT_IO_TYPES.get(ct, "*")).digest
                except Exception as e:  # noqa: BLE001 - reported as a key that is no digest
                    out[nid] = f"error: {type(e).__name__}: {e}"
        return out
    return keys_of


def not_idempotent_classes(class_types) -> list:
    import nodes as comfy_nodes
    return sorted(ct for ct in set(class_types)
                  if getattr(comfy_nodes.NODE_CLASS_MAPPINGS.get(ct), "NOT_IDEMPOTENT", False))


def _checker():
    """seedreuse_lab/key_mutations.py (stdlib only), loaded by file: this pack is loaded by the
    host as a custom-node folder, so the repository's packages are not importable by name."""
    import importlib.util
    name = "seedreuse_test_key_mutations"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "seedreuse_lab" / "key_mutations.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def register(routes) -> None:
    from aiohttp import web

    @routes.post("/seedreuse_test/key_mutations")
    async def _key_mutations(request):
        body = await request.json()
        prompt, schemas = body["prompt"], body.get("schemas") or {}
        cts = [n.get("class_type") for n in prompt.values() if isinstance(n, dict)]

        def run():
            return _checker().check(prompt, schemas, keys_function(), extra_pnginfo=body.get("extra_pnginfo"),
                         not_idempotent=frozenset(not_idempotent_classes(cts))).to_dict()
        return web.json_response(await asyncio.to_thread(run))
