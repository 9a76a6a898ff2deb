"""The ComfyUI user of each request and prompt, and the cache namespace it may use.

With ``--multi-user`` ComfyUI tells users apart by the ``comfy-user`` request header, but the
0.3.75 prompt queue does not record who queued a prompt. The pack records it itself:

1. a request middleware resolves the user of ``POST /prompt`` (ComfyUI's own
   ``get_request_user_id``: an unknown user is refused there, as ComfyUI's user routes do);
2. the on_prompt handler, which runs inside that request, writes it into the prompt's
   ``extra_data`` under ``seedreuse_user``, replacing whatever the client sent there: a
   client cannot claim another user's namespace through the prompt body;
3. the lifecycle hook reads it back when the prompt executes (transactions.PromptContext.user)
   and the Session node, the dry run and the routes resolve caches under that user's
   namespace (reuse_backend/store/namespaces.py) only.

Without ``--multi-user`` the user is None and every cache lives directly under the root, as
before. On a multi-user server, a prompt queued without a known user (no header) gets that
shared namespace, never a user's. ``SEEDREUSE_SHARED_NAMESPACE=1`` keeps one namespace on a multi-user server.

What this does not guarantee: the header is ComfyUI's identification, not authentication.
"""
from __future__ import annotations

import contextvars

from ..reuse_backend.errors import UnknownUserError
from ..reuse_backend.store import namespaces
from . import host
from .host import web

EXTRA_KEY = "seedreuse_user"
_request_user: contextvars.ContextVar = contextvars.ContextVar("seedreuse_request_user", default=None)
_PROMPT_PATHS = ("/prompt", "/api/prompt")
# one status for an unknown user on every route of the pack (ComfyUI's user routes answer 403)
UNKNOWN_USER_STATUS = 403


def root_for(user: str | None) -> str:
    """Where ``user``'s caches live under the configured location (a folder, or a bucket prefix)."""
    return str(namespaces.user_root(host.cache_root(), user))


def user_of(request) -> str | None:
    """The request's user: None without --multi-user or without a comfy-user header (the
    shared namespace, as for a prompt queued without one); UnknownUserError for a user the
    server does not know (every route answers it with UNKNOWN_USER_STATUS)."""
    if "comfy-user" not in request.headers:
        return None
    try:
        return host.request_user(request)
    except KeyError as e:
        raise UnknownUserError(f"unknown ComfyUI user: {e.args[0] if e.args else ''}",
                                  expected="a user of this server (comfy-user header)",
                                  actual="unknown", fix="select a user in ComfyUI and retry") from None


def root_of_request(request) -> str:
    return root_for(user_of(request))


@web.middleware
async def remember_prompt_user(request, handler):
    if request.method == "POST" and request.path in _PROMPT_PATHS and host.multi_user():
        try:
            user = host.request_user(request)
        except KeyError:
            # no header, or a user the server does not know: ComfyUI still queues the prompt;
            # it gets the shared namespace, never a user's
            user = None
        token = _request_user.set(user)
        try:
            return await handler(request)
        finally:
            _request_user.reset(token)
    return await handler(request)


def stamp_prompt_user(json_data):
    """on_prompt handler: the user resolved by the middleware goes into extra_data."""
    if not isinstance(json_data, dict) or not host.multi_user():
        return json_data
    extra = json_data.get("extra_data")
    if not isinstance(extra, dict):
        extra = json_data["extra_data"] = {}
    user = _request_user.get()
    if user is None:
        extra.pop(EXTRA_KEY, None)
    else:
        extra[EXTRA_KEY] = user
    return json_data


def prompt_user(extra_data) -> str | None:
    """The user recorded for a queued prompt (None: single-user server or shared namespace)."""
    if not host.multi_user() or not isinstance(extra_data, dict):
        return None
    user = extra_data.get(EXTRA_KEY)
    return user if isinstance(user, str) else None   # validated where it becomes a path (root_for)


def register() -> None:
    if host.multi_user():
        if not host.add_middleware(remember_prompt_user):
            host.log.error("seedreuse: --multi-user without the prompt-user middleware: every prompt "
                           "uses the shared namespace")
    host.add_on_prompt_handler(stamp_prompt_user)
