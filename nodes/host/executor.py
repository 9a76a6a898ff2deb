"""The prompt lifecycle as the host's executor runs it: ``execution.PromptExecutor`` wrapped
(present from 0.3.x to current ComfyUI), so the pack hears when a prompt begins and ends,
succeeds (inside the ``execution_success`` message, before the client hears of it) or fails.

The wrapped methods and the positional signatures the host calls them with:
``execute(self, prompt, prompt_id, extra_data={}, execute_outputs=[])``,
``handle_execution_error(self, prompt_id, prompt, current_outputs, executed, error, ex)`` and
``add_message(self, event, data, broadcast)``; ``self.success`` is the executor's verdict.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger("seedreuse")
_MARK = "_seedreuse_hooked"


@dataclass
class ExecutionFailure:
    """Turns the prompt's success into an ``execution_error`` message (and the executor's verdict
    into a failure): what the pack found wrong after every node ran."""
    node_type: str                 # shown where the host shows the failing node's type
    message: str
    exception_type: str
    details: dict = field(default_factory=dict)   # the structured error (``seedreuse`` key)


@dataclass
class PromptHooks:
    """What the pack does at each point of a prompt's life.

    begin(prompt_id, prompt, extra_data): before the first node runs.
    end(prompt_id, success): after the executor returned (also on an exception); may raise:
        the prompt is then marked failed.
    error_details(exception) -> dict | None: the structured error added to the host's
        ``execution_error`` message (``seedreuse`` key) for an exception a node raised.
    on_success(prompt_id, data) -> dict | ExecutionFailure: inside ``execution_success``: the
        message's data to send, or the failure to report instead.
    """
    begin: object
    end: object
    error_details: object
    on_success: object


def hook_prompts(hooks: PromptHooks) -> None:
    """Wrap the executor's methods once per process (a second call changes nothing). Raises
    whatever the host's executor lacks (AttributeError, ImportError): then nothing is wrapped."""
    import execution
    pe = execution.PromptExecutor
    if getattr(pe, _MARK, False):
        return
    orig_execute = pe.execute
    orig_add_message = pe.add_message
    orig_handle_error = getattr(pe, "handle_execution_error", None)

    def execute(self, prompt, prompt_id, *args, **kwargs):
        hooks.begin(prompt_id, prompt, args[0] if args else kwargs.get("extra_data"))
        ok = False
        try:
            result = orig_execute(self, prompt, prompt_id, *args, **kwargs)
            ok = bool(getattr(self, "success", False))
            return result
        finally:
            try:
                hooks.end(prompt_id, ok)
            except Exception as e:  # noqa: BLE001 - reported as the prompt's failure
                log.error("seedreuse: finishing prompt %s failed: %s", prompt_id, e)
                self.success = False

    def handle_execution_error(self, prompt_id, prompt, current_outputs, executed, error, ex, *args, **kwargs):
        # The execution_error message carries only text; the structured error goes next to it.
        self._seedreuse_error = hooks.error_details(ex)
        try:
            return orig_handle_error(self, prompt_id, prompt, current_outputs, executed, error, ex, *args, **kwargs)
        finally:
            self._seedreuse_error = None

    def add_message(self, event, data, broadcast, *args, **kwargs):
        if event == "execution_error" and getattr(self, "_seedreuse_error", None) and "seedreuse" not in data:
            data = {**data, "seedreuse": self._seedreuse_error}
        if event == "execution_success":
            pid = data.get("prompt_id")
            got = hooks.on_success(pid, data)
            if isinstance(got, ExecutionFailure):
                self.success = False
                return orig_add_message(self, "execution_error", {
                    "prompt_id": pid, "node_id": None, "node_type": got.node_type, "executed": [],
                    "exception_message": got.message, "exception_type": got.exception_type, "traceback": [],
                    "current_inputs": {}, "current_outputs": [], "seedreuse": got.details}, broadcast, *args, **kwargs)
            data = got
        return orig_add_message(self, event, data, broadcast, *args, **kwargs)

    pe.execute = execute
    pe.add_message = add_message
    if orig_handle_error is not None:
        pe.handle_execution_error = handle_execution_error
    setattr(pe, _MARK, True)
