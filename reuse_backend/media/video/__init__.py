"""Per-segment H.264 chunks and the prefix-reuse merge (PyAV only, no ffmpeg binary).

Every segment's new frames are encoded once, by :func:`write_chunk`, as a standalone MP4
whose first frame is an IDR frame.  All chunks use fixed libx264 settings with
``stitchable=1`` (x264 then writes headers that depend neither on the content nor on the
CRF), so chunks of one size / fps / preset carry identical SPS/PPS (extradata) and
:func:`merge` joins them by packet copy.  A merged result therefore has a keyframe at
every segment start, and a later resume packet-copies its first ``P(N)`` frames: the
reused prefix decodes bit-exactly to the previous result however often it is reused.
When that is impossible (no keyframe at ``P(N)``, other codec parameters, timestamps off
the frame grid) the prefix is decoded and re-encoded as chunks, with a warning.

Modules: frames (conversion, decode), probe (demux-only inspection), encode (chunks), merge (the
merge, and ``cut``: the first frames of a merged result up to a chunk boundary, by packet copy).

Decisions (measured; see tests/backend/test_video.py):

* B-frames stay on (x264 defaults: 3 B-frames, pyramid).  x264 gives every chunk of 3
  frames or more the same constant decode delay ``d`` (2 frames): coded packet ``j`` has dts ``j - d``.  After
  re-basing a chunk by its first output frame ``off`` its dts run ``off-d .. off+n-1-d``, so
  dts increase strictly across every join, the file's first dts is negative (an MP4 edit
  list, as in any x264 MP4) and ``dts <= pts`` holds.  The muxer checks monotonicity.
  A chunk of 1 or 2 frames has no reordering and no delay (dts = pts, measured): merge moves
  such a piece's dts earlier by the difference, so the joins stay strictly increasing (the last
  segment's split where the output ends can leave a part that short, media/segment_trim.py).
  Without B-frames the same 81 frames of 832x480 test content took 2.1x the bytes.
* ``mbtree=0``: with macroblock-tree ratecontrol on, this libx264 build (core 165, AVX-512
  asm) gave different bytes for the same frames from one call to the next in one process
  (some frame sizes, e.g. 160x96); with ``mbtree=0`` it is reproducible (so it is with
  mbtree and asm limited to AVX2, but x264-params cannot mask CPU flags portably).
  Measured cost on 832x480 test content: none in size or PSNR.
* libx264 threads are pinned (default 4): output is deterministic for a fixed thread
  count, but the count changes the bitstream (never the extradata), so automatic threads
  would make the bytes depend on the machine's core count.
* Frame ``k`` of every file written here has pts ``k`` in units of ``1/fps``.
"""
from __future__ import annotations

from .encode import write_chunk
from .frames import (CHUNK_PARAMS, DEFAULT_CRF, DEFAULT_PRESET, DEFAULT_THREADS, audio_packets_digest,
                     decode_frames, iter_frames, to_uint8)
from .merge import MergeReport, cut, merge
from .probe import ChunkInfo, VideoInfo, probe

__all__ = ["ChunkInfo", "VideoInfo", "MergeReport", "to_uint8", "write_chunk", "probe", "merge", "cut",
           "decode_frames", "iter_frames", "audio_packets_digest", "CHUNK_PARAMS", "DEFAULT_CRF",
           "DEFAULT_PRESET", "DEFAULT_THREADS"]
