"""The merged video of Segment Reuse ends with its audio, in real ComfyUI workers (real PyAV
encoding): a 1.75 s track at 16 fps is A = 28 frames; F = 9, M = 3 makes S = 5 segments of
P(5) = 33 frames, and the output keeps 28 (the last segment's 5 surplus frames are cut), on a
fresh run, on a resume with a new seed and on an extension of the trimmed video, which chains
from the cache's untrimmed result and boundary. The dry run reports the planned trim; where
nothing can be trimmed (the audio longer than the segments, no audio) the run and the dry run
say why, and the run still succeeds."""
from __future__ import annotations

import json
import struct
import wave
from pathlib import Path

import av
import numpy as np
import pytest

from seedreuse_lab import graphs
from seedreuse_lab.reuse_graphs import SEG, segment_graph
from reuse_backend.media import segments, video

pytestmark = pytest.mark.comfy
F, M, FPS, SR = 9, 3, 16.0, 16000
CACHE = "trim"


def P(n: int) -> int:
    return segments.prefix_frames(n, F, M)


def graph(seed: int, *, n: int = 0, audio_file: str | None = "speech.wav", total_frames: int = 0,
          cache: str = CACHE) -> dict:
    p = segment_graph("ref.png", seed=seed, prefix_segments=n, cache_name=cache, F=F, M=M, fps=FPS,
                      total_frames=total_frames or 27, audio=audio_file is not None, audio_file=audio_file)
    p[SEG.START]["inputs"]["total_frames"] = total_frames
    return p


def write_extended_wav(src: Path, dest: Path, silence_to_s: float, total_s: float) -> None:
    """``src``'s samples, then silence (as exact zeros) up to ``silence_to_s``, then a tone up to
    ``total_s``: the old segments heard exactly this (the loop pads a track with silence)."""
    with wave.open(str(src), "rb") as w:
        head = w.readframes(w.getnframes())
    n_head = len(head) // 2
    zeros = b"\0\0" * (int(silence_to_s * SR) - n_head)
    tail = b"".join(struct.pack("<h", int(8000 * np.sin(2 * np.pi * 550 * i / SR)))
                    for i in range(int(total_s * SR) - int(silence_to_s * SR)))
    with wave.open(str(dest), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(head + zeros + tail)


def sampled(res) -> int:
    return sum(1 for e in res.events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)


def output(worker, res) -> Path:
    return worker.output_path(res.output_files(SEG.MERGE)[0])


def section(root: Path, cache: str = CACHE) -> dict:
    return json.loads((root / cache / "manifest.json").read_text())["sections"]["segments"]


def audio_seconds(path: Path) -> float:
    """Seconds of decoded audio in the file (the AAC encoder's padding included)."""
    with av.open(str(path)) as c:
        a = c.streams.audio[0]
        return sum(f.samples for f in c.decode(a)) / a.codec_context.sample_rate


def check_output(path: Path, audio_s: float, frames: int) -> None:
    info = video.probe(str(path))
    assert info.frames == frames and info.has_audio and info.fps == FPS
    # the video ends with its audio, within one frame; the audio track is complete
    assert 0 <= info.frames / FPS - audio_s < 1 / FPS
    assert audio_s <= audio_seconds(path) < audio_s + 2048 / SR


def check_answer(worker, prompt) -> dict:
    return worker.post_json("/seedreuse/check", {"prompt": prompt})["segments"][SEG.START]


def test_output_ends_with_its_audio_fresh_resume_and_extend(pair_over_empty_root):
    a, b, root = pair_over_empty_root
    for w in (a, b):
        graphs.write_test_wav(Path(w.input_dir) / "speech.wav", seconds=1.75, sample_rate=SR)
        write_extended_wav(Path(w.input_dir) / "speech.wav", Path(w.input_dir) / "longer.wav", 2.25, 2.5)
    ans = check_answer(a, graph(1))
    assert ans["valid"] and ans["S"] == 5 and (ans["frames"], ans["output_frames"]) == (P(5), 28), ans
    assert ans["trim"]["trimmed"] == 5 and "5 surplus frame(s) of the last segment will be trimmed" in \
        ans["trim"]["reason"]

    r1 = a.run(graph(1)).raise_for_status()                  # fresh
    assert sampled(r1) == 5
    check_output(output(a, r1), 1.75, 28)
    ev = r1.events_of("seedreuse.merge")[0]["data"]
    assert (ev["frames"], ev["output_frames"]) == (33, 28) and "trimmed the last segment's 5 surplus" in ev["status"]
    sec = section(root)
    assert (sec["frames"], sec["output_frames"]) == (33, 28)
    # the cache keeps the untrimmed result and segment starts (a keyframe where the output ends)
    cached = video.probe(str(root / CACHE / "result.mp4"))
    assert cached.frames == 33 and 28 in cached.keyframes
    assert sec["segment_starts"] == [P(i) for i in range(5)]
    v1 = video.decode_frames(str(output(a, r1)))
    assert np.array_equal(v1, video.decode_frames(str(root / CACHE / "result.mp4"))[:28])

    # a resume with a new seed on the other worker: the dry run says the same, the output again ends
    # with its audio, the prefix P(2) is the old one bit-exact and the audio packets are unchanged
    ans = check_answer(b, graph(2, n=2))
    assert ans["valid"] and ans["will"] == "resume" and ans["output_frames"] == 28 and ans["trim"]["trimmed"] == 5
    # the take picker shows take 1 as the user saved it (28 frames); the cache keeps its 33
    assert [(t["take"], t["frames"], t["output_frames"], t["trimmed"]) for t in ans["takes"]] == [(1, 33, 28, 5)]
    assert ans["previous"]["output_frames"] == 28 and ans["previous"]["frames"] == 33
    r2 = b.run(graph(2, n=2)).raise_for_status()
    assert sampled(r2) == 3
    check_output(output(b, r2), 1.75, 28)
    v2 = video.decode_frames(str(output(b, r2)))
    assert np.array_equal(v2[:P(2)], v1[:P(2)]) and not np.array_equal(v2[P(2):], v1[P(2):])
    assert video.audio_packets_digest(str(output(b, r2))) == video.audio_packets_digest(str(output(a, r1)))
    untrimmed2 = video.decode_frames(str(root / CACHE / "result.mp4"))
    assert untrimmed2.shape[0] == 33 and np.array_equal(untrimmed2[:28], v2)

    # extend the trimmed take: a longer track that is silent where take 2's surplus frames were keeps
    # all 5 segments; the new segments start from take 2's untrimmed tail boundary, the old surplus
    # frames come back from the cache, and the new output ends with the new audio (2.5 s = 40 frames)
    r3 = a.run(graph(3, n=5, audio_file="longer.wav")).raise_for_status()
    assert sampled(r3) == 2                                   # segments 5 and 6 of S = 7 (P(7) = 45)
    check_output(output(a, r3), 2.5, 40)
    v3 = video.decode_frames(str(output(a, r3)))
    assert np.array_equal(v3[:P(5)], untrimmed2) and np.array_equal(v3[:28], v2)
    sec = section(root)
    assert (sec["frames"], sec["output_frames"], sec["reused_prefix_segments"]) == (45, 40, 5)
    assert sec["prefix_mode"] == "stream-copy" and sec["source_take"] == 2


def test_where_nothing_can_be_trimmed_the_run_says_why(pair_over_empty_root):
    a, b, root = pair_over_empty_root
    graphs.write_test_wav(Path(a.input_dir) / "speech.wav", seconds=1.75, sample_rate=SR)
    # total_frames = 27 (4 segments, P(4) = 27) with 28 frames of audio: the video ends before its audio
    g = graph(1, total_frames=27)
    ans = check_answer(a, g)
    assert ans["valid"] and (ans["frames"], ans["output_frames"], ans["trim"]["trimmed"]) == (27, 27, 0)
    assert "longer than the 4 segment(s) cover (27 frames)" in ans["trim"]["reason"]
    r = a.run(g).raise_for_status()
    ev = r.events_of("seedreuse.merge")[0]["data"]
    assert "not trimmed: the audio (28 frames" in ev["status"] and ev["output_frames"] == 27
    assert video.probe(str(output(a, r))).frames == 27 and section(root)["output_frames"] == 27
    # no audio: nothing to end the video at (dry run only: the run is the plain untrimmed one)
    ans = check_answer(a, graph(1, audio_file=None, total_frames=27, cache="silent"))
    assert ans["valid"] and ans["output_frames"] == 27 and "no audio connected" in ans["trim"]["reason"]
