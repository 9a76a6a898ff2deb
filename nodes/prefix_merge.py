"""Prefix Merge: previous result's first P(N) frames + the new suffix, with the complete audio.

The output video ends with its audio: the last segment's frames past the audio's end are cut
from it (packet copy, media/segment_trim.py); the cache keeps the untrimmed result, so resumes and
extensions chain from the untrimmed frames and boundaries.

The prefix packets are stream-copied from the committed result (bit-exact, near-zero cost:
every result has a keyframe at each segment start); only the new segments were encoded.
The result is staged into the cache (published with the commit) and saved as a normal
ComfyUI output.
"""
from __future__ import annotations

import os
import shutil
import time


from ..reuse_backend.errors import ReuseError
from ..reuse_backend.media import segment_takes
from ..reuse_backend.media import segments as seg
from ..reuse_backend.media import video
from ..reuse_backend.media.segment_plan import RESULT_FILE, SECTION
from . import host, transactions
from .host import InputImpl, io, ui
from .segment_state import SegmentNode, SegmentsType


def _waveform(audio):
    wf = audio["waveform"]
    return wf[0].detach().cpu().float().numpy(), int(audio["sample_rate"])


class SeedReusePrefixMerge(SegmentNode):
    @classmethod
    def define_schema(cls):
        return cls.segment_schema(
            "SeedReusePrefixMerge", "Prefix Merge",
            "Joins the kept prefix of the previous result (stream-copied, bit-exact) with the new "
            "segments and the complete audio track; publishes the video to the cache and output folder.",
            inputs=[
                SegmentsType.Input("segments", tooltip="From Segment Loop End."),
                io.String.Input("filename_prefix", default="seedreuse/video",
                                tooltip="Output file name prefix (inside ComfyUI's output folder)."),
            ],
            outputs=[
                io.Video.Output("video", display_name="video", tooltip="The merged video (for Save Video or previews)."),
                io.Int.Output("frame_count", display_name="frame_count",
                              tooltip="Frames in the merged video (after the last segment's surplus past the "
                                      "audio's end is trimmed)."),
                io.String.Output("status", display_name="status", tooltip="How the video was assembled and how long the merge took."),
            ],
            is_output_node=True,
        )

    @classmethod
    def execute(cls, segments: object, filename_prefix: str):
        state = segments.state
        spec, n = state.spec, state.first_index
        ctx = transactions.current()
        st = ctx.transaction(state.session.root, state.session.name)
        prefix, prev = 0, None
        if n > 0:  # read through the base version's directory fd: the chosen take's committed result
            prev = st.tx.base.open_file(state.summary.get("source_result") or RESULT_FILE)
            prefix = state.summary["prefix_frames"]
        if n > 0 and state.audio is not None and state.summary.get("copy_audio", True):
            audio = ("copy", prev)             # the same track as the source take's: its packets, unchanged
        elif state.audio is not None:
            audio = ("encode", *_waveform(state.audio))
        else:
            audio = None
        out = st.tx.stage_path(RESULT_FILE)
        chunk_paths = [path for _, path in state.chunks]
        t0 = time.perf_counter()
        # if the prefix has to be re-encoded, cut it at every kept segment start so that the
        # next resume can stream-copy again
        try:
            with st.tx.writing(f"write {RESULT_FILE}"):   # a lost lock or a full disk is reported as such
                report = video.merge(out, chunks=chunk_paths, prefix_source=prev, prefix_frames=prefix,
                                     audio=audio, fps=spec.fps,
                                     prefix_keyframes=[seg.prefix_frames(i, spec.F, spec.M) for i in range(1, n)])
        finally:
            if prev is not None:
                prev.close()
        merge_s = time.perf_counter() - t0
        for name, _ in state.chunks:  # chunks are work files, never part of a committed cache
            st.tx.discard_file(name)
        st.tx.add_file(RESULT_FILE)
        h, w = _frame_size(segments)
        folder, name, counter, subfolder, _ = host.save_path(filename_prefix, w, h)
        file = f"{name}_{counter:05}_.mp4"
        frames_out, trim_note = _save_output(out, os.path.join(folder, file), report.frames,
                                             state.summary.get("trim") or {}, spec.fps)
        body = {
            "key": state.key, "spec": spec.to_dict(), "seed": state.seed, "reused_prefix_segments": n,
            "prefix_frames": prefix, "frames": report.frames, "prefix_mode": report.prefix_mode,
            "keyframes": list(report.keyframes), "has_audio": state.audio is not None,
            "segment_starts": [seg.prefix_frames(i, spec.F, spec.M) for i in range(spec.S)],
            "output_frames": frames_out, "trim": {**(state.summary.get("trim") or {}), "outcome": trim_note},
            "merge_seconds": round(merge_s, 4), "created_at": time.time(),
            "take": state.summary.get("take", 1), "source_take": state.summary.get("source_take"),
            "validity": state.validity or None}
        st.tx.set_section(SECTION, body)
        new = segment_takes.Take(body["take"], RESULT_FILE, segment_takes.new_take_boundaries(spec.S, True),
                                 body)
        segment_takes.publish_index(st.tx, new, state.kept_takes)
        st.new_content = True
        status = (f"{frames_out} frames: " +
                  (f"prefix of {prefix} frames {report.prefix_mode} from the previous result, " if n else "") +
                  f"segments {n}..{spec.S - 1} new; merge {merge_s * 1000:.0f} ms; {trim_note}")
        for w_ in report.warnings:
            host.log.warning("seedreuse: %s", w_)
        host.send_event("seedreuse.merge", {"prompt_id": ctx.prompt_id, "cache": state.session.name,
                                            "frames": report.frames, "output_frames": frames_out,
                                            "trim": trim_note, "prefix_mode": report.prefix_mode,
                                            "merge_seconds": merge_s, "status": status})
        return io.NodeOutput(InputImpl.VideoFromFile(os.path.join(folder, file)), frames_out, status,
                             ui=ui.PreviewVideo([ui.SavedResult(file, subfolder, io.FolderType.output)]))


def _save_output(result: str, dest: str, frames: int, trim: dict, fps: float) -> tuple[int, str]:
    """Write the output video: the merged result cut to ``trim["output_frames"]`` when the plan
    trims the last segment's surplus (segment_trim), else the result itself. Returns (its frames,
    what was done or why nothing was cut). A cut that cannot be made is logged and the untrimmed
    result is saved: the run and its cache stay good."""
    want = trim.get("output_frames")
    if not trim.get("trimmed"):
        shutil.copyfile(result, dest)
        note = trim.get("reason") or "not trimmed: no trim plan"
        (host.log.warning if trim.get("blocked") else host.log.info)("seedreuse: %s", note)
        return frames, note
    if frames != trim.get("frames"):
        why = f"the merged result has {frames} frames, the plan {trim.get('frames')}"
    else:
        try:
            video.cut(dest, result, want, fps)
        except ReuseError as e:
            why = e.message
        else:
            note = (f"trimmed the last segment's {frames - want} surplus frame(s) past the audio's end: "
                    f"{want} frames; the cache keeps all {frames}")
            host.log.info("seedreuse: %s", note)
            return want, note
    shutil.copyfile(result, dest)
    note = f"not trimmed: {why}; the video keeps all {frames} frames"
    host.log.warning("seedreuse: %s", note)
    return frames, note


def _frame_size(segments) -> tuple[int, int]:
    mf = segments.state.motion_frames
    if mf is not None and hasattr(mf, "shape") and len(mf.shape) == 4:
        return int(mf.shape[1]), int(mf.shape[2])
    return 0, 0


PREFIX_MERGE_NODES = [SeedReusePrefixMerge]
