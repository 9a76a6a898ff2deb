"""External cache providers (ComfyUI 0.33+): what the pack lets them serve, and when it refuses.

A provider shares node outputs between ComfyUI instances (a Redis or disk store): on a local
miss the host asks it for the node's outputs, after a node executes the host gives it the
outputs. The pack's nodes must never be served that way: what they yield depends on the cache
version their run reads and on the transaction of their prompt, neither of which is in
ComfyUI's key. Their change tokens carry ``host.LOCAL_ONLY`` (a NaN), which the host's rule
keeps away from every provider, for them and every node downstream of them (see host.py).
Nodes upstream of the pack (loaders, encoders) may be served by a provider; a value it serves
is what the pack then reuses or stages, as a value from ComfyUI's own memory would be.

A host with providers but without that rule cannot be made safe from here: then every reuse
node refuses to run while a provider is registered (``refusal()``), with a message naming the
providers and the fix. Checked when a prompt starts, since other packs may register providers
after this one loads; each new set of providers is logged once.
"""
from __future__ import annotations

from . import host

log = host.log
_reported: list = [()]          # the provider names last logged


def refusal() -> str | None:
    """None when the registered providers (if any) cannot serve or receive the pack's nodes;
    else why every reuse node refuses to run."""
    names = tuple(host.cache_provider_names())
    if not names:
        _reported[0] = ()
        return None
    listed = ", ".join(names)
    if host.providers_skip_local_only():
        if _reported[0] != names:
            _reported[0] = names
            log.info("seedreuse: external cache provider(s) %s registered: SeedReuse nodes and every node "
                     "downstream of them are never looked up in or stored through them (their change token "
                     "holds NaN); nodes upstream of them (loaders, encoders) may be served by them", listed)
        return None
    msg = (f"external cache provider(s) {listed} are registered and this ComfyUI does not keep NaN-keyed "
           "nodes away from providers, so a provider could serve a SeedReuse node an output of another "
           "cache version or of a failed run")
    if _reported[0] != names:
        _reported[0] = names
        log.error("seedreuse: %s; every SeedReuse node refuses to run. Fix: %s", msg, FIX)
    return msg


FIX = ("unregister the external cache provider(s) on this ComfyUI (remove or disable the custom node that "
       "registers them), or run a ComfyUI whose cache providers skip keys holding NaN (0.33.0 does)")
