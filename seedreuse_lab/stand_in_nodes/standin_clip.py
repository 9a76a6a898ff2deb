"""The stand-in text encoder of the image and audio families: ``StandInCLIP`` is what the stock
loaders return (``comfy.sd.CLIP``) as the STOCK encode nodes use it (CLIPTextEncode,
TextEncodeAceStepAudio1.5, TextEncodeQwenImageEditPlus's calls, ...), for encoders the host fixes
at full size (Qwen3 4B, Mistral 3 24B, Qwen2.5-VL 7B, T5-XXL, CLIP-G, ACE-Step 1.5's Qwen3 0.6B
and language model).

``tokenize`` is the host's own tokenizer class of the family (its vocabulary files from the host
tree), so token counts, padding, chat templates, image placeholders and ACE-Step's metadata and
seed are the real ones. ``encode_from_tokens_scheduled`` counts (``text_encode``) and returns the
real encoder's output STRUCTURE and SHAPES, read from the host's encoder classes (cond width,
pooled outputs, attention masks, the Qwen-Image template crop, ACE-Step's
``conditioning_lyrics`` and its ``audio_codes`` sampled with the node's own seed), with values
drawn from a seed made of the encoder files' sha256 and the tokens: deterministic, different per
prompt. Not reproduced: the network's values. The Flux.2 dev tokenizer (Mistral tekken) ships
inside the real encoder file, not in the host tree: there, one token per word of the host's chat
template. ``LOADER_KINDS``: which encoder a loader builds from its files' kinds and its ``type``,
as comfy.sd.load_clip picks the class.
"""
from __future__ import annotations

import json
import math
import numbers

import torch

from .standins import _generator, _tensor_bytes, count

ACE_CODEBOOK = 8 * 8 * 8 * 5 * 5 * 5       # ACE-Step 1.5 FSQ levels: audio codes are in [0, 64000)
QWEN_VL_MERGE = 28                          # Qwen2.5-VL: 14 px patches merged 2x2
QWEN_IM_START = 151644


def _tokenizer(kind: str):
    """The host's tokenizer class of the family (None for Flux.2 dev: tekken data lives in the file)."""
    if kind == "zimage":
        from comfy.text_encoders.z_image import ZImageTokenizer
        return ZImageTokenizer()
    if kind == "flux2_klein_4b":
        from comfy.text_encoders.flux import KleinTokenizer
        return KleinTokenizer()
    if kind == "qwen_image":
        from comfy.text_encoders.qwen_image import QwenImageTokenizer
        return QwenImageTokenizer()
    if kind == "flux1":
        from comfy.text_encoders.flux import FluxTokenizer
        return FluxTokenizer()
    if kind in ("sdxl", "sdxl_refiner"):
        from comfy.sdxl_clip import SDXLTokenizer
        return SDXLTokenizer()
    if kind == "sd3":
        from comfy.text_encoders.sd3_clip import SD3Tokenizer
        return SD3Tokenizer()
    if kind == "ace15":
        from comfy.text_encoders.ace15 import ACE15Tokenizer
        return ACE15Tokenizer()
    if kind == "flux2_dev":
        return _WordTokenizer()
    raise ValueError(f"no stand-in text encoder of kind {kind!r}")


class _WordTokenizer:
    """Flux.2 dev's tokens without its tekken file: Flux2Tokenizer's chat template, one token per
    word (ids from a hash), start token 1, no padding (the real Mistral3Tokenizer pads nothing)."""
    TEMPLATE = ("[SYSTEM_PROMPT]You are an AI that reasons about image descriptions. You give structured "
                "responses focusing on object relationships, object\nattribution and actions without "
                "speculation.[/SYSTEM_PROMPT][INST]{}[/INST]")

    def tokenize_with_weights(self, text, return_word_ids=False, llama_template=None, **kwargs):
        words = (llama_template or self.TEMPLATE).format(text).split()
        ids = [1] + [1000 + int.from_bytes(w.encode()[:3].ljust(3, b"\0"), "little") % 100000 for w in words]
        return {"mistral3_24b": [[(t, 1.0) for t in ids]]}


def _ids(section) -> list:
    return [p[0] for p in section]


def _token_bytes(tokens) -> bytes:
    """Every token id and embedded image of a tokenize() result, as bytes (the values' seed)."""
    parts = []

    def walk(v):
        if isinstance(v, dict):
            for k in sorted(v, key=str):
                parts.append(str(k).encode())
                walk(v[k])
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif torch.is_tensor(v):
            parts.append(_tensor_bytes(v))
        else:
            parts.append(repr(v).encode())
    walk(tokens)
    return b"\0".join(parts)


def _mask(section, pad: int, end: int | None) -> list:
    """sd1_clip.SDClipModel.process_tokens' attention mask of one section (integer tokens)."""
    out, eos, left_pad = [], False, False
    cmp = pad if end is None else end
    for i, tok in enumerate(_ids(section)):
        if not isinstance(tok, numbers.Integral):
            out.append(1)
            continue
        if i == 0 and tok == pad:
            left_pad = True
        if eos or (left_pad and tok == pad):
            out.append(0)
        else:
            out.append(1)
            left_pad = False
        if not eos and tok == cmp and not left_pad:
            if end is None:
                out[-1] = 0
            eos = True
    return out


def _vision_tokens(image: torch.Tensor) -> int:
    """qwen_vl.process_qwen2vl_images' resize (to multiples of 28, at least 3136 pixels), one
    merged token per 28x28."""
    h, w = image.shape[-3], image.shape[-2]
    f = QWEN_VL_MERGE
    hb, wb = round(h / f) * f, round(w / f) * f
    if hb * wb < 3136:
        beta = math.sqrt(3136 / (h * w))
        hb, wb = math.ceil(h * beta / f) * f, math.ceil(w * beta / f) * f
    return (hb // f) * (wb // f)


class StandInCLIP:
    """What comfy.sd.CLIP is to the stock encode nodes, with a counting stand-in network."""

    def __init__(self, kind: str, file_sha256s: list[str]):
        self.kind = kind
        self.sha256 = ":".join(file_sha256s)
        self.tokenizer = _tokenizer(kind)
        self.layer_idx = None
        self.tokenizer_options = {}

    def __repr__(self):
        return f"StandInCLIP({self.kind!r})"

    # -- what the stock nodes call
    def clone(self, disable_dynamic=False):
        n = StandInCLIP.__new__(StandInCLIP)
        n.__dict__.update(self.__dict__, tokenizer_options=dict(self.tokenizer_options))
        return n

    def clip_layer(self, layer_idx):
        self.layer_idx = layer_idx

    def set_tokenizer_option(self, option_name, value):
        self.tokenizer_options[option_name] = value

    def tokenize(self, text, return_word_ids=False, **kwargs):
        if self.tokenizer_options:
            kwargs["tokenizer_options"] = {**self.tokenizer_options, **kwargs.get("tokenizer_options", {})}
        return self.tokenizer.tokenize_with_weights(text, return_word_ids, **kwargs)

    def encode_from_tokens_scheduled(self, tokens, unprojected=False, add_dict: dict = {}, show_pbar=True):
        d = self.encode_from_tokens(tokens, return_pooled=True, return_dict=True)
        cond = d.pop("cond")
        d.update(add_dict)
        return [[cond, d]]

    def encode_from_tokens(self, tokens, return_pooled=False, return_dict=False):
        count("text_encode")

        def gen(*parts):      # values drawn from the encoder files and what they encode
            return _generator("stand-in text encoder", self.kind, self.sha256, *parts)
        cond, pooled, extra = ENCODERS[self.kind](tokens, gen)
        if return_dict:
            return {"cond": cond, "pooled_output": pooled, **extra}
        return (cond, pooled) if return_pooled else cond

    def encode(self, text):
        return self.encode_from_tokens(self.tokenize(text))


# --------------------------------------------------------------------------- the networks' outputs

def _rand(g, *shape):
    return torch.randn(shape, generator=g, dtype=torch.float32)


def _llm(tokens, key, g, width, *, pad, end=None):
    """An SDClipModel LLM with attention masks (sd1_clip.ClipTokenWeightEncoder): one row per
    section, concatenated; the mask flattened to (1, n) int64."""
    sections = tokens[key]
    masks = [_mask(s, pad, end) for s in sections]
    n = sum(len(m) for m in masks)
    return _rand(g, 1, n, width), torch.tensor([sum(masks, [])], dtype=torch.long)


def _zimage(tokens, gen):
    g = gen(_token_bytes(tokens))
    # ZImageTEModel: Qwen3 4B, hidden layer -2, attention masks on
    cond, mask = _llm(tokens, "qwen3_4b", g, 2560, pad=151643)
    return cond, None, {"attention_mask": mask}


def _flux2(key, width):
    # Flux2TEModel: three hidden layers stacked per token -> 3 x width
    def enc(tokens, gen):
        cond, mask = _llm(tokens, key, gen(_token_bytes(tokens)), 3 * width, pad=151643 if key.startswith("qwen") else 11)
        return cond, None, {"attention_mask": mask}
    return enc


def _qwen_image(tokens, gen):
    """QwenImageTEModel: the system template cropped (up to the 2nd <|im_start|> and "user\\n"),
    each image one vision token per 28x28 pixels, the mask dropped when nothing is masked."""
    g = gen(_token_bytes(tokens))
    section = tokens["qwen25_7b"][0]
    ids = _ids(section)
    template_end, seen = -1, 0
    for i, t in enumerate(ids):
        if isinstance(t, numbers.Integral) and t == QWEN_IM_START and seen < 2:
            template_end, seen = i, seen + 1
    n = sum(_vision_tokens(t["data"]) if isinstance(t, dict) else 1 for t in ids)
    if n > template_end + 3 and ids[template_end + 1] == 872 and ids[template_end + 2] == 198:
        template_end += 3
    mask = _mask(section, 151643, None)
    mask = mask[:template_end] + [1] * (n - len(mask)) + mask[template_end:]   # vision tokens come later
    extra = {} if all(mask[template_end:]) else {"attention_mask": torch.tensor([mask[template_end:]])}
    return _rand(g, 1, n - template_end, 3584), None, extra


def _clip_rows(tokens, key, g, width):
    sections = tokens[key]
    return _rand(g, 1, 77 * len(sections), width)


def _flux1(tokens, gen):
    g = gen(_token_bytes(tokens))
    # FluxClipModel: T5-XXL (min 256 tokens, no mask) + CLIP-L's unprojected pooled output
    t5 = _rand(g, 1, sum(len(s) for s in tokens["t5xxl"]), 4096)
    return t5, _rand(g, 1, 768), {}


def _sdxl(tokens, gen):
    g = gen(_token_bytes(tokens))
    # SDXLClipModel: CLIP-L (768) and CLIP-G (1280) per 77-token section, CLIP-G's pooled output
    n = min(77 * len(tokens["l"]), 77 * len(tokens["g"]))
    return _rand(g, 1, n, 2048), _rand(g, 1, 1280), {}


def _sdxl_refiner(tokens, gen):
    g = gen(_token_bytes(tokens))
    return _clip_rows(tokens, "g", g, 1280), _rand(g, 1, 1280), {}


def _sd3(tokens, gen):
    g = gen(_token_bytes(tokens))
    # SD3ClipModel: CLIP-L + CLIP-G padded to 4096, then T5-XXL (min 77 tokens); pooled L + G
    lg = torch.nn.functional.pad(_rand(g, 1, 77 * len(tokens["l"]), 2048), (0, 4096 - 2048))
    t5 = _rand(g, 1, sum(len(s) for s in tokens["t5xxl"]), 4096)
    return torch.cat([lg, t5], dim=-2), _rand(g, 1, 2048), {}


def _ace15(tokens, gen):
    """ACE15TEModel: Qwen3 0.6B on the caption (last layer) and on the lyrics (layer 0), which the
    node's seed does not change, and, when generate_audio_codes is on, min_tokens audio codes
    sampled by the language model with the node's own seed (the same prompt and seed give the
    same codes, another seed others)."""
    base = _rand(gen(_token_bytes(tokens["qwen3_06b"])), 1, sum(len(s) for s in tokens["qwen3_06b"]), 1024)
    lyrics = _rand(gen(_token_bytes(tokens["lyrics"])), 1, sum(len(s) for s in tokens["lyrics"]), 1024)
    out = {"conditioning_lyrics": lyrics}
    meta = tokens["lm_metadata"]
    if meta["generate_audio_codes"]:
        lm = gen("lm", _token_bytes([tokens["lm_prompt"], tokens["lm_prompt_negative"]]),
                 json.dumps({k: meta[k] for k in sorted(meta)}, sort_keys=True))
        out["audio_codes"] = [torch.randint(0, ACE_CODEBOOK, (int(meta["min_tokens"]),), generator=lm).tolist()]
    return base, None, out


ENCODERS = {
    "zimage": _zimage, "flux2_dev": _flux2("mistral3_24b", 5120), "flux2_klein_4b": _flux2("qwen3_4b", 2560),
    "qwen_image": _qwen_image, "flux1": _flux1, "sdxl": _sdxl, "sdxl_refiner": _sdxl_refiner, "sd3": _sd3,
    "ace15": _ace15,
}
# (file kinds, loader type) -> stand-in kind, as comfy.sd.load_clip picks the encoder class
LOADER_KINDS = {
    (("qwen3_4b",), "lumina2"): "zimage",
    (("qwen3_4b",), "flux2"): "flux2_klein_4b",
    (("mistral3_24b",), "flux2"): "flux2_dev",
    (("qwen25_vl",), "qwen_image"): "qwen_image",
    (("clip_l", "t5xxl"), "flux"): "flux1",
    (("qwen3_06b", "qwen3_2b"), "ace"): "ace15",
}
