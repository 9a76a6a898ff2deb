"""SeedReuse test-only ComfyUI node pack (V3 API): stand-ins for the encoders that cannot be tiny.

Loaded by the test workers (seedreuse_lab/worker.py symlinks this folder into custom_nodes).
Never shipped: the real pack is the repository root.
"""
import logging
import os
import threading
import time

from typing_extensions import override

from comfy_api.latest import ComfyExtension, io

from .family_standins import FAMILY_NODES
from .floor_nodes import FLOOR_NODES
from .image_family_standins import IMAGE_FAMILY_NODES
from .newer_nodes import NEWER_NODES
from .prompt_nodes import PROMPT_NODES
from .standins import NODES, register_routes
from .talk_probe import TALK_PROBE_NODES

_log = logging.getLogger("seedreuse.test")


class SeedReuseTestExtension(ComfyExtension):
    @override
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return (list(NODES) + list(FAMILY_NODES) + list(NEWER_NODES) + list(FLOOR_NODES) + list(TALK_PROBE_NODES)
                + list(PROMPT_NODES) + list(IMAGE_FAMILY_NODES))


_routes_done = False


def _start_parent_watchdog() -> None:
    """Exit when the test process that started this worker is gone (it sets
    SEEDREUSE_TEST_PARENT_PID), so a killed pytest never leaves ComfyUI servers behind."""
    pid = os.environ.get("SEEDREUSE_TEST_PARENT_PID")
    if not pid or not pid.isdigit():
        return
    pid = int(pid)

    def gone() -> bool:
        try:
            os.kill(pid, 0)        # the test process (also when started through netns/unshare)
            return False
        except ProcessLookupError:
            return True
        except PermissionError:
            return False

    def loop():
        while not gone():
            time.sleep(1.0)
        _log.warning("seedreuse test: parent %s is gone, exiting", pid)
        os._exit(3)

    if gone():                     # the parent died before this worker finished starting
        os._exit(3)
    threading.Thread(target=loop, daemon=True, name="seedreuse-test-parent-watchdog").start()


_start_parent_watchdog()


async def comfy_entrypoint() -> SeedReuseTestExtension:
    global _routes_done
    if os.environ.get("SEEDREUSE_TEST_PROVIDER_DIR"):   # tests/test_cache_provider.py only (0.33+)
        from . import folder_provider
        await folder_provider.register()
    if not _routes_done:
        try:
            register_routes()
            _routes_done = True
        except Exception as e:  # no PromptServer (imported outside a server)
            _log.warning("seedreuse test routes not registered: %s", e)
    return SeedReuseTestExtension()
