"""Encode or Reuse: restore an encoder output from the shared cache, or encode and stage it.

The ``value`` input is lazy. On a compatible committed cache the node never requests it,
so the encoder and any loader that only feeds it never execute, on any worker. Otherwise
it requests the value and stages it into the prompt's transaction (published only if the
whole prompt succeeds).
"""
from __future__ import annotations

import time


from ..reuse_backend import settings
from ..reuse_backend.store import roots
from ..reuse_backend.errors import InvalidRequestError, ReuseError
from ..reuse_backend.keys.slots import decide_slot
from ..reuse_backend.keys.value_checks import inspect_slot
from . import host, transactions
from .host import io
from .graph_view import SLOT_IO_TYPES, GraphView, slot_key
from .session_node import SessionType

# (node id suffix, display, io type class, type name for docs)
VARIANTS = [
    ("Conditioning", "Conditioning", io.Conditioning, "text (or multimodal) encoder output"),
    ("ClipVision", "CLIP Vision Output", io.ClipVisionOutput, "CLIP vision encoder output"),
    ("Latent", "Latent", io.Latent, "VAE-encoded reference latent"),
    ("AudioFeatures", "Audio Encoder Output", io.AudioEncoderOutput, "audio-encoder (wav2vec2) output"),
    ("Image", "Image", io.Image, "preprocessed image"),
    ("Audio", "Audio", io.Audio, "audio waveform"),
    ("Text", "Text", io.String, "generated text (a prompt enhancer's output)"),
]


class _EncodeOrReuse(io.ComfyNode):
    IO = io.Conditioning
    VALUE_SOCKET: dict = {}      # the text variant's STRING input is a socket, not a text box
    SUFFIX = ""
    DISPLAY = ""
    WHAT = ""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id=f"SeedReuseEncode{cls.SUFFIX}",
            display_name=f"Encode or Reuse ({cls.DISPLAY})",
            category="SeedReuse/encoder reuse",
            description=f"Restores the {cls.WHAT} from the shared cache when its inputs are unchanged, "
                        "so the encoder and its loader never run; otherwise encodes and caches it.",
            inputs=[
                SessionType.Input("session", tooltip="The SeedReuse Session of this workflow."),
                io.String.Input("slot", default="positive",
                                tooltip="Name of this value in the cache (unique per workflow), e.g. positive, "
                                        "negative, clip_vision, reference_latent, audio_features."),
                cls.IO.Input("value", lazy=True, **cls.VALUE_SOCKET,
                             tooltip=f"The {cls.WHAT}. Evaluated only when the cache cannot serve it."),
            ],
            outputs=[
                cls.IO.Output("restored", display_name="value",
                              tooltip=f"The {cls.WHAT}, restored or freshly encoded."),
                io.String.Output("status", display_name="status", tooltip="reused / encoded, why, and the time saved."),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt, io.Hidden.dynprompt],
        )

    @classmethod
    def validate_inputs(cls, slot=None, **kw):
        if slot is not None:
            try:
                roots.validate_slot_name(slot)
            except ReuseError as e:
                return str(e)
        return True

    @classmethod
    def _decision(cls, session, slot):
        ctx = transactions.current()
        uid = cls.hidden.unique_id
        d = ctx.decisions.get(uid)
        if d is None:
            snap = ctx.snapshot(session.root, session.name)
            view = GraphView(cls.hidden.prompt, cls.hidden.dynprompt, resolved=ctx.resolved,
                             extra_pnginfo=ctx.extra.get("extra_pnginfo"), executing=True)
            key = slot_key(view, uid, cls.IO.io_type)
            # a matching slot is loaded and checked here, before the lazy value is (not)
            # requested: a slot that does not load or holds an unusable value is rebuilt (auto)
            # or fails the run before any sampling (require)
            d = cls._decide(ctx, session, slot, key, snap)
            if d.action == "encode" and session.mode == "auto":
                d = cls._single_flight(ctx, session, slot, key, d)
            ctx.decisions[uid] = d
            if d.action == "encode":
                ctx.notes[uid] = time.perf_counter()
        return ctx, d

    @classmethod
    def _decide(cls, ctx, session, slot, key, snap, *, source_error=None):
        err = source_error
        if snap is None and session.mode != "off" and err is None:
            err = ctx.snapshot_error(session.root, session.name)
        return decide_slot(snap, cache_name=session.name, slot=slot, key=key, mode=session.mode,
                           snapshot_error=err, gone=ctx.notes.get(("gone", session.root, session.name)),
                           inspect=lambda s: inspect_slot(s, cache_name=session.name, slot=slot,
                                                          io_type=cls.IO.io_type, load=True))

    @classmethod
    def _single_flight(cls, ctx, session, slot, key, d):
        """Before encoding (store/claim.py): claim the slot key; while a live run of another
        worker holds the claim (it encodes this very key), wait for its encoding, bounded:
        - the holder published its encoding (an entry, as soon as its encoder ran): use it, and
          stage it as this run's own (``adopted``), so this run's commit publishes it too;
        - the holder's prompt ended without one: re-read the committed version (it may have
          committed the slot); without a transaction yet this is this prompt's snapshot, else the
          value found there is adopted like an entry; otherwise encode, holding the claim."""
        k = (session.root, session.name)
        if settings.single_flight_s() == 0:
            return d
        cache = ctx.cache(*k)
        uid = cls.hidden.unique_id
        got = cache.claim(slot, key.digest, ctx.run_id, on_wait=host.throw_if_interrupted)
        if got.held:
            ctx.claims[uid] = got
        if got.waited_for is None and got.entry is None:
            return d
        who = (got.waited_for or got.entry.manifest["run"]).get("run_id")
        waited = got.waited_s
        if got.entry is not None:
            try:
                d2 = cls._decide(ctx, session, slot, key, got.entry)
            finally:
                got.close_entry()
            if d2.action == "reuse":
                d2.adopted = True
                d2.reason = (f"encoded by run {who} of another worker while this run waited {waited:.1f} s "
                             "(single flight); staged as this run's own")
                return d2
            d.reason = f"{d.reason} (run {who}'s encoding of this key is unusable here: {d2.reason})"
            return d
        if k not in ctx.txs:
            ctx.drop_snapshot(*k)
            d2 = cls._decide(ctx, session, slot, key, ctx.snapshot(*k))
        else:
            try:
                fresh, err = cache.snapshot(), None
            except ReuseError as e:        # unreadable: the next commit replaces it
                fresh, err = None, e
            try:
                d2 = cls._decide(ctx, session, slot, key, fresh, source_error=err)
            finally:
                if fresh is not None:
                    fresh.close()
            d2.adopted = d2.action == "reuse"
        if d2.action == "reuse":
            got.release()
            ctx.claims.pop(uid, None)
            d2.reason = f"{d2.reason} (waited {waited:.1f} s for run {who}, which committed it: single flight)"
            return d2
        d.reason = (f"{d.reason} (waited {waited:.1f} s for run {who}, which did not commit this key: "
                    "encoding)")
        return d

    @classmethod
    def check_lazy_status(cls, session=None, slot=None, value=None):
        if session is None:
            return ["session"]
        _, d = cls._decision(session, slot)
        return ["value"] if d.action == "encode" and value is None else []

    @classmethod
    def execute(cls, session, slot, value=None):
        ctx, d = cls._decision(session, slot)
        uid = cls.hidden.unique_id
        ctx.use_slot(session.root, session.name, slot, uid)
        if d.action == "reuse":
            # Served from the committed version read at decision time; no transaction is
            # needed. If this prompt commits (another slot or a segment run staged something),
            # the commit carries this slot forward when its key still matches (carry.py).
            value, load_s = d.value, d.load_seconds   # loaded and checked by _decision
            if not d.adopted:
                # a committed slot is read again from the snapshot when needed; an adopted one
                # (single flight, possibly not committed anywhere yet) has only this copy
                d.value = None
            if value is None:
                value, load_s = inspect_slot(ctx.snapshot(session.root, session.name), cache_name=session.name,
                                             slot=slot, io_type=cls.IO.io_type, load=True)
            saved = float(d.cached_meta.get("encode_seconds", 0.0))
            if d.adopted:      # another run's fresh encoding (single flight): published by our commit too
                st = ctx.transaction(session.root, session.name)
                st.tx.stage_slot(slot, value, key=d.key.to_dict(), meta=d.cached_meta)
                st.staged_slots.add(slot)
                st.new_content = True
                status = (f"reused '{slot}', encoded by another worker's run just now (single flight), "
                          f"in {load_s * 1000:.0f} ms")
            else:
                status = (f"reused '{slot}' from cache '{session.name}' in {load_s * 1000:.0f} ms "
                          f"(encoding took {saved:.2f} s when cached)")
            report = {"action": "reused", "load_seconds": load_s, "saved_seconds": max(0.0, saved - load_s)}
        else:
            if value is None:
                raise InvalidRequestError(f"slot '{slot}': the encoder output was not provided",
                                          expected="a connected value input", actual="None",
                                          fix="connect the encoder output to the value input")
            encode_s = time.perf_counter() - ctx.notes.get(uid, time.perf_counter())
            st = ctx.transaction(session.root, session.name)
            st.tx.stage_slot(slot, value, key=d.key.to_dict(),
                             meta={"io_type": cls.IO.io_type, "node": cls.define_schema().node_id,
                                   "encode_seconds": round(encode_s, 4), "created_at": time.time()})
            st.staged_slots.add(slot)
            st.new_content = True
            claimed = ctx.claims.get(uid)
            if claimed is not None:      # runs waiting for this key use it now, not after our commit
                claimed.publish(st.tx, slot)
            status = f"encoded '{slot}' ({d.reason})"
            report = {"action": "encoded", "encode_seconds": encode_s}
        payload = {"node": uid, "prompt_id": ctx.prompt_id, "cache": session.name, "slot": slot,
                   "reason": d.reason, "mismatch": d.mismatch[:8], "status": status,
                   "depends_on": [dep.to_dict() for dep in d.key.depends], **report}
        ctx.results[uid] = payload
        host.send_event("seedreuse.slot", payload)
        return io.NodeOutput(value, status, ui={"seedreuse": [payload]})


def _make(suffix, display, io_cls, what):
    cls = type(f"SeedReuseEncode{suffix}", (_EncodeOrReuse,),
               {"IO": io_cls, "SUFFIX": suffix, "DISPLAY": display, "WHAT": what,
                "VALUE_SOCKET": {"force_input": True} if io_cls is io.String else {},
                "__doc__": f"Encode or Reuse for {what}."})
    SLOT_IO_TYPES[f"SeedReuseEncode{suffix}"] = io_cls.io_type
    return cls


ENCODE_NODES = [_make(*v) for v in VARIANTS]
