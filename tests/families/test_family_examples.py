"""The support-matrix example workflows are the tested graphs, up to date with the host's schemas.

seedreuse_lab/tools/make_family_examples.py builds each example from the graph its family test runs
(stand-ins swapped for the stock nodes). This rebuilds them from the live worker's
/object_info (with the pack loaded) and compares with example_workflows/ and its api/ twins,
so a change to a tested graph or to a node schema shows up here. The UI files are named by their
titles (mfe.TITLES: what the template browser shows), the API twins by their ids. Regenerate with
``python -m seedreuse_lab.tools.make_family_examples http://127.0.0.1:PORT`` (a worker with the pack).
tests/test_examples.py validates all examples (format, UI/API agreement, host validation) and runs
the Wan 2.1 ones; test_shipped_example_runs_end_to_end runs each of these as shipped (its API twin)
with only the model files, the encoders that cannot be tiny, sizes and steps substituted
(seedreuse_lab/official_templates.for_test_host, as for the official templates): the sampler
settings (cfg, sampler, scheduler, shift), the wiring and the SeedReuse nodes are the file's."""
from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path

import pytest

from seedreuse_lab import graphs, image_templates
from seedreuse_lab import official_templates as ot
from seedreuse_lab.tools import make_family_examples as mfe

from ._common import slot_events
from ._template_run import require_image_families

pytestmark = pytest.mark.comfy


def test_family_examples_are_up_to_date(family_workers):
    a, _, _ = family_workers
    built = mfe.build_examples(a.object_info())
    assert set(built) == set(mfe.TITLES)
    stale = []
    for name, (ui, api) in built.items():
        ui_file, thumb, api_file = mfe.FILES[name]
        for path, obj in ((mfe.OUT / ui_file, ui), (mfe.OUT / api_file, api)):
            if not path.is_file() or json.loads(path.read_text()) != json.loads(mfe.dumps(obj)):
                stale.append(str(path.relative_to(mfe.REPO)))
        if not (mfe.OUT / thumb).is_file():
            stale.append(f"example_workflows/{thumb} (missing)")
    assert not stale, ("example workflows out of date (regenerate with "
                       "`python -m seedreuse_lab.tools.make_family_examples <worker url>`): " + ", ".join(stale))


def test_family_examples_use_stock_nodes_only():
    for name, (api, _) in mfe.example_graphs().items():
        test_only = sorted({n["class_type"] for n in api.values() if n["class_type"].startswith("SeedReuseTest")})
        assert not test_only, f"{name}: test-only nodes in a shipped example: {test_only}"


# example id -> how it meets the test host (official_templates.TEMPLATES: the official template
# each example follows, so the same tiny models stand in for the same real files)
RUN_SPECS = {"wan22_two_expert_reuse": ot.TEMPLATES["video_wan2_2_14B_t2v"],
             "wan22_ti2v_5b_reuse": ot.TEMPLATES["video_wan2_2_5B_ti2v"],
             "qwen_image_t2i_reuse": ot.TEMPLATES["image_qwen_image"],
             "qwen_image_edit_reuse": ot.TEMPLATES["image_qwen_image_edit"],
             "infinitetalk_segment_reuse": ot.TEMPLATES["video_wan2_1_infinitetalk"]}
# examples of the image families (their models need ComfyUI 0.33): example id -> the official
# template whose test-host substitutions (seedreuse_lab/image_templates.py) it takes
IMAGE_RUN_SPECS = {"zimage_turbo_reuse": "image_z_image_turbo"}
# a segment example's loop, reduced: segments of F frames joined by M (the InfiniteTalk node's
# motion_frame_count, which for_test_host sets to 1) over TOTAL frames of speech: 3 segments
F, M, TOTAL = 5, 1, 13


def _reduced(api: dict, name: str, seed: int, cache: str, stock_talk: bool, **session) -> dict:
    if name in IMAGE_RUN_SPECS:
        p = image_templates.for_test_host(api, IMAGE_RUN_SPECS[name], seed=seed, prefix=f"ex_{name}")
    else:
        p = ot.for_test_host(api, RUN_SPECS[name], seed=seed, prefix=f"ex_{name}", stock_talk=stock_talk)
    fps = {n["inputs"].get("fps", 25.0) for n in p.values() if n["class_type"] == "SeedReuseSegmentLoopStart"}
    for n in p.values():
        ct, ins = n["class_type"], n["inputs"]
        if ct == "SeedReuseSession":
            ins.update(cache_name=cache, **session)
        elif ct == "SeedReuseSegmentLoopStart":
            ins.update(segment_frames=F, motion_frames=M)
        elif ct == "SeedReuseTestSineAudio" and fps:
            ins["seconds"] = TOTAL / fps.pop()
    return p


def test_run_specs_cover_every_family_example():
    assert set(RUN_SPECS) | set(IMAGE_RUN_SPECS) == set(mfe.TITLES)


@pytest.mark.parametrize("name", sorted(mfe.TITLES))
def test_shipped_example_runs_end_to_end(ab, name):
    """The API twin as shipped runs on this host (reduced), and a second run with a new seed
    reuses every Encode-or-Reuse output. InfiniteTalk runs the stock WanInfiniteTalkToVideo where
    the host has it (ComfyUI 0.33: the host its example is for), else the family stand-in."""
    a, _, root = ab
    if name in IMAGE_RUN_SPECS:
        require_image_families()
    graphs.write_test_image(Path(a.input_dir) / ot.IMAGE, 64, 64, seed=5)
    api = json.loads(mfe.OUT.joinpath(mfe.FILES[name][2]).read_text())
    stock_talk = ot.stock_talk_on(a.object_info())
    cache = f"ex-{name}-{uuid.uuid4().hex[:6]}"
    first = a.run(_reduced(copy.deepcopy(api), name, 1, cache, stock_talk), timeout=600).raise_for_status()
    slots = {n["inputs"]["slot"] for n in api.values() if n["class_type"].startswith("SeedReuseEncode")}
    assert slots and {k: v["action"] for k, v in slot_events(first).items()} == dict.fromkeys(slots, "encoded")
    assert first.output_files(), f"{name}: no output: {first.outputs}"
    if any(n["class_type"] == "SeedReuseSegmentLoopStart" for n in api.values()):
        seg = [e["data"] for e in first.events_of("seedreuse.segments")]
        assert seg and seg[0]["segments"] == 3, seg
        merge = [e["data"] for e in first.events_of("seedreuse.merge")]
        assert merge and merge[0]["frames"] == TOTAL, merge
    again = a.run(_reduced(copy.deepcopy(api), name, 2, cache, stock_talk, reuse="require"), timeout=600)
    again.raise_for_status()
    assert {k: v["action"] for k, v in slot_events(again).items()} == dict.fromkeys(slots, "reused")
    assert again.output_files()
    assert (root / cache / "manifest.json").is_file()
