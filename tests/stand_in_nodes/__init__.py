"""SeedReuse test-only ComfyUI node pack (V3 API): stand-ins for the encoders that cannot be tiny.

Loaded by the test workers (tests/harness/worker.py symlinks this folder into custom_nodes).
Never shipped: the real pack is the repository root.
"""
import logging

from typing_extensions import override

from comfy_api.latest import ComfyExtension, io

from .standins import NODES, register_routes

_log = logging.getLogger("seedreuse.test")


class SeedReuseTestExtension(ComfyExtension):
    @override
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return list(NODES)


_routes_done = False


async def comfy_entrypoint() -> SeedReuseTestExtension:
    global _routes_done
    if not _routes_done:
        try:
            register_routes()
            _routes_done = True
        except Exception as e:  # no PromptServer (imported outside a server)
            _log.warning("seedreuse test routes not registered: %s", e)
    return SeedReuseTestExtension()
