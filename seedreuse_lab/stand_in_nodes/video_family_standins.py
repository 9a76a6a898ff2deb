"""Stand-ins for the video families of the support matrix (ComfyUI 0.33: LTX-2, MiniMax H3,
HunyuanVideo 1.5): what cannot be tiny, behind the family's STOCK encode nodes.

The language-model text encoders (LTX-2's Gemma 3 12B, MiniMax H3's Qwen3-VL 32B, HunyuanVideo
1.5's Qwen2.5-VL 7B + byT5) and HunyuanVideo 1.5's SigLIP have host-fixed full-size configs. Their
stand-in loaders (same inputs as LTXAVTextEncoderLoader / CLIPLoader / DualCLIPLoader /
CLIPVisionLoader) return objects with the interface the stock nodes call (``tokenize``,
``encode_from_tokens_scheduled``, ``generate``, ``decode``; ``encode_image``), so CLIPTextEncode,
TextGenerateLTX2Prompt, MiniMaxH3ImageToVideo, HunyuanVideo15ImageToVideo and CLIPVisionEncode
run unchanged. What they return has the real structure and the real widths:

* Gemma 3 12B (LTX-2, CLIPType LTXV): ``[[tensor(1, L, 3840), {"pooled_output": None,
  "unprocessed_ltxav_embeds": True}]]`` (the single-linear projection's output, L = the prompt's
  tokens + BOS); ``generate`` samples token ids from the prompt, its image and, when sampling,
  the seed and sampling settings (a different seed gives a different text).
* Qwen3-VL 32B (MiniMax H3): ``[[tensor(1, L, 5120), {"pooled_output": None,
  "minimax_token_tags": long tensor [L]}]]``, L = "<Picture i>: " labels, each image's vision
  block (start, (h/32)(w/32) tokens, end; tag 0) and the prompt's tokens (tag 1).
* Qwen2.5-VL 7B + byT5 small (HunyuanVideo 1.5): ``[[tensor(1, L, 3584), {"pooled_output": None,
  "conditioning_byt5small": tensor(1, Lb, 1472)}]]``, the byT5 entry only for a prompt with quoted
  text, as the real tokenizer does.
* SigLIP so400m (CLIPVisionLoader): a ``comfy.clip_vision.Output`` with last_hidden_state and
  penultimate_hidden_states ``[B, 729, 1152]``, image_embeds ``[B, 1152]``, image_sizes and
  mm_projected None.

Every value is a deterministic function of the inputs and the placeholder file's sha256. Counters
(GET /seedreuse_test/counts): text_loader / text_encode / text_generate, clip_vision_loader /
clip_vision_encode.

SeedReuseTestTinyVAELoader builds the host's own MiniMax H3 video VAE or HunyuanVideo 1.5 VAE at
the tiny config in the file's metadata (seedreuse_lab/_gen_video_family_models.py), which the
stock VAELoader cannot (the host fixes 2.6B / 1.26B-parameter configs): comfy.sd.VAE runs its own
detection and wrapper code with the tiny class in place of the full one.
"""
from __future__ import annotations

import contextlib
import json
import math
import threading

import torch

import comfy.clip_vision
import comfy.sd
import comfy.utils
import folder_paths
from comfy_api.latest import io

from .standins import StandInModel, _generator, _tensor_bytes, count

GEMMA_WIDTH = 3840        # LTX-2 Gemma 3 12B text projection output (single_linear)
QWEN3VL_WIDTH = 5120      # Qwen3-VL 32B hidden size (MiniMax H3 text_dim)
QWEN25_WIDTH = 3584       # Qwen2.5-VL 7B hidden size (HunyuanVideo 1.5 context_in_dim)
BYT5_WIDTH = 1472         # byT5 small (glyph) d_model
SIGLIP_TOKENS, SIGLIP_WIDTH = 729, 1152   # SigLIP so400m at 384 px: 27 x 27 patches of 14
VISION_TOKEN_PIXELS = 32  # Qwen3-VL: 16 px patches merged 2 x 2


def _words(text: str) -> int:
    return len(str(text).split())


class StandInClip(StandInModel):
    """A CLIP object as the stock text nodes use it (tokenize / encode / generate / decode)."""

    def __init__(self, family: str, name: str, path: str, extra_paths: tuple = ()):
        super().__init__(family, name, path)
        for p in extra_paths:                  # DualCLIPLoader: both files identify the model
            self.sha256 = _generator_hex(self.sha256, StandInModel(family, p, p).sha256)
        self.family = family
        self.tokenizer = _Tokenizer(family)

    # what comfy.sd.CLIP.tokenize returns is opaque to the nodes: keep the inputs
    def tokenize(self, text, return_word_ids=False, **kwargs):
        return {"family": self.family, "text": str(text), "image": kwargs.get("image"),
                "images": list(kwargs.get("images") or []), "skip_template": kwargs.get("skip_template")}

    def encode_from_tokens_scheduled(self, tokens, unprojected=False, add_dict={}, show_pbar=True):
        count("text_encode")
        cond, extra = _ENCODERS[self.family](self, tokens)
        return [[cond, {"pooled_output": None, **extra, **add_dict}]]

    def encode_from_tokens(self, tokens, return_pooled=False, return_dict=False):
        cond, extra = self.encode_from_tokens_scheduled(tokens)[0]
        if return_dict:
            return {"cond": cond, **extra}
        return (cond, None) if return_pooled else cond

    def generate(self, tokens, do_sample=True, max_length=256, temperature=1.0, top_k=50, top_p=0.95, min_p=0.0,
                 repetition_penalty=1.0, seed=None, presence_penalty=0.0):
        count("text_generate")
        parts = ["generate", self.sha256, tokens["text"]]
        if tokens.get("image") is not None:
            parts.append(_tensor_bytes(tokens["image"]))
        if do_sample:   # greedy decoding ignores the seed and the sampling settings
            parts.append(repr((seed, float(temperature), int(top_k), float(top_p), float(min_p),
                               float(repetition_penalty), float(presence_penalty))))
        g = _generator(*parts)
        n = max(1, min(int(max_length), 12))
        return torch.randint(0, 4096, (n,), generator=g).tolist()

    def decode(self, token_ids, skip_special_tokens=True):
        return "Style: cinematic. " + " ".join(f"w{int(t)}" for t in token_ids) + "."


class _Tokenizer:
    def __init__(self, family: str):
        self.clip_name = family       # TextGenerateLTX2Prompt reads clip.tokenizer.clip_name ("gemma4" or not)


def _generator_hex(*parts: str) -> str:
    import hashlib
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
    return h.hexdigest()


def _gemma(clip: StandInClip, tokens: dict):
    # Gemma 3 pads left to 1024 and the LTX-2 encoder keeps the attended positions: BOS + prompt
    n = _words(tokens["text"]) + 1
    g = _generator("gemma3_12b", clip.sha256, tokens["text"])
    return torch.randn((1, n, GEMMA_WIDTH), generator=g), {"unprocessed_ltxav_embeds": True}


def _qwen3vl(clip: StandInClip, tokens: dict):
    parts, tags = ["qwen3vl_32b", clip.sha256], []
    for i, img in enumerate(tokens["images"]):
        label = _words(f"<Picture {i + 1}>: ") + 3
        vision = max(1, math.ceil(img.shape[1] / VISION_TOKEN_PIXELS)) * max(1, math.ceil(img.shape[2] / VISION_TOKEN_PIXELS))
        tags += [1] * label + [0] * (vision + 2)        # <|vision_start|> .. <|vision_end|> tagged as video
        parts.append(_tensor_bytes(img))
    tags += [1] * max(1, _words(tokens["text"]))
    parts.append(tokens["text"])
    g = _generator(*parts)
    return (torch.randn((1, len(tags), QWEN3VL_WIDTH), generator=g),
            {"minimax_token_tags": torch.tensor(tags, dtype=torch.long)})


def _quoted(text: str) -> list:
    import re
    return [m for p in (r'\"(.*?)\"', r'‘(.*?)’', r'“(.*?)”') for m in re.findall(p, text)]


def _hv15(clip: StandInClip, tokens: dict):
    text = tokens["text"]
    g = _generator("qwen25_7b_hv15", clip.sha256, text)
    cond = torch.randn((1, _words(text) + 1, QWEN25_WIDTH), generator=g)
    extra = {}
    quoted = _quoted(text)
    if quoted:   # the real tokenizer sends 'Text "<quote>". ' per quote to byT5 (one token per byte + end)
        glyphs = "".join(f'Text "{q}". ' for q in quoted)
        extra["conditioning_byt5small"] = torch.randn((1, len(glyphs.encode()) + 1, BYT5_WIDTH), generator=g)
    return cond, extra


_ENCODERS = {"gemma3_12b": _gemma, "qwen3vl_32b": _qwen3vl, "hunyuan_video_15": _hv15}
# CLIPLoader / DualCLIPLoader "type" -> stand-in family
_CLIP_TYPES = {"minimax": "qwen3vl_32b", "hunyuan_video_15": "hunyuan_video_15", "ltxv": "gemma3_12b"}


def _clip_type_input():
    return io.Combo.Input("type", options=sorted(_CLIP_TYPES))


class SeedReuseTestLTXAVTextEncoderLoader(io.ComfyNode):
    """LTXAVTextEncoderLoader (Gemma 3 12B + the checkpoint's text projection): stand-in."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestLTXAVTextEncoderLoader",
            display_name="SeedReuse Test: LTXV Audio Text Encoder Loader (stand-in Gemma 3 12B)",
            category="SeedReuse/test",
            inputs=[io.Combo.Input("text_encoder", options=folder_paths.get_filename_list("text_encoders")),
                    io.Combo.Input("ckpt_name", options=folder_paths.get_filename_list("checkpoints")),
                    io.Combo.Input("device", options=["default", "cpu"], default="default")],
            outputs=[io.Clip.Output()],
        )

    @classmethod
    def execute(cls, text_encoder, ckpt_name, device="default"):
        count("text_loader")
        return io.NodeOutput(StandInClip(
            "gemma3_12b", text_encoder, folder_paths.get_full_path_or_raise("text_encoders", text_encoder),
            (folder_paths.get_full_path_or_raise("checkpoints", ckpt_name),)))


class SeedReuseTestVideoCLIPLoader(io.ComfyNode):
    """CLIPLoader for the video families' language-model encoders (type minimax): stand-in."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestVideoCLIPLoader",
            display_name="SeedReuse Test: CLIP Loader (stand-in Qwen3-VL 32B / video LLM encoders)",
            category="SeedReuse/test",
            inputs=[io.Combo.Input("clip_name", options=folder_paths.get_filename_list("text_encoders")),
                    _clip_type_input(), io.Combo.Input("device", options=["default", "cpu"], default="default")],
            outputs=[io.Clip.Output()],
        )

    @classmethod
    def execute(cls, clip_name, type, device="default"):
        count("text_loader")
        return io.NodeOutput(StandInClip(_CLIP_TYPES[type], clip_name,
                                         folder_paths.get_full_path_or_raise("text_encoders", clip_name)))


class SeedReuseTestVideoDualCLIPLoader(io.ComfyNode):
    """DualCLIPLoader (type hunyuan_video_15: Qwen2.5-VL 7B + byT5 small): stand-in."""

    @classmethod
    def define_schema(cls):
        names = folder_paths.get_filename_list("text_encoders")
        return io.Schema(
            node_id="SeedReuseTestVideoDualCLIPLoader",
            display_name="SeedReuse Test: Dual CLIP Loader (stand-in Qwen2.5-VL 7B + byT5)",
            category="SeedReuse/test",
            inputs=[io.Combo.Input("clip_name1", options=names), io.Combo.Input("clip_name2", options=names),
                    _clip_type_input(), io.Combo.Input("device", options=["default", "cpu"], default="default")],
            outputs=[io.Clip.Output()],
        )

    @classmethod
    def execute(cls, clip_name1, clip_name2, type, device="default"):
        count("text_loader")
        return io.NodeOutput(StandInClip(
            _CLIP_TYPES[type], clip_name1, folder_paths.get_full_path_or_raise("text_encoders", clip_name1),
            (folder_paths.get_full_path_or_raise("text_encoders", clip_name2),)))


class StandInSigLIP(StandInModel):
    """A CLIP vision model as CLIPVisionEncode uses it (encode_image)."""

    def encode_image(self, image, crop=True):
        count("clip_vision_encode")
        b = image.shape[0]
        g = _generator("siglip", self.sha256, repr(bool(crop)), _tensor_bytes(image))
        out = comfy.clip_vision.Output()
        out["last_hidden_state"] = torch.randn((b, SIGLIP_TOKENS, SIGLIP_WIDTH), generator=g)
        out["image_embeds"] = torch.randn((b, SIGLIP_WIDTH), generator=g)
        out["image_sizes"] = [torch.Size([3, 384, 384])] * b
        out["penultimate_hidden_states"] = torch.randn((b, SIGLIP_TOKENS, SIGLIP_WIDTH), generator=g)
        out["mm_projected"] = None
        return out


class SeedReuseTestSigLIPLoader(io.ComfyNode):
    """CLIPVisionLoader for SigLIP so400m (HunyuanVideo 1.5): stand-in."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestSigLIPLoader",
            display_name="SeedReuse Test: CLIP Vision Loader (stand-in SigLIP so400m)",
            category="SeedReuse/test",
            inputs=[io.Combo.Input("clip_name", options=folder_paths.get_filename_list("clip_vision"))],
            outputs=[io.ClipVision.Output()],
        )

    @classmethod
    def execute(cls, clip_name):
        count("clip_vision_loader")
        return io.NodeOutput(StandInSigLIP("siglip_so400m", clip_name,
                                           folder_paths.get_full_path_or_raise("clip_vision", clip_name)))


# --------------------------------------------------------------------------- tiny host VAEs

_PATCH_LOCK = threading.Lock()


@contextlib.contextmanager
def _replaced(module, name: str, value):
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _widened(cls, params: dict):
    """``cls`` whose constructor takes ``params`` over what its caller passes."""
    return type(cls.__name__, (cls,), {"__init__": lambda self, *a, **kw: cls.__init__(self, *a, **{**kw, **params})})


def _minimax_video(params: dict):
    from comfy.ldm.minimax import vae as mvae

    p = dict(params)
    dec = p.pop("decoder")
    full = mvae.MiniMaxH3VideoVAE

    def build(operations=None, **kw):
        m = full(operations=operations, **{**kw, **p})
        m.decoder = mvae.ViT3DDecoder(patch_size=m.vae_ratio, patch_size_t=m.vae_ratio_t, in_channels=24, out_channels=3,
                                      operations=operations, **dec)
        return m
    return _replaced(mvae, "MiniMaxH3VideoVAE", build)


@contextlib.contextmanager
def _hv15(params: dict):
    from comfy.ldm.hunyuan_video import vae_refiner as vr

    with _replaced(vr, "Encoder", _widened(vr.Encoder, params)), _replaced(vr, "Decoder", _widened(vr.Decoder, params)):
        yield


_TINY_VAES = {"minimax_h3_video": _minimax_video, "hunyuan_video_15": _hv15}


class SeedReuseTestTinyVAELoader(io.ComfyNode):
    """VAELoader for a host VAE whose config the host fixes at full size: the host's own class at
    the tiny config of the file's metadata, through comfy.sd.VAE's own detection."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestTinyVAELoader",
            display_name="SeedReuse Test: VAE Loader (host VAE class at a tiny config)",
            category="SeedReuse/test",
            inputs=[io.Combo.Input("vae_name", options=folder_paths.get_filename_list("vae"))],
            outputs=[io.Vae.Output()],
        )

    @classmethod
    def execute(cls, vae_name):
        count("tiny_vae_loader")
        sd, metadata = comfy.utils.load_torch_file(folder_paths.get_full_path_or_raise("vae", vae_name),
                                                   return_metadata=True)
        config = json.loads((metadata or {}).get("config") or "{}")
        if config.get("tiny_vae") not in _TINY_VAES:
            raise RuntimeError(f"{vae_name}: not a tiny VAE of the video family generator (metadata {config})")
        with _PATCH_LOCK, _TINY_VAES[config["tiny_vae"]](config["params"]):
            vae = comfy.sd.VAE(sd=sd)
        vae.throw_exception_if_invalid()
        return io.NodeOutput(vae)


VIDEO_FAMILY_NODES = [SeedReuseTestLTXAVTextEncoderLoader, SeedReuseTestVideoCLIPLoader, SeedReuseTestVideoDualCLIPLoader,
                      SeedReuseTestSigLIPLoader, SeedReuseTestTinyVAELoader]
