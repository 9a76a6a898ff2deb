"""What the video family tests (test_ltx2.py, test_minimax_h3.py, test_hunyuan15.py) share: the
official template instrumented by the pack and shrunk (seedreuse_lab/video_family_graphs.py),
an inspection of every wrapped value and of the decoded frames, and the cross-worker contract:
worker B with a new seed runs no encoder, no encoder loader and nothing the wrappers cover, every
slot is reused byte-identical, and B's frames differ from A's.

These families exist on ComfyUI 0.33 only: ``VIDEO_ONLY`` keeps the modules off the 0.3.75 run
(one_host) and skips them, saying why, on a host without the nodes.
"""
from __future__ import annotations

import pytest

from seedreuse_lab import graphs, host
from seedreuse_lab import video_family_graphs as vg

VIDEO_ONLY = [
    pytest.mark.comfy,
    pytest.mark.one_host("0.33.0"),
    pytest.mark.skipif(not host.has_video_families(),
                       reason=f"ComfyUI {host.comfyui_version()} has no LTX-2 audio-video / MiniMax H3 / "
                              "HunyuanVideo 1.5 nodes (ComfyUI 0.33 has them)"),
]
# stand-in counters of every encoder and encoder loader (seedreuse_lab/stand_in_nodes/)
ENCODER_COUNTERS = ("text_loader", "text_encode", "text_generate", "clip_vision_loader", "clip_vision_encode")
OUTPUTS = {"SaveVideo", "PreviewAny", "SeedReuseTestInspect"}
DECODERS = ("VAEDecode", "VAEDecodeTiled")


def require_nodes(worker, *names: str) -> None:
    """The worker registers the family's stock nodes (the host's source has them: a worker that
    does not is a failure, not a skip)."""
    info = worker.object_info()
    missing = [n for n in names if n not in info]
    assert not missing, f"the worker lacks {missing} although {host.comfyui_dir()} has them"


class Prepared:
    """A template's prompt for one run, with inspections: ``slots`` (slot -> wrapper id),
    ``inspect`` (slot -> inspection id, "frames" for the decoded video)."""

    def __init__(self, api: dict, *, seed: int, prefix: str, reuse: str = "auto", **kw):
        self.prompt = vg.for_test_host(api, seed=seed, prefix=prefix, **kw)
        for n in self.prompt.values():
            if n["class_type"] == "SeedReuseSession":
                n["inputs"]["reuse"] = reuse
        self.slots = vg.wrappers(self.prompt)
        self.inspect = {}
        for i, (slot, wid) in enumerate(sorted(self.slots.items())):
            self.inspect[slot] = graphs.add_inspect(self.prompt, wid, label=slot, node_id=f"90{i}")
        decode = sorted(k for k, n in self.prompt.items() if n["class_type"] in DECODERS)
        assert decode, "the template decodes no video"
        self.inspect["frames"] = graphs.add_inspect(self.prompt, decode[0], label="frames", node_id="990")

    def covered(self) -> set:
        """Nodes that only the wrappers' values need: none may execute on a full hit."""
        return set(self.prompt) - vg.runs_on_a_hit(self.prompt, OUTPUTS)


def actions(res) -> dict:
    return {e["data"]["slot"]: e["data"]["action"] for e in res.events_of("seedreuse.slot")}


def ran(worker_counts: dict) -> dict:
    return {k: worker_counts[k] for k in ENCODER_COUNTERS if worker_counts.get(k)}


def assert_hit(pa: Prepared, ra, pb: Prepared, rb, b_counts: dict) -> None:
    """B (a new seed) reused every slot byte-identical to A's, ran no encoder, no encoder loader
    and nothing the wrappers cover, sampled, and decoded other frames than A."""
    assert actions(rb) == {s: "reused" for s in pb.slots}, actions(rb)
    assert ran(b_counts) == {}, ran(b_counts)
    covered = pb.covered()
    assert covered and not covered & set(rb.executed), sorted(covered & set(rb.executed))
    assert any(pb.prompt[k]["class_type"] == "SamplerCustomAdvanced" for k in rb.executed)
    for slot in pb.slots:
        assert rb.inspected(pb.inspect[slot]) == ra.inspected(pa.inspect[slot]), slot
    fa, fb = ra.inspected(pa.inspect["frames"]), rb.inspected(pb.inspect["frames"])
    assert fa["shape"] == fb["shape"] and fa["sha256"] != fb["sha256"]


def items(described: dict) -> dict:
    """A conditioning's (first) option dict as described by SeedReuseTestInspect."""
    return described["items"][0]["items"][1]["items"]


def tensor0(described: dict) -> dict:
    return described["items"][0]["items"][0]
