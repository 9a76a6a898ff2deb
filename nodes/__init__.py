"""ComfyUI adapters of the SeedReuse pack: node classes, the prompt lifecycle hook, routes."""
from __future__ import annotations

from . import adapters, cache_providers, carry, routes, transactions, users
from .encode_nodes import ENCODE_NODES
from .host import ComfyExtension
from .prefix_merge import PREFIX_MERGE_NODES
from .segment_loop import SEGMENT_LOOP_NODES
from .session_node import SeedReuseSession

NODES = [SeedReuseSession, *ENCODE_NODES, *SEGMENT_LOOP_NODES, *PREFIX_MERGE_NODES]


class SeedReuseExtension(ComfyExtension):
    async def get_node_list(self):
        return list(NODES)


async def comfy_entrypoint() -> ComfyExtension:
    transactions.register_before_commit(carry.carry_unexecuted_slots)
    transactions.install()
    adapters.register_all()
    cache_providers.refusal()   # logs the providers registered before this pack (others: at a prompt's start)
    try:
        users.register()
    except Exception as e:  # noqa: BLE001 - without it a --multi-user server keeps one namespace
        transactions.log.error("seedreuse: per-user namespaces not installed: %s", e)
    try:
        routes.register()
    except Exception as e:  # routes are feedback only; nodes still work without them
        transactions.log.error("seedreuse: HTTP routes not registered: %s", e)
    return SeedReuseExtension()
