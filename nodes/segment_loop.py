"""Segment Loop with Resume: Start / End around the user's own per-segment body.

Start validates the whole request before any sampling (resume plan), then feeds each
segment its index, start frame, motion frames, seed and audio window. End writes the
segment's new frames as a standalone chunk and, while segments remain, expands a copy of
the body for the next segment (ComfyUI node expansion), so the loop works with whatever
model nodes the host has.
"""
from __future__ import annotations

import dataclasses
import time

from ..reuse_backend.errors import InvalidRequestError
from ..reuse_backend.media import segments, video
from ..reuse_backend.media import segment_takes, segment_validity
from ..reuse_backend.media.audio_features import slice_features
from ..reuse_backend.media.segment_plan import longest_prefix, make_spec, plan_resume
from ..reuse_backend.media.segment_trim import audio_frames, plan_trim
from ..reuse_backend.media.segment_validity import audio_slice
from . import host, transactions
from .graph_view import (END_ID, PROMPT_ID, START_ID, GraphView, find_end_node, segment_audio_source_key,
                         segment_key, segment_prompts, segment_static_key)
from .host import io
from .segment_state import (LoopState, LoopType, SegmentNode, SegmentType, SegmentsType, SegmentValue, SegmentsResult,
                            expand_next_iteration, loop_input)
from .session_node import SessionType


class SeedReuseSegmentLoopStart(SegmentNode):
    @classmethod
    def define_schema(cls):
        return cls.segment_schema(
            START_ID, "Segment Loop Start (with Resume)",
            "Starts a loop over video segments of F frames joined by M motion frames; "
            "with reuse_prefix_segments = N it resumes at segment N from the cached boundary.",
            inputs=[
                SessionType.Input("session", tooltip="The SeedReuse Session (cache, reuse mode, prefix segments)."),
                io.Int.Input("segment_frames", default=81, min=2, max=10000, tooltip="F: frames per segment."),
                io.Int.Input("motion_frames", default=9, min=0, max=10000,
                             tooltip="M: frames shared by adjacent segments (the next segment starts from them)."),
                io.Int.Input("total_frames", default=0, min=0, max=10_000_000,
                             tooltip="Length of the video in frames; 0 = the audio's duration times fps."),
                io.Float.Input("fps", default=25.0, min=0.01, max=1000.0, step=0.01, tooltip="Frame rate."),
                io.Int.Input("seed", default=0, min=0, max=0xFFFFFFFFFFFFFFFF, control_after_generate=True,
                             tooltip="Base seed; segment i samples with a seed derived from (seed, i)."),
                io.Image.Input("initial_frames", optional=True,
                               tooltip="Frames segment 0 starts from (e.g. the reference image). Leave it unconnected "
                                       "for InfiniteTalk, whose node takes the reference image itself."),
                io.Audio.Input("audio", optional=True,
                               tooltip="The whole audio track: sliced per segment and muxed into the result."),
                io.AudioEncoderOutput.Input("audio_features", optional=True,
                                            tooltip="Audio-encoder output of the whole track (e.g. through Encode or "
                                                    "Reuse): sliced per segment, so a resume never re-encodes audio."),
                LoopType.Input("loop_state", optional=True,
                               tooltip="Internal: set by the loop for segments after the first. Leave unconnected."),
            ],
            outputs=[
                LoopType.Output("loop", display_name="loop", tooltip="Connect to Boundary Save and Segment Loop End."),
                io.Int.Output("segment_index", display_name="segment_index", tooltip="Index i of the segment being generated."),
                io.Int.Output("start_frame", display_name="start_frame", tooltip="start(i) = i*(F-M): first frame of this segment in the video."),
                io.Int.Output("frames", display_name="frames", tooltip="F, for the body's length input."),
                io.Image.Output("motion_images", display_name="motion_frames",
                                tooltip="Segment 0: initial_frames. Later: the previous segment's last M frames."),
                io.Latent.Output("motion_latent", display_name="motion_latent", tooltip="Latent of the motion frames when the body saved one."),
                io.Int.Output("segment_seed", display_name="segment_seed", tooltip="Seed for this segment's sampler, derived from (seed, i)."),
                io.Audio.Output("segment_audio", display_name="segment_audio", tooltip="The audio under this segment's F frames."),
                io.AudioEncoderOutput.Output("segment_audio_features",
                                             display_name="segment_audio_features",
                                             tooltip="audio_features cut to this segment's F frames (start(i) = i*(F-M))."),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt, io.Hidden.dynprompt],
        )

    @classmethod
    def execute(cls, session, segment_frames, motion_frames, total_frames, fps, seed,
                initial_frames=None, audio=None, audio_features=None, loop_state=None):
        state = loop_state if loop_state is not None else cls._first_state(
            session, segment_frames, motion_frames, total_frames, fps, seed, initial_frames, audio, audio_features)
        i, spec = state.index, state.spec
        motion = state.motion_frames if (i > 0 or state.first_index > 0) else initial_frames
        feats = None if audio_features is None else slice_features(audio_features, i, spec.F, spec.M, spec.fps)
        return io.NodeOutput(state, i, segments.segment_start(i, spec.F, spec.M), spec.F, motion,
                             state.motion_latent, segments.segment_seed(state.seed, i),
                             audio_slice(state.audio, i, spec), feats)

    @classmethod
    def _first_state(cls, session, F, M, total_frames, fps, seed, initial_frames, audio, audio_features) -> LoopState:
        audio_len = None if audio is None else audio_frames(int(audio["waveform"].shape[-1]),
                                                            int(audio["sample_rate"]), fps)
        if total_frames == 0:
            if audio is None:
                raise InvalidRequestError("total_frames is 0 and no audio is connected",
                                          expected="total_frames > 0 or an audio input", actual=0,
                                          fix="set total_frames, or connect the audio that sets the duration")
            total_frames = max(1, audio_len)
        spec = make_spec(F, M, fps, total_frames)
        trim = plan_trim(spec.S, F, M, fps, audio_len)   # the output's end; the cache keeps all P(S) frames
        uid = cls.hidden.unique_id
        ctx = transactions.current()
        view = GraphView(cls.hidden.prompt, cls.hidden.dynprompt, resolved=ctx.resolved,
                         extra_pnginfo=ctx.extra.get("extra_pnginfo"), executing=True)
        end_id = find_end_node(view, uid)
        if end_id is None:
            raise InvalidRequestError("Segment Loop Start has no Segment Loop End",
                                      expected=f"a {END_ID} whose loop input comes from this node",
                                      actual="none", fix="connect loop -> Boundary Save -> Segment Loop End")
        key = segment_key(view, end_id, spec)
        # every check below runs before the first segment is sampled (invariant of the plan)
        request = segment_validity.request_validity(
            segment_static_key(view, end_id, spec), spec, audio=audio, audio_features=audio_features,
            audio_source=segment_audio_source_key(view, uid), prompts=segment_prompts(view, uid))
        st = ctx.transaction(session.root, session.name)
        takes = segment_takes.read_takes(st.tx.base)
        N, why = session.prefix_segments, ""
        take = segment_takes.choose(takes, session.from_take if N else 0, session.name)   # N = 0 needs none
        if N == -1:     # the longest still-valid prefix, decided (and reported) before any sampling
            N, why = longest_prefix(take, spec, request)
        plan = plan_resume(st.tx.base, cache_name=session.name, N=N, spec=spec, key=key,
                           audio_expected=audio is not None, take=take, request=request)
        if plan.take is not None:   # the reused prefix's boundaries stay in the new cache
            segment_takes.carry_prefix(st.tx, plan.take, plan.N, spec.F, spec.M)
        st.tx.keep_takes = session.keep_takes       # a rebase merges the take list up to it (store/rebase.py)
        kept = segment_takes.carry_history(st.tx, takes, session.keep_takes - 1)
        st.new_content = True
        boundary = plan.boundary or {}
        src = plan.take
        copy_audio = src is not None and audio is not None and (
            src.validity is None or (src.validity.get("track") == request.track and src.segments == spec.S))
        summary = {"segments": spec.S, "F": spec.F, "M": spec.M, "total_frames": spec.total_frames,
                   "kept": plan.N, "prefix_frames": plan.prefix_frames, "plan": plan.describe(),
                   "requested": session.prefix_segments, "longest_valid": why or None,
                   "source_take": src.number if src is not None else None,
                   "source_result": src.result if src is not None else None, "copy_audio": copy_audio,
                   "take": segment_takes.next_number(takes), "kept_takes": [t["take"] for t in kept],
                   "trim": trim.to_dict(), "started_at": time.time()}
        host.send_event("seedreuse.segments", {"node": uid, "prompt_id": ctx.prompt_id,
                                               "cache": session.name, **summary})
        return LoopState(session=session, spec=spec, seed=int(seed), index=plan.N, first_index=plan.N,
                         key=key.to_dict(), motion_frames=boundary.get("motion_frames"),
                         motion_latent=boundary.get("motion_latent"), audio=audio,
                         start_node=uid, summary=summary, validity=segment_validity.record(request, int(seed)),
                         kept_takes=kept)


class SeedReuseBoundarySave(SegmentNode):
    @classmethod
    def define_schema(cls):
        return cls.segment_schema(
            "SeedReuseBoundarySave", "Boundary Save",
            "Saves the exact motion state the next segment consumes (last M frames, and their "
            "latent if given) into the run's staging cache, for a later resume.",
            inputs=[
                loop_input(),
                io.Image.Input("images", tooltip="The F decoded frames of this segment."),
                io.Latent.Input("motion_latent", optional=True,
                                tooltip="Optional latent of the last M frames, if the body computes it."),
            ],
            outputs=[
                SegmentType.Output("segment", display_name="segment", tooltip="Connect to Segment Loop End."),
                io.Image.Output("images_out", display_name="images", tooltip="The same frames, passed through."),
            ],
        )

    @classmethod
    def execute(cls, loop, images, motion_latent=None):
        state, spec = loop, loop.spec
        if images.shape[0] != spec.F:
            raise InvalidRequestError(f"segment {state.index} has {images.shape[0]} frames",
                                      expected=f"F = {spec.F} frames", actual=images.shape[0],
                                      fix="set the body's length input from the loop's 'frames' output")
        st = transactions.current().transaction(state.session.root, state.session.name)
        # boundary i feeds segment i+1; the last one is kept as the take's tail, for an extension
        boundary = {"motion_frames": images[images.shape[0] - spec.M:].detach().cpu().contiguous().clone()}
        if motion_latent is not None:
            boundary["motion_latent"] = motion_latent
        if state.index < spec.S - 1:
            st.tx.stage_boundary(state.index, boundary, meta={"index": state.index, "F": spec.F, "M": spec.M})
        else:
            segment_takes.stage_tail_boundary(st.tx, boundary)
        st.new_content = True
        return io.NodeOutput(SegmentValue(state, images, motion_latent), images)


class SeedReuseSegmentLoopEnd(SegmentNode):
    @classmethod
    def define_schema(cls):
        return cls.segment_schema(
            END_ID, "Segment Loop End",
            "Closes the segment loop: stores this segment's new frames and runs the body again "
            "for the next segment until the video is complete.",
            inputs=[
                loop_input(" (the loop's first node)", extra_dict={"rawLink": True}),
                SegmentType.Input("segment", tooltip="From Boundary Save."),
            ],
            outputs=[
                SegmentsType.Output("segments", display_name="segments", tooltip="Connect to Prefix Merge."),
                io.String.Output("status", display_name="status", tooltip="Which segments were kept and generated."),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.dynprompt],
            enable_expand=True,
        )

    @classmethod
    def execute(cls, loop, segment):
        state, spec = segment.state, segment.state.spec
        i = state.index
        st = transactions.current().transaction(state.session.root, state.session.name)
        new = segment.images if i == 0 else segment.images[spec.M:]
        keep = (state.summary.get("trim") or {}).get("output_frames", 0) - segments.new_frames_range(i, spec.F, spec.M)[0]
        # the last segment's surplus (past the audio's end) is a chunk of its own: the output ends at a
        # keyframe and is a packet copy of the result (segment_trim); the cached result keeps every frame
        parts = [new[:keep], new[keep:]] if i == spec.S - 1 and 0 < keep < new.shape[0] else [new]
        chunks = state.chunks
        for part, name in zip(parts, (f"chunk_{i:05d}.mp4", f"chunk_{i:05d}_surplus.mp4")):
            path = st.tx.stage_path(name)
            with st.tx.writing(f"write {name}"):   # a lost lock or a full disk is reported as such
                video.write_chunk(path, part, spec.fps)
            chunks += ((name, path),)
        host.progress(i + 1, spec.S)
        host.throw_if_interrupted()
        state = dataclasses.replace(state, chunks=chunks)
        if i + 1 < spec.S:
            nxt = dataclasses.replace(state, index=i + 1,
                                      motion_frames=segment.images[segment.images.shape[0] - spec.M:],
                                      motion_latent=segment.motion_latent)
            graph, new_end = expand_next_iteration(cls.hidden.dynprompt, cls.hidden.unique_id, loop[0], nxt)
            return io.NodeOutput(new_end.out(0), new_end.out(1), expand=graph.finalize())
        n = state.first_index
        status = (f"kept segments 0..{n - 1} ({state.summary.get('prefix_frames', 0)} frames), " if n else "") + \
                 f"generated segments {n}..{spec.S - 1} of {spec.S}"
        return io.NodeOutput(SegmentsResult(state), status)


class SeedReuseSegmentPrompt(SegmentNode):
    """Per-segment text inside the loop body. Its lines are a per-segment input of validity
    (segment_validity: the 'prompt' chain), so changing line k keeps segments 0..k-1 valid."""

    @classmethod
    def define_schema(cls):
        return cls.segment_schema(
            PROMPT_ID, "Segment Prompt",
            "The prompt of the segment being generated: line i of prompts for segment i (the last "
            "line repeats). A resume keeps the segments whose lines did not change.",
            inputs=[
                loop_input(" (this node belongs to the loop body)"),
                io.String.Input("prompts", multiline=True, default="",
                                tooltip="One prompt per line: line i for segment i; the last line repeats for later "
                                        "segments. Changing line k keeps segments 0..k-1 reusable."),
            ],
            outputs=[io.String.Output("prompt", display_name="prompt",
                                      tooltip="This segment's line, e.g. for a CLIP Text Encode in the body.")],
        )

    @classmethod
    def execute(cls, loop, prompts):
        return io.NodeOutput(segment_validity.prompt_line(prompts.splitlines(), loop.index))


SEGMENT_LOOP_NODES = [SeedReuseSegmentLoopStart, SeedReuseBoundarySave, SeedReuseSegmentLoopEnd,
                      SeedReuseSegmentPrompt]
