"""The pack loads in a real ComfyUI: every node is registered with tooltips and a description.

The worker loads a COPY of the published file set (.comfyignore, tests/published.py) as its only
custom node pack: what the Comfy Registry would ship imports and registers its nodes with nothing
else of this repository present (no lab, no tests, no stand-in pack)."""
import pytest

from tests.published import copy_published

pytestmark = pytest.mark.comfy

EXPECTED = {"SeedReuseSession", "SeedReuseEncodeConditioning", "SeedReuseEncodeClipVision", "SeedReuseEncodeLatent",
            "SeedReuseEncodeAudioFeatures", "SeedReuseEncodeImage", "SeedReuseEncodeAudio", "SeedReuseEncodeText",
            "SeedReuseSegmentLoopStart", "SeedReuseBoundarySave", "SeedReuseSegmentLoopEnd", "SeedReusePrefixMerge",
            "SeedReuseSegmentPrompt"}


@pytest.fixture(scope="module")
def published_worker(module_workers, tmp_path_factory):
    pack = copy_published(tmp_path_factory.mktemp("published") / "seedreuse")
    return module_workers.one(custom_nodes=[("seedreuse", pack)])


def test_every_node_registered_with_tooltips(published_worker):
    info = published_worker.get_json("/object_info")
    ours = {k: v for k, v in info.items() if k.startswith("SeedReuse") and not k.startswith("SeedReuseTest")}
    assert set(ours) == EXPECTED, f"missing: {EXPECTED - set(ours)}; see the worker log for import errors"
    for node_id, n in ours.items():
        assert n["description"], node_id
        assert n["category"].startswith("SeedReuse"), node_id
        for section in ("required", "optional"):
            for name, spec in (n["input"].get(section) or {}).items():
                assert len(spec) > 1 and spec[1].get("tooltip"), f"{node_id}.{name} has no tooltip"
        assert all(n.get("output_tooltips") or []) and len(n["output_tooltips"]) == len(n["output"]), node_id
    assert not [k for k in info if k.startswith("SeedReuseTest")], "only the published pack is loaded"
    assert published_worker.get_json("/seedreuse/caches")["caches"] == []   # its routes answer too
