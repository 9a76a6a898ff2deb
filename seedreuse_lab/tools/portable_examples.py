"""One set of example files for every tested host (ComfyUI 0.3.75 and 0.33.0).

The template browser serves a pack's example_workflows/ as they are, whatever the host, so the
examples cannot be per host. Between the tested hosts a few stock nodes the examples use gained
widgets (or, for SaveVideo, turned ``format`` into a dynamic combo whose option carries the
codec). The examples are therefore built against fixed node specs for exactly those nodes:

- a UI workflow saves their widgets in the layout of the OLDEST tested host (``SAVED_SPECS``,
  ComfyUI 0.3.75's /object_info inputs). That layout is a prefix of the newer host's, position
  by position (SaveVideo's third widget is ``codec`` there and ``format.codec`` on 0.33), so a
  newer canvas loads the file and gives the widgets it added their defaults;
- an API twin carries the inputs of EVERY tested host (``NEWER_INPUTS`` added to the old
  ones): ComfyUI drops a prompt input that is not in the node's schema
  (``execution.get_input_data`` skips inputs without a category; validation only reads the
  schema's inputs), so one twin validates and runs on both, with the values the newer canvas
  sends for the widgets the file predates.

What this does not cover: a node whose inputs are renamed or removed, or a newer widget
inserted before an old one, would need a per-host file (tests/test_examples.py's
test_portable_specs_fit_this_host fails on such a host and names the node).
"""
from __future__ import annotations

import copy

_NO_OUTPUTS = {"output": [], "output_name": [], "output_is_list": []}

# ComfyUI 0.3.75's /object_info "input" and "input_order" (and outputs, where they differ) of
# the nodes whose slots or widgets differ on a newer tested host (tooltips left out: the
# builders do not use them). 0.33's SaveImage and SaveVideo also pass their input on as an
# output; a file saved without it gets it from the newer canvas, unlinked.
SAVED_SPECS: dict[str, dict] = {
    "SaveImage": dict(_NO_OUTPUTS),
    "SaveVideo": {
        **_NO_OUTPUTS,
        "input": {"required": {
            "video": ["VIDEO", {}],
            "filename_prefix": ["STRING", {"default": "video/ComfyUI", "multiline": False}],
            "format": ["COMBO", {"default": "auto", "multiselect": False, "options": ["auto", "mp4"]}],
            "codec": ["COMBO", {"default": "auto", "multiselect": False, "options": ["auto", "h264"]}]},
            "hidden": {"prompt": ["PROMPT"], "extra_pnginfo": ["EXTRA_PNGINFO"]}},
        "input_order": {"required": ["video", "filename_prefix", "format", "codec"],
                        "hidden": ["prompt", "extra_pnginfo"]},
    },
    "CFGNorm": {
        "input": {"required": {"model": ["MODEL", {}],
                               "strength": ["FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.01}]}},
        "input_order": {"required": ["model", "strength"]},
    },
    "CreateVideo": {
        "input": {"required": {"images": ["IMAGE", {}],
                               "fps": ["FLOAT", {"default": 30.0, "min": 1.0, "max": 120.0, "step": 1.0}]},
                  "optional": {"audio": ["AUDIO", {}]}},
        "input_order": {"required": ["images", "fps"], "optional": ["audio"]},
    },
    "ImageScaleToTotalPixels": {
        "input": {"required": {
            "image": ["IMAGE", {}],
            "upscale_method": ["COMBO", {"multiselect": False,
                                         "options": ["nearest-exact", "bilinear", "area", "bicubic", "lanczos"]}],
            "megapixels": ["FLOAT", {"default": 1.0, "min": 0.01, "max": 16.0, "step": 0.01}]}},
        "input_order": {"required": ["image", "upscale_method", "megapixels"]},
    },
}

# Inputs of the newer tested host (ComfyUI 0.33.0) that SAVED_SPECS lack, as an API twin carries
# them: a constant (the value the 0.33 canvas sends for a widget the file predates: its
# default, or what the examples need), or the name of the old input whose value it repeats.
# ImageScaleToTotalPixels.resolution_steps is required on 0.33 (1: the 0.3.75 behaviour).
NEWER_INPUTS: dict[str, dict[str, object]] = {
    "SaveVideo": {"format.codec": ("same as", "codec")},
    "CFGNorm": {"pre_cfg": False},
    "CreateVideo": {"bit_depth": 8},
    "ImageScaleToTotalPixels": {"resolution_steps": 1},
}


def saved_object_info(object_info: dict) -> dict:
    """The host's /object_info with SAVED_SPECS' inputs for the nodes it has of them (outputs
    stay the host's): what the example builders lay the files out with, on any host."""
    info = dict(object_info)
    for class_type, spec in SAVED_SPECS.items():
        if class_type in info:
            info[class_type] = {**info[class_type], **copy.deepcopy(spec)}
    return info


def with_newer_inputs(api: dict) -> dict:
    """A copy of an API prompt with every tested host's inputs (NEWER_INPUTS added where the
    prompt does not set them)."""
    api = copy.deepcopy(api)
    for node in api.values():
        ins = node.get("inputs") or {}
        for name, value in NEWER_INPUTS.get(node.get("class_type"), {}).items():
            if name in ins:
                continue
            if isinstance(value, tuple):
                if value[1] not in ins:
                    continue
                value = ins[value[1]]
            ins[name] = value
    return api


def without_newer_inputs(api: dict) -> dict:
    """A copy of an API prompt without NEWER_INPUTS (what the UI file's saved layout holds)."""
    api = copy.deepcopy(api)
    for node in api.values():
        for name in NEWER_INPUTS.get(node.get("class_type"), {}):
            (node.get("inputs") or {}).pop(name, None)
    return api


def other_host_inputs(class_type: str) -> set[str]:
    """Inputs a twin may carry for a tested host other than the one at hand: the saved specs'
    inputs and the newer ones (a host ignores those outside its schema)."""
    names = set(NEWER_INPUTS.get(class_type, {}))
    spec_inputs = (SAVED_SPECS.get(class_type) or {}).get("input", {})
    for section in ("required", "optional"):
        names |= set(spec_inputs.get(section) or {})
    return names
