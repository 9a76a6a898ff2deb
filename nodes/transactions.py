"""One queued prompt = one transaction per cache it touches.

The first reuse node of a prompt that executes begins the transaction (run lease, staging
folder; no writer lock: runs of other workers stage side by side and commit in turn,
folder/commit.py); every reuse node of the prompt stages into it. The prompt's end decides its fate:

- success: the commit runs inside the executor's ``execution_success`` message, i.e. before
  the websocket reports success and before /history shows the prompt as completed, so a
  client that waits for completion (the serial contract) always finds the new cache;
- error anywhere in the prompt (also after our nodes), interrupt, or an exception in the
  executor: the staging is discarded; the last good cache is untouched.

The host package wraps the executor (host/executor.py) and calls this module at each point of
a prompt's life (``install``). If it cannot, the pack logs an error at load and every reuse
node refuses to run: never a silent run without a lifecycle.
"""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

from ..reuse_backend.errors import CorruptCacheError, InvalidRequestError, ReuseError, TransactionError
from ..reuse_backend.store.run_info import RunInfo
from ..reuse_backend.stores import open_cache
from . import cache_providers, host, users

log = host.log
_lock = threading.RLock()
_prompts: dict[str, "PromptContext"] = {}
_epoch = [0]
HOOK_STATE = {"installed": False, "error": None}
# Called as hook(ctx, root, name, tx_state) before each successful prompt's commit, in order
# (e.g. carry.carry_unexecuted_slots); registered by the package at load, so this module
# imports no other node module.
BEFORE_COMMIT: list = []
# Called as hook(ctx) once a prompt succeeded and its caches are committed, inside the executor's
# ``execution_success`` message (so before the client hears of the success); a dict it returns
# is added to that message's data. A hook that raises is logged and skipped: it never fails the
# prompt. Registered at load (auto_mode.report_on_success).
ON_SUCCESS: list = []


def register_before_commit(fn) -> None:
    if fn not in BEFORE_COMMIT:
        BEFORE_COMMIT.append(fn)


def register_on_success(fn) -> None:
    if fn not in ON_SUCCESS:
        ON_SUCCESS.append(fn)


@dataclass
class TxState:
    cache: object                 # the store's cache handle (the folder or the object store)
    tx: object
    staged_slots: set = field(default_factory=set)
    new_content: bool = False     # anything staged that is not a carry from the base


@dataclass
class PromptContext:
    prompt_id: str
    prompt: dict
    user: str | None = None                        # the ComfyUI user who queued it (users.py)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    txs: dict = field(default_factory=dict)        # (root, name) -> TxState
    decisions: dict = field(default_factory=dict)  # node id -> decision object
    notes: dict = field(default_factory=dict)      # free-form per node data
    caches: dict = field(default_factory=dict)     # (root, name) -> the one cache handle of this prompt
    snapshots: dict = field(default_factory=dict)  # (root, name) -> (read-only Snapshot | None, its error)
    used_slots: dict = field(default_factory=dict)  # (root, name) -> slots served or staged
    resolved: dict = field(default_factory=dict)    # file identities shared by the prompt's keys
    refusal: str | None = None                     # why reuse nodes refuse (cache_providers.py)
    extra: dict = field(default_factory=dict)      # the prompt's extra_data as the executor got it
    results: dict = field(default_factory=dict)    # Encode-or-Reuse node id -> what it did (its payload)
    claims: dict = field(default_factory=dict)      # node id -> its single-flight claim, released after the commit

    def cache(self, root: str, name: str):
        """The one handle of this prompt on cache ``name`` under ``root`` (a folder or an object
        store: store.open_cache decides): its name validated and its settings read once."""
        k = (root, name)
        if k not in self.caches:
            self.caches[k] = open_cache(root, name)
        return self.caches[k]

    def snapshot(self, root: str, name: str):
        """The committed version this prompt reads: the open transaction's base, else one
        read-only snapshot per cache for the whole prompt (no lock: a prompt that only reuses
        never writes, so it neither waits for nor blocks a writer)."""
        st = self.txs.get((root, name))
        if st is not None:
            return st.tx.base
        k = (root, name)
        if k not in self.snapshots:
            cache = self.cache(root, name)
            cache.recover_leftovers(f"recover-{self.run_id}")
            try:
                self.snapshots[k] = (cache.snapshot(), None)
                if cache.gone:
                    self.notes[("gone", root, name)] = cache.gone
            except CorruptCacheError as e:   # a broken version is never used; the next writer replaces it
                log.warning("seedreuse: cache '%s' is unreadable, treating it as empty: %s", name, e)
                self.snapshots[k] = (None, e)
        return self.snapshots[k][0]

    def snapshot_error(self, root: str, name: str):
        """Why this prompt's snapshot of the cache is None: the CorruptCacheError of an unreadable
        committed version (kept with the snapshot), or None when nothing was committed."""
        st = self.txs.get((root, name))
        if st is not None:
            return st.tx.base_error
        self.snapshot(root, name)
        return self.snapshots[(root, name)][1]

    def drop_snapshot(self, root: str, name: str) -> None:
        """Forget the prompt's snapshot of a cache (the next snapshot() reads the version that is
        current now; values already loaded from it stay valid)."""
        snap, _ = self.snapshots.pop((root, name), (None, None))
        if snap is not None:
            snap.close()

    def release_claims(self) -> None:
        claims, self.claims = self.claims, {}
        for c in claims.values():
            c.release()

    def use_slot(self, root: str, name: str, slot: str, node_id: str | None = None) -> None:
        """One node per slot and cache in a prompt. The same node may execute more than once in
        one prompt (with --cache-none ComfyUI re-runs ancestors of expanded loop nodes)."""
        used = self.used_slots.setdefault((root, name), {})
        if slot in used and used[slot] != node_id:
            raise InvalidRequestError(f"slot '{slot}' is used by two Encode-or-Reuse nodes on cache '{name}' "
                                      f"(nodes {used[slot]} and {node_id})",
                                      expected="a unique slot name per node", actual=slot,
                                      fix="give each Encode or Reuse node its own slot name")
        used[slot] = node_id

    def close_snapshots(self) -> None:
        for snap, _ in self.snapshots.values():
            if snap is not None:
                snap.close()
        self.snapshots.clear()

    def transaction(self, root: str, name: str) -> TxState:
        k = (root, name)
        st = self.txs.get(k)
        if st is None:
            cache = self.cache(root, name)
            tx = cache.begin(RunInfo(run_id=self.run_id, prompt_id=self.prompt_id))
            st = self.txs[k] = TxState(cache, tx)
        return st


def global_epoch() -> int:
    """Changes whenever a transaction that staged new content ends in this process."""
    return _epoch[0]


def current_user() -> str | None:
    """The ComfyUI user of the running prompt (None: single-user server, or no prompt context;
    without the lifecycle hook every reuse node refuses to run anyway)."""
    with _lock:
        ctx = _prompts.get(host.current_prompt_id())
    return ctx.user if ctx is not None else None


def current() -> PromptContext:
    if not HOOK_STATE["installed"]:
        raise TransactionError("the SeedReuse lifecycle hook is not installed, so runs cannot be published safely",
                               expected="hook installed at load", actual=HOOK_STATE["error"] or "not installed",
                               fix="check the ComfyUI log for 'seedreuse' errors at startup; this ComfyUI "
                                   "version may be unsupported")
    pid = host.current_prompt_id()
    with _lock:
        ctx = _prompts.get(pid)
    if ctx is None:
        raise TransactionError("a SeedReuse node ran outside a prompt the lifecycle hook saw",
                               expected="a prompt started by the host's executor", actual=f"prompt id {pid!r}",
                               fix="queue the workflow normally through ComfyUI")
    refuse_if_unsafe(ctx)
    return ctx


def refuse_if_unsafe(ctx: PromptContext | None = None) -> None:
    """Raise why the pack refuses this prompt (cache_providers.py), if it does; ``ctx``
    defaults to the running prompt's (the Session, which needs no context otherwise)."""
    if ctx is None:
        with _lock:
            ctx = _prompts.get(host.current_prompt_id())
    if ctx is not None and ctx.refusal:
        raise TransactionError(ctx.refusal, expected="no external cache provider that can serve SeedReuse nodes",
                               actual=", ".join(host.cache_provider_names()), fix=cache_providers.FIX)


def _finish(ctx: PromptContext, success: bool) -> None:
    """Commit (success) or discard every transaction of the prompt. Discard never raises."""
    errors = []
    for (root, name), st in list(ctx.txs.items()):
        try:
            if success:
                for hook in BEFORE_COMMIT:
                    hook(ctx, root, name, st)
                if st.new_content:
                    st.tx.commit()
                else:  # only carried what is already committed: keep the current version
                    st.tx.discard()
            else:
                st.tx.discard()
        except Exception as e:
            errors.append(e)
            try:
                st.tx.discard()
            except Exception as e2:  # the lock's lease and recovery clean up after us
                log.error("seedreuse: discard of cache '%s' failed: %s", name, e2)
        finally:
            if st.new_content:
                with _lock:
                    _epoch[0] += 1
    ctx.txs.clear()
    ctx.release_claims()         # after the commit: a run waiting for this slot key now finds it
    if errors:
        raise errors[0]


def _open(prompt_id, prompt, extra_data=None):
    extra = extra_data if isinstance(extra_data, dict) else {}
    with _lock:
        _prompts[prompt_id] = PromptContext(prompt_id, prompt, users.prompt_user(extra_data),
                                            refusal=cache_providers.refusal(), extra=extra)


def _on_success(ctx: PromptContext, data: dict) -> dict:
    """The execution_success data with what the ON_SUCCESS hooks add."""
    for hook in ON_SUCCESS:
        try:
            more = hook(ctx)
        except Exception as e:  # noqa: BLE001 - feedback never fails a prompt that succeeded
            log.error("seedreuse: %s failed for prompt %s: %s", getattr(hook, "__name__", hook), ctx.prompt_id, e)
            continue
        if more:
            data = {**data, **more}
    return data


def _close(prompt_id, success: bool):
    with _lock:
        ctx = _prompts.pop(prompt_id, None)
    if ctx is None:
        return
    try:
        if ctx.txs:
            _finish(ctx, success)
    finally:
        ctx.release_claims()
        ctx.close_snapshots()


def _end(prompt_id, success: bool) -> None:
    """After the executor returned: the fallback commit if the success message did not run it."""
    try:
        _close(prompt_id, success)
    except Exception as e:
        log.error("seedreuse: publishing the cache of prompt %s failed: %s", prompt_id, e)
        raise


def _error_details(ex) -> dict | None:
    return ex.to_dict() if isinstance(ex, ReuseError) else None


def _success_message(prompt_id, data: dict):
    """Inside the executor's execution_success message: commit the prompt's caches; the message
    data with what the ON_SUCCESS hooks add, or the commit's failure to report instead."""
    with _lock:
        ctx = _prompts.get(prompt_id)
    if ctx is not None and ctx.txs:
        try:
            _finish(ctx, True)
        except Exception as e:
            log.error("seedreuse: commit failed for prompt %s: %s", prompt_id, e)
            return host.ExecutionFailure("SeedReuse commit", f"SeedReuse could not publish the cache: {e}",
                                         type(e).__name__, e.to_dict() if isinstance(e, ReuseError) else {})
    if ctx is not None and ON_SUCCESS:
        data = _on_success(ctx, data)
    return data


def install() -> bool:
    """Hook the prompt lifecycle into the host's executor; False (logged) when it cannot be."""
    try:
        host.hook_prompts(host.PromptHooks(begin=_open, end=_end, error_details=_error_details,
                                           on_success=_success_message))
    except Exception as e:
        HOOK_STATE["error"] = f"{type(e).__name__}: {e}"
        log.error("seedreuse: cannot install the prompt lifecycle hook (%s); reuse nodes will refuse to run", e)
        return False
    HOOK_STATE["installed"] = True
    return True
