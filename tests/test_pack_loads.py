"""The pack loads in a real ComfyUI: every node is registered with tooltips and a description."""
import pytest

pytestmark = pytest.mark.comfy

EXPECTED = {"SeedReuseSession", "SeedReuseEncodeConditioning", "SeedReuseEncodeClipVision", "SeedReuseEncodeLatent",
            "SeedReuseEncodeAudioFeatures", "SeedReuseEncodeImage", "SeedReuseEncodeAudio",
            "SeedReuseSegmentLoopStart", "SeedReuseBoundarySave", "SeedReuseSegmentLoopEnd", "SeedReusePrefixMerge",
            "SeedReuseSegmentPrompt"}


def test_every_node_registered_with_tooltips(comfy_worker):
    info = comfy_worker.get_json("/object_info")
    ours = {k: v for k, v in info.items() if k.startswith("SeedReuse") and not k.startswith("SeedReuseTest")}
    assert set(ours) == EXPECTED, f"missing: {EXPECTED - set(ours)}; see the worker log for import errors"
    for node_id, n in ours.items():
        assert n["description"], node_id
        assert n["category"].startswith("SeedReuse"), node_id
        for section in ("required", "optional"):
            for name, spec in (n["input"].get(section) or {}).items():
                assert len(spec) > 1 and spec[1].get("tooltip"), f"{node_id}.{name} has no tooltip"
        assert all(n.get("output_tooltips") or []) and len(n["output_tooltips"]) == len(n["output"]), node_id
