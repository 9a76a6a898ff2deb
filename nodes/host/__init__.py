"""Everything the pack knows about the ComfyUI host, in one package.

The rest of nodes/ imports ComfyUI only through this package and reads no attribute of a host
object itself (tests/test_architecture.py checks both), so adapting the pack to another ComfyUI
version touches these modules alone:

    files.py         the cache root's default, files named by widget values, the output folder
    server.py        the running server and prompt: events, queue entry, users, middlewares, routes, progress
    executor.py      the prompt lifecycle: PromptExecutor wrapped (begin, end, errors, success)
    node_classes.py  what node classes say: inputs, outputs, output node, validate and change-token functions
    caching.py       0.33's external cache providers and the token that keeps the pack's nodes out of them

Module-level imports are the ones every node module needs at class-definition time (the V3 node
API, the graph builder); the rest are imported where used, so importing this package stays cheap.
"""
from __future__ import annotations

import logging

from comfy_api.latest import ComfyExtension, InputImpl, io, ui          # noqa: F401 (re-exported)
from comfy_execution.graph_utils import GraphBuilder                    # noqa: F401 (re-exported)
from comfy_execution.graph_utils import is_link as graph_is_link        # noqa: F401 (re-exported)

from .caching import LOCAL_ONLY, cache_provider_names, local_only, providers_skip_local_only  # noqa: F401
from .executor import ExecutionFailure, PromptHooks, hook_prompts                            # noqa: F401
from .files import cache_root, input_file_path, output_directory, resolve_file, save_path  # noqa: F401
from .node_classes import (NodeClasses, change_token_fn, clip_vision_output_class, first_real_override,  # noqa: F401
                           nested_tensor_class, node_class, validate_signature)
from .server import (add_middleware, add_on_prompt_handler, current_prompt_id, multi_user, progress,  # noqa: F401
                     request_user, routes, send_event, send_to_client, set_running_extra_data,
                     throw_if_interrupted, web)

log = logging.getLogger("seedreuse")
