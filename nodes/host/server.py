"""The running ComfyUI server and prompt: websocket events, the queue's entry of the running
prompt, request users, request middlewares, on-prompt handlers, routes, progress, interrupts."""
from __future__ import annotations

import logging

from aiohttp import web      # noqa: F401 (re-exported) ComfyUI's web framework: the pack's routes answer through it

log = logging.getLogger("seedreuse")


def _prompt_server():
    """The running ``server.PromptServer`` instance."""
    from server import PromptServer
    return PromptServer.instance


def routes():
    """The server's aiohttp route table (``routes.get(path)`` decorators)."""
    return _prompt_server().routes


def add_on_prompt_handler(handler) -> None:
    """``handler(json_data) -> json_data`` runs on every POST /prompt before validation."""
    _prompt_server().add_on_prompt_handler(handler)


def add_middleware(middleware) -> bool:
    """Append an aiohttp middleware to the server; False once the app is frozen (started)."""
    try:
        _prompt_server().app.middlewares.append(middleware)
        return True
    except (RuntimeError, AttributeError) as e:
        log.warning("seedreuse: cannot add a request middleware (%s)", e)
        return False


def current_prompt_id() -> str | None:
    try:
        from comfy_execution.utils import get_executing_context
        ctx = get_executing_context()
        if ctx is not None:
            return ctx.prompt_id
    except ImportError:
        pass
    try:
        return getattr(_prompt_server(), "last_prompt_id", None)
    except Exception:
        return None


def send_event(event: str, data: dict) -> None:
    """A websocket event to the client that queued the running prompt (namespaced seedreuse.*)."""
    try:
        srv = _prompt_server()
        srv.send_sync(event, data, srv.client_id)
    except Exception as e:  # feedback must never break a run
        log.debug("could not send %s: %s", event, e)


def send_to_client(event: str, data: dict, client_id) -> bool:
    """A websocket event to the client ``client_id`` only; nothing is sent without one (the
    server's send_sync would broadcast it to every client). False when nothing was sent."""
    if not client_id:
        return False
    try:
        _prompt_server().send_sync(event, data, client_id)
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
        q = _prompt_server().prompt_queue
        with q.mutex:
            for item in q.currently_running.values():
                if len(item) > 3 and item[1] == prompt_id and isinstance(item[3], dict):
                    item[3][key] = value
                    return True
    except Exception as e:  # noqa: BLE001 - a host whose queue differs: the history keeps the queued value
        log.debug("could not update the queue entry of %s: %s", prompt_id, e)
    return False


def progress(done: int, total: int) -> None:
    """The running node's progress bar on the canvas at ``done`` of ``total``."""
    import comfy.utils
    comfy.utils.ProgressBar(total).update_absolute(done, total)


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
    return _prompt_server().user_manager.get_request_user_id(request)
