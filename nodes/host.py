"""Everything the pack needs from the ComfyUI host, in one place.

The rest of nodes/ imports ComfyUI only through this module (a test checks it), so adapting
the pack to another ComfyUI version touches this file alone. Module-level imports are the
ones every node module needs at class-definition time (the V3 node API, the graph builder);
the rest are imported where used, so importing this module stays cheap.
"""
from __future__ import annotations

import logging
import os
import re

import folder_paths
from comfy_api.latest import ComfyExtension, InputImpl, io, ui          # noqa: F401 (re-exported)
from comfy_execution.graph_utils import GraphBuilder                    # noqa: F401 (re-exported)
from comfy_execution.graph_utils import is_link as graph_is_link        # noqa: F401 (re-exported)

from ..reuse_backend.keys import file_identity

from ..reuse_backend.store import roots

log = logging.getLogger("seedreuse")

ROOT_ENV = "SEEDREUSE_CACHE_ROOT"
# a file name: anything, a dot, an extension, and ComfyUI's optional " [input]" annotation
_FILE_RE = re.compile(r"^[^\n\r\x00]{1,512}\.[A-Za-z0-9]{1,16}( \[(input|output|temp)\])?$")


def cache_root() -> str:
    """The configured cache location: $SEEDREUSE_CACHE_URL (``s3://bucket/prefix``: the object
    store, with the folder below as this host's local tier), else the folder $SEEDREUSE_CACHE_ROOT,
    else <ComfyUI user dir>/seedreuse_cache."""
    default = os.path.join(folder_paths.get_user_directory(), "seedreuse_cache")
    folder = str(roots.resolve_root(os.environ.get(ROOT_ENV) or None, default=default))
    roots.set_default_root(folder)
    return roots.cache_url() or folder


# widget value -> (identity prefix, path, kind) of the file it resolved to: finding a model file
# asks every model folder in turn (~40 on 0.3.75, a stat or more each), about 0.3 ms per value on
# every prompt; a re-queue names the same files. An entry is used only while its path is still a
# file (and, for input files, still inside the input/output/temp folders); the content identity
# itself is always recomputed (file_identity: re-hashed when size/mtime/inode change). What this
# does not follow: a file of the same name added later to a model folder that sorts earlier
# keeps resolving to the first one found (restart the worker after such a change).
_RESOLVED: dict[str, tuple[str, str, str]] = {}
_RESOLVED_MAX = 4096


def resolve_file(class_type: str, input_name: str, value: str) -> str | None:
    """Content identity of a file named by a widget value (input file or model file), or None."""
    if not isinstance(value, str) or not _FILE_RE.match(value):
        return None
    hit = _RESOLVED.get(value)
    if hit is not None:
        prefix, path, kind = hit
        if os.path.isfile(path) and (kind != "input" or _inside_io_folders(path)):
            return prefix + file_identity.content_id(path, kind=kind)
        _RESOLVED.pop(value, None)
    found = _find_file(value)
    if found is None:
        return None
    if len(_RESOLVED) >= _RESOLVED_MAX:
        _RESOLVED.clear()
    _RESOLVED[value] = found
    prefix, path, kind = found
    return prefix + file_identity.content_id(path, kind=kind)


def _find_file(value: str) -> tuple[str, str, str] | None:
    try:
        path = folder_paths.get_annotated_filepath(value)
    except Exception:  # annotated-path parsing of odd strings: not a file then
        path = None
    # only files inside ComfyUI's input/output/temp folders: a widget value naming any other
    # path ("../x", "/etc/passwd") is plain text to the key, never read
    if path and os.path.isfile(path) and _inside_io_folders(path):
        return "input:", path, "input"
    for folder in sorted(folder_paths.folder_names_and_paths):
        if folder in ("custom_nodes", "configs"):
            continue
        try:
            path = folder_paths.get_full_path(folder, value)
        except Exception:
            path = None
        if path and os.path.isfile(path):
            return f"model:{folder}:", path, "model"
    return None


def input_file_path(value) -> str | None:
    """The path of an input file named by a widget value (as LoadImage / LoadAudio resolve it),
    only inside ComfyUI's input/output/temp folders; None for anything else."""
    if not isinstance(value, str) or not _FILE_RE.match(value):
        return None
    try:
        path = folder_paths.get_annotated_filepath(value)
    except Exception:
        return None
    return path if path and os.path.isfile(path) and _inside_io_folders(path) else None


def _inside_io_folders(path: str) -> bool:
    real = os.path.realpath(path)
    for base in (folder_paths.get_input_directory(), folder_paths.get_output_directory(),
                 folder_paths.get_temp_directory()):
        b = os.path.realpath(base)
        if real.startswith(b + os.sep):
            return True
    return False


def prompt_executor_class():
    """``execution.PromptExecutor`` (the prompt lifecycle hook wraps its methods)."""
    import execution
    return execution.PromptExecutor


def prompt_server():
    """The running ``server.PromptServer`` instance (routes, websocket messages)."""
    from server import PromptServer
    return PromptServer.instance


def node_class(class_type: str):
    """The node class registered for ``class_type`` on this host, or None."""
    import nodes as comfy_nodes   # ComfyUI's node registry (the host's top-level module)
    return comfy_nodes.NODE_CLASS_MAPPINGS.get(class_type)


def change_token_fn(cls):
    """The method execution.IsChangedCache calls for this class (V3 fingerprint_inputs when a
    class in its MRO overrides it, else V1 IS_CHANGED), or None."""
    try:
        from comfy_api.internal import _ComfyNodeInternal, first_real_override
    except ImportError:  # older hosts: V3 nodes define it on the class itself
        if hasattr(cls, "GET_SCHEMA") and "fingerprint_inputs" in vars(cls):
            return cls.fingerprint_inputs
        return getattr(cls, "IS_CHANGED", None)
    if isinstance(cls, type) and issubclass(cls, _ComfyNodeInternal):
        fn = first_real_override(cls, "fingerprint_inputs")
        if fn is not None:
            return fn
    return getattr(cls, "IS_CHANGED", None)


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


def clip_vision_output_class():
    """``comfy.clip_vision.Output`` (restored from caches by a registered adapter), or None."""
    try:
        import comfy.clip_vision
    except ImportError:  # a host without CLIP vision support
        return None
    return comfy.clip_vision.Output


def current_prompt_id() -> str | None:
    try:
        from comfy_execution.utils import get_executing_context
        ctx = get_executing_context()
        if ctx is not None:
            return ctx.prompt_id
    except ImportError:
        pass
    try:
        return getattr(prompt_server(), "last_prompt_id", None)
    except Exception:
        return None


def send_event(event: str, data: dict) -> None:
    """A websocket event to the client that queued the running prompt (namespaced seedreuse.*)."""
    try:
        srv = prompt_server()
        srv.send_sync(event, data, srv.client_id)
    except Exception as e:  # feedback must never break a run
        log.debug("could not send %s: %s", event, e)


def send_to_client(event: str, data: dict, client_id) -> bool:
    """A websocket event to the client ``client_id`` only; nothing is sent without one (the
    server's send_sync would broadcast it to every client). False when nothing was sent."""
    if not client_id:
        return False
    try:
        prompt_server().send_sync(event, data, client_id)
        return True
    except Exception as e:  # feedback must never break a run
        log.debug("could not send %s: %s", event, e)
        return False


def set_running_extra_data(prompt_id: str, key: str, value) -> bool:
    """``extra_data[key] = value`` in the running prompt's entry of the queue: the copy the host
    writes into the history when the prompt ends (``PromptQueue.currently_running`` holds a deep
    copy of the queued item, and ``task_done`` moves it to the history; the same in 0.3.75 and
    0.33.0). False when no running entry has that prompt id: the history keeps what was queued."""
    try:
        q = prompt_server().prompt_queue
        with q.mutex:
            for item in q.currently_running.values():
                if len(item) > 3 and item[1] == prompt_id and isinstance(item[3], dict):
                    item[3][key] = value
                    return True
    except Exception as e:  # noqa: BLE001 - a host whose queue differs: the history keeps the queued value
        log.debug("could not update the queue entry of %s: %s", prompt_id, e)
    return False


def output_directory() -> str:
    return folder_paths.get_output_directory()


def save_path(filename_prefix: str, width: int, height: int):
    return folder_paths.get_save_image_path(filename_prefix, output_directory(), width, height)


def progress_bar(total: int):
    import comfy.utils
    return comfy.utils.ProgressBar(total)


def throw_if_interrupted() -> None:
    import comfy.model_management
    comfy.model_management.throw_exception_if_processing_interrupted()


def multi_user() -> bool:
    """True when ComfyUI runs with ``--multi-user`` (users told apart by the comfy-user header)."""
    try:
        from comfy.cli_args import args
    except ImportError:
        return False
    return bool(getattr(args, "multi_user", False))


def request_user(request) -> str | None:
    """The ComfyUI user of an HTTP request (None without --multi-user); KeyError for a user
    the server does not know, as ComfyUI's own user routes answer."""
    if not multi_user():
        return None
    return prompt_server().user_manager.get_request_user_id(request)


def add_middleware(middleware) -> bool:
    """Append an aiohttp middleware to the server; False once the app is frozen (started)."""
    try:
        prompt_server().app.middlewares.append(middleware)
        return True
    except (RuntimeError, AttributeError) as e:
        log.warning("seedreuse: cannot add a request middleware (%s)", e)
        return False
