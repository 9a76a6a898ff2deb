"""Build the Wan 2.1 example workflows of SeedReuse (UI format + API twin + thumbnail).

    python -m seedreuse_lab.tools.build_wan21_examples --server http://127.0.0.1:8188
    python -m seedreuse_lab.tools.build_wan21_examples --object-info object_info.json

Writes, for each example ID with its TITLE (TITLES below):
    example_workflows/TITLE.json       LiteGraph workflow as the ComfyUI canvas saves it (version 0.4)
    example_workflows/TITLE.jpg        thumbnail for the template browser (frontend 1.32 asks for .jpg)
    example_workflows/api/ID.json      API-format twin (what "Export (API)" / POST /prompt uses)
The template browser shows a custom node pack's templates by file name (title and description),
hence the human titles; the UI file names its twin in extra.seedreuse_example (example_files.py).

Node inputs, outputs and widget order come from the host's /object_info (a ComfyUI with the
SeedReuse pack loaded), so the files match the node schemas exactly; tests/test_examples.py
checks that they still do. The few stock nodes whose widgets differ between the tested hosts
are laid out as portable_examples.py says, so every tested host builds the same files. LoadAudio (comfy_extras/nodes_audio.py) needs torchaudio; for a host
without it (scripts/setup.sh installs it) its schema is written out below.

Only the standard library and Pillow (for the thumbnail) are needed.
"""
from __future__ import annotations

import argparse
import json
import urllib.request
import uuid
from pathlib import Path

from . import example_files, example_layout, portable_examples

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "example_workflows"
FRONTEND_VERSION = "1.32.9"
COMFY_VERSION = "0.3.75"
PACK_CNR_ID = example_files.PACK_CNR_ID
PACK_VERSION = "0.1.0"

# Schemas of nodes that are standard in ComfyUI 0.3.75 but absent from a host without torchaudio.
FALLBACK_SCHEMAS = {
    "LoadAudio": {
        "input": {"required": {"audio": [[], {"audio_upload": True}]}},
        "input_order": {"required": ["audio"]},
        "output": ["AUDIO"], "output_is_list": [False], "output_name": ["AUDIO"],
        "name": "LoadAudio", "display_name": "Load Audio", "description": "", "category": "audio",
        "output_node": False, "python_module": "comfy_extras.nodes_audio",
    },
}

WAN21 = "https://huggingface.co/Comfy-Org/Wan_2.1_ComfyUI_repackaged/resolve/main/split_files"
MODELS = {
    "wan2.1_t2v_1.3B_fp16.safetensors": "diffusion_models",
    "wan2.1_i2v_480p_14B_fp16.safetensors": "diffusion_models",
    "umt5_xxl_fp8_e4m3fn_scaled.safetensors": "text_encoders",
    "wan_2.1_vae.safetensors": "vae",
    "clip_vision_h.safetensors": "clip_vision",
}

WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
# the view a workflow opens with: scale, and where on the screen the note's corner is
VIEW_SCALE, VIEW_AT = 0.8, (80.0, 150.0)
NOTE_POS, NOTE_SIZE = (0, -580), (1160, 210)   # above the graph (the session's group starts at -330)
# the segment example: a narrower note with Segment Loop Start (and its timeline) beside it, so
# the timeline is in view on a 1280x800 window when the workflow opens; the node starts a little
# lower than the note, so its badges (drawn above its title) clear the canvas' Run toolbar, in a
# column of its own: the Session, its Encode-or-Reuse nodes and the loaders go one column further
# right (SEG_SLOTS_X), so the node may grow down (its timeline, the Vue node's rows) over nothing.
# Its saved size is what the timeline makes it on the canvas (492).
SEG_NOTE_POS, SEG_NOTE_SIZE = (0, -800), (800, 300)
SEG_START_POS, SEG_START_SIZE = (840, -772), (380, 492)
SEG_SLOTS_X = 1260
# input files: ComfyUI ships input/example.png; speech.wav is example_workflows/inputs/speech.wav
IMAGE_FILE, AUDIO_FILE = "example.png", "speech.wav"
# palette of the ComfyUI canvas ("Colors" menu)
GREEN, RED, CYAN, YELLOW = ("#232", "#353"), ("#322", "#533"), ("#233", "#355"), ("#432", "#653")


def load_object_info(server: str | None, path: str | None) -> dict:
    if path:
        info = json.loads(Path(path).read_text())
    else:
        with urllib.request.urlopen(server.rstrip("/") + "/object_info", timeout=60) as r:
            info = json.loads(r.read())
    for k, v in FALLBACK_SCHEMAS.items():
        info.setdefault(k, v)
    return info


def input_specs(schema: dict) -> list[tuple[str, str, dict, bool]]:
    """[(name, type, options, optional)] in definition order (hidden inputs left out)."""
    out = []
    for section in ("required", "optional"):
        specs = schema["input"].get(section) or {}
        for name in (schema.get("input_order") or {}).get(section, list(specs)):
            spec = specs[name]
            t = spec[0]
            opts = dict(spec[1]) if len(spec) > 1 and isinstance(spec[1], dict) else {}
            out.append((name, "COMBO" if isinstance(t, list) else t, opts, section == "optional"))
    return out


def is_widget(t: str, opts: dict) -> bool:
    return t in WIDGET_TYPES and not opts.get("forceInput")


def widget_extras(name: str, t: str, opts: dict) -> list[str]:
    """Frontend-only widgets the canvas adds after a widget (their values are saved too)."""
    extras = []
    if t in ("INT", "COMBO") and opts.get("control_after_generate",
                                          t == "INT" and name in ("seed", "noise_seed")):
        extras.append("control_after_generate")
    if opts.get("image_upload"):
        extras.append("upload")
    if opts.get("audio_upload"):
        extras += ["audioUI", "upload"]
    return extras


class Node:
    def __init__(self, wf: "Workflow", nid: int, type_: str, pos, widgets: dict, title, color, size, props):
        self.wf, self.id, self.type = wf, nid, type_
        self.schema = wf.info[type_]
        self.pos = [float(pos[0]), float(pos[1])]
        self.title = title
        self.color = color
        self.props = props or {}
        self.inputs = []       # UI slots: sockets first, then one per widget
        self.widget_names = []
        self.values = []       # widgets_values
        self.api_widgets = {}  # name -> value sent to the API
        specs = input_specs(self.schema)
        for name, t, opts, optional in specs:
            if not is_widget(t, opts):
                slot = {"localized_name": name, "name": name, "type": t, "link": None}
                if optional:
                    slot["shape"] = 7
                self.inputs.append(slot)
        unknown = set(widgets) - {n for n, t, o, _ in specs if is_widget(t, o)} - {"control_after_generate"}
        if unknown:
            raise KeyError(f"{type_}: no widgets named {sorted(unknown)}")
        self.multiline = False
        for name, t, opts, optional in specs:
            if not is_widget(t, opts):
                continue
            value = widgets[name] if name in widgets else opts.get("default")
            if value is None and t == "COMBO":
                options = self.schema["input"]["optional" if optional else "required"][name][0]
                value = (options if isinstance(options, list) and options else opts.get("options") or [None])[0]
            slot = {"localized_name": name, "name": name, "type": t, "widget": {"name": name}, "link": None}
            if optional:
                slot["shape"] = 7
            self.inputs.append(slot)
            self.widget_names.append(name)
            self.values.append(value)
            self.api_widgets[name] = value
            self.multiline |= bool(opts.get("multiline"))
            # the upload widgets get input slots too (frontend >= 1.16 saves them like this)
            if opts.get("image_upload"):
                self.inputs.append({"localized_name": "choose file to upload", "name": "upload",
                                    "type": "IMAGEUPLOAD", "widget": {"name": "upload"}, "link": None})
            if opts.get("audio_upload"):
                self.inputs.append({"localized_name": "audioUI", "name": "audioUI", "type": "AUDIO_UI",
                                    "widget": {"name": "audioUI"}, "link": None})
                self.inputs.append({"localized_name": "choose file to upload", "name": "upload",
                                    "type": "AUDIOUPLOAD", "widget": {"name": "upload"}, "link": None})
            for extra in widget_extras(name, t, opts):
                if extra == "control_after_generate":
                    self.values.append(widgets.get("control_after_generate", "fixed"))
                elif extra == "upload" and opts.get("image_upload"):
                    self.values.append("image")
                else:  # audio preview and upload button: saved as null
                    self.values.append(None)
        self.outputs = [{"localized_name": n, "name": n, "type": t, "links": []}
                        for n, t in zip(self.schema["output_name"], self.schema["output"])]
        self.size = list(size) if size else self._auto_size()

    def _auto_size(self):
        sockets = sum(1 for s in self.inputs if "widget" not in s)
        h = 30 + 22 * max(sockets, len(self.outputs)) + 26 * len(self.values)
        h += 120 if self.multiline else 0
        h += 250 if self.type == "LoadImage" else 0
        return [420.0 if self.multiline else 340.0, float(h)]

    def slot(self, name: str) -> int:
        for i, s in enumerate(self.inputs):
            if s["name"] == name:
                return i
        raise KeyError(f"{self.type} has no input {name!r}")

    def out(self, which) -> int:
        if isinstance(which, int):
            return which
        names = self.schema["output_name"]
        if which in names:
            return names.index(which)
        raise KeyError(f"{self.type} has no output {which!r} (outputs: {names})")


class Workflow:
    def __init__(self, info: dict, name: str):
        # the few stock nodes whose widgets differ between the tested hosts are laid out as
        # the oldest host saves them, and the API twin carries every host's inputs
        self.info, self.name = portable_examples.saved_object_info(info), name
        self.nodes: list[Node] = []
        self.links: list[list] = []
        self.groups: list[dict] = []
        self.notes: list[dict] = []
        self.titles: dict[int, str] = {}

    def add(self, type_: str, pos, title: str | None = None, color=None, size=None, props=None, **widgets) -> Node:
        if type_ not in self.info:
            raise KeyError(f"node type {type_} is not on this host")
        n = Node(self, len(self.nodes) + len(self.notes) + 1, type_, pos, widgets, title, color, size, props)
        self.nodes.append(n)
        return n

    def note(self, text: str, pos, size, title="Note") -> None:
        self.notes.append({"id": len(self.nodes) + len(self.notes) + 1, "type": "MarkdownNote",
                           "pos": [float(pos[0]), float(pos[1])], "size": [float(size[0]), float(size[1])],
                           "flags": {}, "order": 0, "mode": 0, "inputs": [], "outputs": [], "title": title,
                           "properties": {}, "widgets_values": [text], "color": YELLOW[0], "bgcolor": YELLOW[1]})

    def view(self, n: Node) -> dict:
        """The node as example_layout.py reads it (its pos is the node's own list)."""
        return {"id": n.id, "type": n.type, "pos": n.pos, "size": n.size, "inputs": n.inputs, "outputs": n.outputs}

    def settle(self) -> None:
        """Moves nodes down until no two meet in either canvas mode (example_layout.py); before
        the groups and the note are laid out around them."""
        example_layout.settle([self.view(n) for n in self.nodes])

    def link(self, src: Node, output, dst: Node, input_name: str) -> None:
        o = src.out(output)
        t = src.schema["output"][o]
        lid = len(self.links) + 1
        i = dst.slot(input_name)
        want = dst.inputs[i]["type"]
        if want not in (t, "*") and t != "*":
            raise TypeError(f"{src.type}[{o}] is {t}, {dst.type}.{input_name} wants {want}")
        if dst.inputs[i]["link"] is not None:
            raise ValueError(f"{dst.type}.{input_name} is already linked")
        dst.inputs[i]["link"] = lid
        src.outputs[o]["links"].append(lid)
        self.links.append([lid, src.id, o, dst.id, i, t])

    def group(self, title: str, nodes: list[Node], color: str, pad: float = 30.0) -> None:
        x0 = min(n.pos[0] for n in nodes) - pad
        y0 = min(n.pos[1] for n in nodes) - pad - 40
        x1 = max(n.pos[0] + n.size[0] for n in nodes) + pad
        y1 = max(n.pos[1] + example_layout.body_height(self.view(n)) for n in nodes) + pad  # as drawn
        self.groups.append({"id": len(self.groups) + 1, "title": title,
                            "bounding": [round(x0), round(y0), round(x1 - x0), round(y1 - y0)],
                            "color": color, "font_size": 24, "flags": {}})

    # ------------------------------------------------------------------ output
    def initial_view(self) -> dict:
        """The canvas view the workflow opens with (extra.ds): readable (LiteGraph draws titles
        and widget text from 0.6 on) with the note's top-left corner near the top-left of the
        screen, so the note and the first nodes are in view on a 1280x800 window."""
        x, y = self.notes[0]["pos"] if self.notes else (0.0, 0.0)
        return {"scale": VIEW_SCALE, "offset": [round(VIEW_AT[0] / VIEW_SCALE - x, 1),
                                                round(VIEW_AT[1] / VIEW_SCALE - y, 1)]}

    def _order(self) -> dict[int, int]:
        deps = {n.id: {lk[1] for lk in self.links if lk[3] == n.id} for n in self.nodes}
        order, done = {}, set()
        while len(done) < len(self.nodes):
            ready = sorted(nid for nid, d in deps.items() if nid not in done and d <= done)
            if not ready:
                raise ValueError("cycle in workflow")
            for nid in ready:
                order[nid] = len(order)
                done.add(nid)
        return order

    def to_ui(self) -> dict:
        order = self._order()
        nodes = []
        for n in self.nodes:
            d = {"id": n.id, "type": n.type, "pos": n.pos, "size": n.size, "flags": {}, "order": order[n.id],
                 "mode": 0, "inputs": n.inputs,
                 "outputs": [dict(o, links=o["links"] or None, **({"label": n.props["labels"][i]}
                                                                  if i in n.props.get("labels", {}) else {}))
                             for i, o in enumerate(n.outputs)]}
            if n.title:
                d["title"] = n.title
            core = not n.type.startswith("SeedReuse")
            props = {"cnr_id": "comfy-core" if core else PACK_CNR_ID, "ver": COMFY_VERSION if core else PACK_VERSION,
                     "Node name for S&R": n.type}
            model = next((v for v in n.api_widgets.values() if isinstance(v, str) and v in MODELS), None)
            if model:
                props["models"] = [{"name": model, "url": f"{WAN21}/{MODELS[model]}/{model}",
                                    "directory": MODELS[model]}]
            d["properties"] = props
            d["widgets_values"] = n.values
            if n.color:
                d["color"], d["bgcolor"] = n.color
            nodes.append(d)
        for i, note in enumerate(self.notes):
            nodes.append(dict(note, order=len(self.nodes) + i))
        nodes.sort(key=lambda d: d["id"])
        met = example_layout.overlaps(nodes, example_layout.GAP)
        if met:
            raise ValueError(f"{self.name}: nodes meet (example_layout.py): {met}")
        return {
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"seedreuse/example_workflows/{self.name}")),
            "revision": 0,
            "last_node_id": max(d["id"] for d in nodes),
            "last_link_id": len(self.links),
            "nodes": nodes,
            "links": self.links,
            "groups": self.groups,
            "config": {},
            "extra": {"ds": self.initial_view(), "frontendVersion": FRONTEND_VERSION,
                      example_files.PAIRING_KEY: example_files.pairing(self.name)},
            "version": 0.4,
        }

    def to_api(self) -> dict:
        out = {}
        for n in sorted(self.nodes, key=lambda n: self._order()[n.id]):
            inputs = dict(n.api_widgets)
            for s in n.inputs:
                if s["link"] is not None:
                    lk = self.links[s["link"] - 1]
                    inputs[s["name"]] = [str(lk[1]), lk[2]]
            out[str(n.id)] = {"inputs": inputs, "class_type": n.type,
                              "_meta": {"title": n.title or n.schema.get("display_name") or n.type}}
        return portable_examples.with_newer_inputs(out)


# ---------------------------------------------------------------------- the examples

POSITIVE = ("A red fox trots through fresh snow in a birch forest at sunrise, soft golden light, "
            "breath visible in the cold air, cinematic tracking shot, shallow depth of field.")
NEGATIVE = ("vivid colors, overexposed, static, blurry details, subtitles, style, artwork, painting, picture, still, "
            "overall gray, worst quality, low quality, JPEG artifacts, ugly, deformed, extra fingers, "
            "poorly drawn hands, poorly drawn face, malformed limbs, fused fingers, still frame, messy background, "
            "three legs, many people in the background, walking backwards")
I2V_POSITIVE = ("The woman in the photo turns toward the camera and smiles, her hair moving gently in the wind, "
                "natural light, steady camera.")
TALK_POSITIVE = ("A person sits at a desk and talks to the camera, natural head movement and gestures, "
                 "soft office light, static camera.")

SEEDREUSE_LABELS = {"SeedReuseEncodeConditioning": {1: "status"}, "SeedReuseEncodeClipVision": {1: "status"},
                    "SeedReuseEncodeLatent": {1: "status"}}


def _reuse(wf, variant, pos, slot, title):
    ct = f"SeedReuseEncode{variant}"
    return wf.add(ct, pos, title=title, color=CYAN, slot=slot, props={"labels": SEEDREUSE_LABELS.get(ct, {})})


def _encoders(wf, *, clip_vision: bool, positive: str):
    """Text (and CLIP vision) encoders in the two left columns."""
    clip = wf.add("CLIPLoader", (0, 0), clip_name="umt5_xxl_fp8_e4m3fn_scaled.safetensors", type="wan")
    pos = wf.add("CLIPTextEncode", (380, -20), title="Positive Prompt", color=GREEN, text=positive)
    neg = wf.add("CLIPTextEncode", (380, 220), title="Negative Prompt", color=RED, text=NEGATIVE)
    wf.link(clip, 0, pos, "clip")
    wf.link(clip, 0, neg, "clip")
    out = {"clip": clip, "pos": pos, "neg": neg}
    if clip_vision:
        cvl = wf.add("CLIPVisionLoader", (0, 460), clip_name="clip_vision_h.safetensors")
        img = wf.add("LoadImage", (0, 580), title="Reference image", image=IMAGE_FILE)
        cve = wf.add("CLIPVisionEncode", (380, 480), crop="none")
        wf.link(cvl, 0, cve, "clip_vision")
        wf.link(img, 0, cve, "image")
        out.update(cvl=cvl, img=img, cve=cve)
    return out


def _session(wf, cache_name, x: float = 860):
    return wf.add("SeedReuseSession", (x, -260), color=CYAN, cache_name=cache_name, reuse="auto",
                  reuse_prefix_segments=0)


def _text_and_vision_slots(wf, sess, enc, clip_vision: bool, x: float = 860):
    slots = [("Conditioning", (x, 0), "positive", enc["pos"]), ("Conditioning", (x, 220), "negative", enc["neg"])]
    if clip_vision:
        slots.append(("ClipVision", (x, 480), "clip_vision", enc["cve"]))
    out = []
    for variant, pos, slot, src in slots:
        r = _reuse(wf, variant, pos, slot, f"Encode or Reuse ({slot})")
        wf.link(sess, 0, r, "session")
        wf.link(src, 0, r, "value")
        out.append(r)
    return out


def _encoder_group(wf, enc):
    names = ("clip", "pos", "neg", "cvl", "img", "cve")
    wf.group("Encoders: skipped when the cache serves them", [enc[k] for k in names if k in enc], "#3f789e")


def build_t2v(info) -> Workflow:
    wf = Workflow(info, "wan21_t2v_encoder_reuse")
    enc = _encoders(wf, clip_vision=False, positive=POSITIVE)
    sess = _session(wf, "wan21-t2v")
    rpos, rneg = _text_and_vision_slots(wf, sess, enc, clip_vision=False)
    unet = wf.add("UNETLoader", (1260, -260), unet_name="wan2.1_t2v_1.3B_fp16.safetensors", weight_dtype="default")
    msd = wf.add("ModelSamplingSD3", (1640, -260), shift=8.0)
    lat = wf.add("EmptyHunyuanLatentVideo", (1260, 380), width=832, height=480, length=33, batch_size=1)
    ks = wf.add("KSampler", (1640, 0), seed=20250101, control_after_generate="randomize", steps=30, cfg=6.0,
                sampler_name="uni_pc", scheduler="simple", denoise=1.0)
    vae = wf.add("VAELoader", (2020, -260), vae_name="wan_2.1_vae.safetensors")
    dec = wf.add("VAEDecode", (2020, 0))
    vid = wf.add("CreateVideo", (2020, 140), fps=16.0)
    save = wf.add("SaveVideo", (2400, 0), size=(520, 560), filename_prefix="video/seedreuse_wan21_t2v",
                  format="auto", codec="auto")
    wf.link(unet, 0, msd, "model")
    wf.link(msd, 0, ks, "model")
    wf.link(rpos, 0, ks, "positive")
    wf.link(rneg, 0, ks, "negative")
    wf.link(lat, 0, ks, "latent_image")
    wf.link(ks, 0, dec, "samples")
    wf.link(vae, 0, dec, "vae")
    wf.link(dec, 0, vid, "images")
    wf.link(vid, 0, save, "video")
    wf.settle()
    _encoder_group(wf, enc)
    wf.group("SeedReuse", [sess, rpos, rneg], "#8A8")
    wf.group("Sampling (runs every time)", [unet, msd, ks, lat], "#a1309b")
    wf.note(T2V_NOTE, NOTE_POS, NOTE_SIZE, title="SeedReuse: encoder reuse (Wan 2.1 T2V)")
    return wf


def build_i2v(info) -> Workflow:
    wf = Workflow(info, "wan21_i2v_encoder_reuse")
    enc = _encoders(wf, clip_vision=True, positive=I2V_POSITIVE)
    sess = _session(wf, "wan21-i2v")
    rpos, rneg, rcv = _text_and_vision_slots(wf, sess, enc, clip_vision=True)
    vae = wf.add("VAELoader", (860, 700), vae_name="wan_2.1_vae.safetensors")
    i2v = wf.add("WanImageToVideo", (1260, 200), width=832, height=480, length=33, batch_size=1)
    wf.link(rpos, 0, i2v, "positive")
    wf.link(rneg, 0, i2v, "negative")
    wf.link(vae, 0, i2v, "vae")
    wf.link(rcv, 0, i2v, "clip_vision_output")
    wf.link(enc["img"], 0, i2v, "start_image")
    outer = []
    for k, (variant, slot, y) in enumerate((("Conditioning", "i2v_positive", 0), ("Conditioning", "i2v_negative", 220),
                                            ("Latent", "i2v_latent", 440))):
        r = _reuse(wf, variant, (1680, y), slot, f"Encode or Reuse ({slot})")
        wf.link(sess, 0, r, "session")
        wf.link(i2v, k, r, "value")
        outer.append(r)
    unet = wf.add("UNETLoader", (2080, -260), unet_name="wan2.1_i2v_480p_14B_fp16.safetensors",
                  weight_dtype="default")
    msd = wf.add("ModelSamplingSD3", (2460, -260), shift=8.0)
    ks = wf.add("KSampler", (2080, 0), seed=20250101, control_after_generate="randomize", steps=20, cfg=6.0,
                sampler_name="uni_pc", scheduler="simple", denoise=1.0)
    dec = wf.add("VAEDecode", (2460, 0))
    vid = wf.add("CreateVideo", (2460, 140), fps=16.0)
    save = wf.add("SaveVideo", (2840, 0), size=(520, 560), filename_prefix="video/seedreuse_wan21_i2v",
                  format="auto", codec="auto")
    wf.link(unet, 0, msd, "model")
    wf.link(msd, 0, ks, "model")
    for r, name in zip(outer, ("positive", "negative", "latent_image")):
        wf.link(r, 0, ks, name)
    wf.link(ks, 0, dec, "samples")
    wf.link(vae, 0, dec, "vae")
    wf.link(dec, 0, vid, "images")
    wf.link(vid, 0, save, "video")
    wf.settle()
    _encoder_group(wf, enc)
    wf.group("SeedReuse: text and CLIP vision", [sess, rpos, rneg, rcv], "#8A8")
    wf.group("SeedReuse: WanImageToVideo outputs", outer, "#8A8")
    wf.group("Sampling (runs every time)", [unet, msd, ks], "#a1309b")
    wf.note(I2V_NOTE, NOTE_POS, NOTE_SIZE, title="SeedReuse: encoder reuse (Wan 2.1 I2V)")
    return wf


def build_segments(info) -> Workflow:
    wf = Workflow(info, "wan21_i2v_segment_reuse")
    enc = _encoders(wf, clip_vision=True, positive=TALK_POSITIVE)
    sess = _session(wf, "wan21-i2v-long", x=SEG_SLOTS_X)
    rpos, rneg, rcv = _text_and_vision_slots(wf, sess, enc, clip_vision=True, x=SEG_SLOTS_X)
    audio = wf.add("LoadAudio", (SEG_SLOTS_X, 700), title="Audio (sets the video length)", audio=AUDIO_FILE,
                   size=(340, 140))
    vae = wf.add("VAELoader", (SEG_SLOTS_X, 880), vae_name="wan_2.1_vae.safetensors")
    start = wf.add("SeedReuseSegmentLoopStart", SEG_START_POS, color=CYAN, size=SEG_START_SIZE,
                   segment_frames=81, motion_frames=9, total_frames=0, fps=16.0, seed=20250101,
                   control_after_generate="randomize",
                   props={"labels": {0: "loop", 1: "segment_index", 2: "start_frame", 3: "frames",
                                     5: "motion_latent", 6: "segment_seed", 7: "segment_audio",
                                     8: "segment_audio_features"}})
    wf.link(sess, 0, start, "session")
    wf.link(enc["img"], 0, start, "initial_frames")
    wf.link(audio, 0, start, "audio")
    i2v = wf.add("WanImageToVideo", (2100, 200), width=832, height=480, length=81, batch_size=1)
    wf.link(rpos, 0, i2v, "positive")
    wf.link(rneg, 0, i2v, "negative")
    wf.link(vae, 0, i2v, "vae")
    wf.link(rcv, 0, i2v, "clip_vision_output")
    wf.link(start, "motion_frames", i2v, "start_image")
    wf.link(start, 3, i2v, "length")
    unet = wf.add("UNETLoader", (2100, -260), unet_name="wan2.1_i2v_480p_14B_fp16.safetensors",
                  weight_dtype="default")
    msd = wf.add("ModelSamplingSD3", (2480, -260), shift=8.0)
    ks = wf.add("KSampler", (2480, 0), seed=0, control_after_generate="fixed", steps=20, cfg=6.0,
                sampler_name="uni_pc", scheduler="simple", denoise=1.0)
    wf.link(unet, 0, msd, "model")
    wf.link(msd, 0, ks, "model")
    wf.link(start, 6, ks, "seed")
    for k, name in enumerate(("positive", "negative", "latent_image")):
        wf.link(i2v, k, ks, name)
    dec = wf.add("VAEDecode", (2860, 0))
    wf.link(ks, 0, dec, "samples")
    wf.link(vae, 0, dec, "vae")
    bsave = wf.add("SeedReuseBoundarySave", (2860, 140), color=CYAN, props={"labels": {0: "segment"}})
    wf.link(start, 0, bsave, "loop")
    wf.link(dec, 0, bsave, "images")
    end = wf.add("SeedReuseSegmentLoopEnd", (3240, 140), color=CYAN, props={"labels": {0: "segments", 1: "status"}})
    wf.link(start, 0, end, "loop")
    wf.link(bsave, 0, end, "segment")
    merge = wf.add("SeedReusePrefixMerge", (3620, 140), color=CYAN, size=(420, 520),
                   filename_prefix="video/seedreuse_wan21_i2v_long",
                   props={"labels": {0: "video", 1: "frame_count", 2: "status"}})
    wf.link(end, 0, merge, "segments")
    wf.settle()
    _encoder_group(wf, enc)
    wf.group("SeedReuse: encoder reuse", [sess, rpos, rneg, rcv], "#8A8")
    wf.group("One segment (the loop runs this body once per segment)", [i2v, ks, dec, bsave], "#a1309b")
    wf.note(SEG_NOTE, SEG_NOTE_POS, SEG_NOTE_SIZE, title="SeedReuse: segment reuse (Wan 2.1 I2V, long video)")
    return wf


T2V_NOTE = """## Change the seed and try again, without re-encoding

Queue this workflow once: the text encoder runs and SeedReuse stores its outputs (the
**positive** and **negative** slots) in the cache named in **SeedReuse Session**.
Every later run with the same prompts restores them from the shared disk cache, so
**Load CLIP** and **CLIP Text Encode** never run again, on any ComfyUI worker that sees
the same cache root (`SEEDREUSE_CACHE_ROOT`). The seed is randomized after each run.

**reuse** on the session: `auto` reuses when compatible and re-encodes otherwise;
`require` fails before sampling and names what changed; `off` always encodes (the
cache is still refreshed when the run succeeds). Only a fully successful run replaces
the cache. Use one cache name per model/configuration and per creative session.

Models: `wan2.1_t2v_1.3B_fp16.safetensors` (diffusion_models),
`umt5_xxl_fp8_e4m3fn_scaled.safetensors` (text_encoders), `wan_2.1_vae.safetensors` (vae).
"""

I2V_NOTE = """## Image to video: reuse text, CLIP vision and the VAE-encoded reference

Load your reference image and queue once. SeedReuse caches the text encoder outputs,
the CLIP vision output and the three outputs of **WanImageToVideo** (its conditioning
and the VAE-encoded reference latent: slots `i2v_positive`, `i2v_negative`, `i2v_latent`).
With the same prompt and image, the next run skips CLIP, CLIP vision, the image load and
the VAE encode, and only samples and decodes under the new seed.

Changing the image content (even under the same file name) or the prompt makes the
affected slots encode again (`auto`) or fails with the changed fields (`require`).

Models: `wan2.1_i2v_480p_14B_fp16.safetensors`, `umt5_xxl_fp8_e4m3fn_scaled.safetensors`,
`clip_vision_h.safetensors`, `wan_2.1_vae.safetensors`.
"""

SEG_NOTE = """## Long video in segments: keep the first N, regenerate the rest

**Segment Loop Start** splits the video (length = the audio's duration when
`total_frames` is 0) into segments of `segment_frames` (F) frames; each segment starts
from the last `motion_frames` (M) frames of the previous one. The body between Start and
**Segment Loop End** (WanImageToVideo -> KSampler -> VAE Decode -> **Boundary Save**) runs
once per segment; **Prefix Merge** joins the segments and the audio into the video.

After a successful run, set **reuse_prefix_segments** on the session to N (or click a
segment on the timeline of Segment Loop Start, right of this note): the next run keeps
segments 0..N-1 of the previous video (P(N) = N*(F-M)+M frames, stream-copied) and
generates from segment N on, starting from the exact cached boundary. Everything except the seed must stay the same;
N must be smaller than the segment count. Text and CLIP vision are reused as well.

Inputs: `example.png` ships with ComfyUI; `speech.wav` is a short test track in the pack's
`example_workflows/inputs/` (copy it to ComfyUI's `input/` folder, or load your own audio).
"""

BUILDERS = {"wan21_t2v_encoder_reuse": build_t2v, "wan21_i2v_encoder_reuse": build_i2v,
            "wan21_i2v_segment_reuse": build_segments}


# ---------------------------------------------------------------------- thumbnail

def render_thumbnail(ui: dict, title: str, path: Path, size=(512, 512)) -> None:
    from PIL import Image, ImageDraw

    W, H = size
    img = Image.new("RGB", size, (24, 24, 27))
    d = ImageDraw.Draw(img)
    boxes = [(n["pos"][0], n["pos"][1], n["pos"][0] + n["size"][0], n["pos"][1] + n["size"][1]) for n in ui["nodes"]]
    boxes += [(g["bounding"][0], g["bounding"][1], g["bounding"][0] + g["bounding"][2],
               g["bounding"][1] + g["bounding"][3]) for g in ui["groups"]]
    x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    x1, y1 = max(b[2] for b in boxes), max(b[3] for b in boxes)
    top, margin = example_files.draw_caption(img, title), 14
    s = min((W - 2 * margin) / (x1 - x0), (H - top - margin) / (y1 - y0))
    ox = margin + ((W - 2 * margin) - (x1 - x0) * s) / 2
    oy = top + ((H - top - margin) - (y1 - y0) * s) / 2

    def P(x, y):
        return ox + (x - x0) * s, oy + (y - y0) * s

    def rgb(c):
        c = c.lstrip("#")
        if len(c) == 3:
            c = "".join(ch * 2 for ch in c)
        return tuple(int(c[i:i + 2], 16) for i in (0, 2, 4))

    for g in ui["groups"]:
        bx, by, bw, bh = g["bounding"]
        col = rgb(g["color"])
        d.rounded_rectangle([P(bx, by), P(bx + bw, by + bh)], radius=4,
                            fill=tuple(int(c * 0.35 + 24 * 0.65) for c in col), outline=col)
    byid = {n["id"]: n for n in ui["nodes"]}
    link_colors = {"CONDITIONING": (255, 170, 80), "LATENT": (255, 130, 200), "MODEL": (180, 160, 255),
                   "IMAGE": (100, 180, 255), "CLIP": (255, 220, 90), "VAE": (255, 100, 100),
                   "SEEDREUSE_SESSION": (80, 220, 200), "SEEDREUSE_LOOP": (80, 220, 200)}
    for lid, a, ao, b, bi, t in ui["links"]:
        na, nb = byid[a], byid[b]
        sx, sy = P(na["pos"][0] + na["size"][0], na["pos"][1] + 30 + 20 * ao)
        ex, ey = P(nb["pos"][0], nb["pos"][1] + 30 + 20 * bi)
        pts = []
        for k in range(17):
            u = k / 16
            cx = (1 - u) ** 3 * sx + 3 * (1 - u) ** 2 * u * (sx + 40) + 3 * (1 - u) * u * u * (ex - 40) + u ** 3 * ex
            cy = (1 - u) ** 3 * sy + 3 * (1 - u) ** 2 * u * sy + 3 * (1 - u) * u * u * ey + u ** 3 * ey
            pts.append((cx, cy))
        d.line(pts, fill=link_colors.get(t, (170, 170, 170)), width=2)
    for n in ui["nodes"]:
        bg = rgb(n.get("bgcolor", "#353535"))
        fg = rgb(n.get("color", "#222222"))
        (ax, ay), (bx, by) = P(*n["pos"]), P(n["pos"][0] + n["size"][0], n["pos"][1] + n["size"][1])
        d.rounded_rectangle([ax, ay, bx, by], radius=3, fill=bg, outline=(12, 12, 12))
        d.rectangle([ax, ay, bx, min(by, ay + max(4, 30 * s))], fill=fg)
        if n["type"].startswith("SeedReuse"):
            d.rounded_rectangle([ax - 1, ay - 1, bx + 1, by + 1], radius=3, outline=(80, 220, 200), width=2)
    img.save(path, "JPEG", quality=88, optimize=True)


# id (the API twin's name) -> title: the UI file's name, so the template browser's card title and
# description, and the thumbnail's caption
TITLES = {"wan21_t2v_encoder_reuse": "Wan 2.1 text to video, reuse the text encoding",
          "wan21_i2v_encoder_reuse": "Wan 2.1 image to video, reuse all encodings",
          "wan21_i2v_segment_reuse": "Wan 2.1 long video, keep the first N segments"}
FILES = example_files.file_names(TITLES)   # id -> (UI file, thumbnail, API twin)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--server", default="http://127.0.0.1:8188", help="a ComfyUI with SeedReuse loaded")
    src.add_argument("--object-info", help="a saved GET /object_info response instead of --server")
    ap.add_argument("--out", default=str(OUT), help="the example_workflows folder")
    ap.add_argument("--no-thumbnails", action="store_true")
    args = ap.parse_args(argv)
    info = load_object_info(None if args.object_info else args.server, args.object_info)
    out = Path(args.out)
    (out / "api").mkdir(parents=True, exist_ok=True)
    for name, build in BUILDERS.items():
        wf = build(info)
        ui = wf.to_ui()
        ui_file, thumb, api_file = FILES[name]
        (out / ui_file).write_text(json.dumps(ui, indent=2) + "\n")
        (out / api_file).write_text(json.dumps(wf.to_api(), indent=2) + "\n")
        if not args.no_thumbnails:
            render_thumbnail(ui, TITLES[name], out / thumb)
        print(f"wrote {ui_file!r} and {api_file}: {len(wf.nodes)} nodes, {len(wf.links)} links")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
