"""API-format prompt builders for the tiny Wan 2.1 graphs, and small graph-editing helpers.

Node ids are fixed strings (numeric, as the UI would export them) listed in T2V / I2V below, so a
test can rewire e.g. the conditioning between the text encoder and the sampler:

    p = wan_t2v_graph(seed=1, prompt_text="a cat")
    nid = insert_between(p, T2V.POS, 0, T2V.SAMPLER, "positive",
                         "SeedReuseEncodeOrReuse", {"cache_name": "c1"}, input_name="conditioning")

All graphs use the tiny models from tiny_models.py, 2 sampling steps, 64x64, 9 frames
(-> latent [1,16,3,8,8]). The text encoder is always the counting stand-in of
seedreuse_lab/stand_in_nodes (umT5-XXL at full size: bench_fullsize.py only). CLIP vision and the audio encoder are
chosen by ``encoders``: "stock" = ComfyUI's own CLIPVisionLoader / CLIPVisionEncode and
AudioEncoderLoader / AudioEncoderEncode with the full-size random-weight ViT-H and wav2vec2 base
of encoder_models.py (the worker's models dir must hold them: encoder_models.models_dir_with_encoders;
count their executions from the ``executing`` events), "standin" (the default, for tests about
something other than the encoders) = the counting stand-ins, which cost nothing unless given work_ms.
"""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from types import SimpleNamespace

from . import encoder_models as em
from . import tiny_models as tm

Link = list  # [node_id, output_index]


def link(node_id: str, index: int = 0) -> list:
    return [str(node_id), index]


# ---------------------------------------------------------------- node ids
T2V = SimpleNamespace(
    UNET="1",          # UNETLoader(tiny t2v)                      -> MODEL
    VAE="2",           # VAELoader(tiny vae)                       -> VAE
    TEXT_LOADER="3",   # SeedReuseTestTextEncoderLoader            -> CLIP
    POS="4",           # SeedReuseTestTextEncode(positive)         -> CONDITIONING
    NEG="5",           # ConditioningZeroOut(POS) or SeedReuseTestTextEncode(negative) -> CONDITIONING
    LATENT="6",        # EmptyHunyuanLatentVideo                   -> LATENT
    SAMPLER="7",       # KSampler(model=UNET, positive=POS, negative=NEG, latent_image=LATENT)
    DECODE="8",        # VAEDecode(SAMPLER, VAE)                   -> IMAGE [T,H,W,3]
    VIDEO="9",         # CreateVideo(DECODE, fps)                  -> VIDEO
    SAVE="10",         # SaveVideo(VIDEO)                          (output node)
)

I2V = SimpleNamespace(
    UNET="1", VAE="2", TEXT_LOADER="3", POS="4", NEG="5",
    SAMPLER="7", DECODE="8", VIDEO="9", SAVE="10",
    CLIP_VISION_LOADER="11",   # CLIPVisionLoader or SeedReuseTestClipVisionLoader -> CLIP_VISION
    IMAGE="12",                # LoadImage(image_name)             -> IMAGE, MASK
    CLIP_VISION_ENCODE="13",   # CLIPVisionEncode or SeedReuseTestClipVisionEncode -> CLIP_VISION_OUTPUT
    WAN_I2V="14",              # WanImageToVideo(POS, NEG, VAE, clip_vision_output, start_image)
                               #   -> positive(0), negative(1), latent(2); SAMPLER reads all three
)

AUDIO = SimpleNamespace(
    SINE="21",                 # SeedReuseTestSineAudio or LoadAudio(audio_file) -> AUDIO
    LOADER="22",               # AudioEncoderLoader or SeedReuseTestAudioEncoderLoader -> AUDIO_ENCODER
    ENCODE="23",               # AudioEncoderEncode or SeedReuseTestAudioEncode  -> AUDIO_ENCODER_OUTPUT
)

ENCODERS = ("standin", "stock")


def _check_encoders(encoders: str) -> None:
    if encoders not in ENCODERS:
        raise ValueError(f"encoders must be one of {ENCODERS}, got {encoders!r}")


def _node(class_type: str, inputs: dict, title: str | None = None) -> dict:
    n = {"class_type": class_type, "inputs": inputs}
    if title:
        n["_meta"] = {"title": title}
    return n


def _common(prompt: dict, *, seed: int, prompt_text: str, negative_text: str | None, unet: str,
            steps: int, cfg: float, sampler_name: str, scheduler: str, text_work_ms: int,
            loader_work_ms: int, text_encoder: str, vae: str, fps: float, filename_prefix: str,
            ids=T2V) -> None:
    prompt[ids.UNET] = _node("UNETLoader", {"unet_name": unet, "weight_dtype": "default"})
    prompt[ids.VAE] = _node("VAELoader", {"vae_name": vae})
    prompt[ids.TEXT_LOADER] = _node("SeedReuseTestTextEncoderLoader",
                                    {"clip_name": text_encoder, "work_ms": loader_work_ms})
    prompt[ids.POS] = _node("SeedReuseTestTextEncode", {"clip": link(ids.TEXT_LOADER), "text": prompt_text,
                                                        "work_ms": text_work_ms}, "Positive")
    if negative_text is None:
        prompt[ids.NEG] = _node("ConditioningZeroOut", {"conditioning": link(ids.POS)}, "Negative")
    else:
        prompt[ids.NEG] = _node("SeedReuseTestTextEncode", {"clip": link(ids.TEXT_LOADER), "text": negative_text,
                                                            "work_ms": text_work_ms}, "Negative")
    prompt[ids.SAMPLER] = _node("KSampler", {
        "model": link(ids.UNET), "seed": int(seed), "steps": int(steps), "cfg": float(cfg),
        "sampler_name": sampler_name, "scheduler": scheduler,
        "positive": link(ids.POS), "negative": link(ids.NEG), "latent_image": None, "denoise": 1.0})
    prompt[ids.DECODE] = _node("VAEDecode", {"samples": link(ids.SAMPLER), "vae": link(ids.VAE)})
    prompt[ids.VIDEO] = _node("CreateVideo", {"images": link(ids.DECODE), "fps": float(fps)})
    prompt[ids.SAVE] = _node("SaveVideo", {"video": link(ids.VIDEO), "filename_prefix": filename_prefix,
                                           "format": "mp4", "codec": "h264"})


def clip_vision_nodes(prompt: dict, loader_id: str, encode_id: str, image: list, *, encoders: str = "standin",
                      clip_vision: str | None = None, crop: str = "center", work_ms: int = 0,
                      loader_work_ms: int = 0) -> list:
    """CLIP vision loader ``loader_id`` + encoder ``encode_id`` of ``image`` (a link). Returns the
    encoder output's link. work_ms / loader_work_ms only apply to the stand-ins."""
    _check_encoders(encoders)
    if encoders == "stock":
        prompt[loader_id] = _node("CLIPVisionLoader", {"clip_name": clip_vision or em.CLIP_VISION_H})
        prompt[encode_id] = _node("CLIPVisionEncode", {"clip_vision": link(loader_id), "image": image, "crop": crop})
    else:
        prompt[loader_id] = _node("SeedReuseTestClipVisionLoader",
                                  {"clip_name": clip_vision or tm.CLIP_VISION, "work_ms": loader_work_ms})
        prompt[encode_id] = _node("SeedReuseTestClipVisionEncode", {
            "clip_vision": link(loader_id), "image": image, "crop": crop, "work_ms": work_ms})
    return link(encode_id)


def audio_encoder_nodes(prompt: dict, loader_id: str, encode_id: str, audio: list, *, encoders: str = "standin",
                        audio_encoder: str | None = None, work_ms: int = 0, loader_work_ms: int = 0,
                        title: str | None = None) -> list:
    """Audio-encoder loader ``loader_id`` + encoder ``encode_id`` of ``audio`` (a link). Returns the
    encoder output's link."""
    _check_encoders(encoders)
    if encoders == "stock":
        prompt[loader_id] = _node("AudioEncoderLoader", {"audio_encoder_name": audio_encoder or em.WAV2VEC2_BASE})
        prompt[encode_id] = _node("AudioEncoderEncode", {"audio_encoder": link(loader_id), "audio": audio}, title)
    else:
        prompt[loader_id] = _node("SeedReuseTestAudioEncoderLoader",
                                  {"audio_encoder_name": audio_encoder or tm.AUDIO_ENCODER, "work_ms": loader_work_ms})
        prompt[encode_id] = _node("SeedReuseTestAudioEncode", {"audio_encoder": link(loader_id), "audio": audio,
                                                               "work_ms": work_ms}, title)
    return link(encode_id)


def audio_source(prompt: dict, node_id: str, *, seconds: float, sample_rate: int = 16000, frequency: float = 440.0,
                 audio_file: str | None = None, title: str | None = None) -> list:
    """The AUDIO of a graph: stock LoadAudio(audio_file) (a file in the worker's input dir, see
    write_test_wav) or, without a file, SeedReuseTestSineAudio. Returns its link."""
    if audio_file is not None:
        prompt[node_id] = _node("LoadAudio", {"audio": audio_file}, title)
    else:
        prompt[node_id] = _node("SeedReuseTestSineAudio", {"seconds": float(seconds), "sample_rate": int(sample_rate),
                                                           "frequency": float(frequency)}, title)
    return link(node_id)


def wan_t2v_graph(seed: int = 0, prompt_text: str = "a tiny test video", *, negative_text: str | None = None,
                  width: int = 64, height: int = 64, length: int = 9, steps: int = 2, cfg: float = 1.0,
                  sampler_name: str = "euler", scheduler: str = "simple", fps: float = 16.0,
                  text_work_ms: int = 0, loader_work_ms: int = 0,
                  unet: str = tm.T2V, vae: str = tm.VAE, text_encoder: str = tm.TEXT_ENCODER,
                  filename_prefix: str = "seedreuse_test/t2v") -> dict:
    """Stand-in text encoder -> KSampler(UNETLoader tiny t2v, EmptyHunyuanLatentVideo) -> VAEDecode
    -> CreateVideo -> SaveVideo. Ids: T2V. With negative_text=None the negative is
    ConditioningZeroOut(positive), so the text encoder runs once per prompt."""
    p: dict = {}
    _common(p, seed=seed, prompt_text=prompt_text, negative_text=negative_text, unet=unet, steps=steps,
            cfg=cfg, sampler_name=sampler_name, scheduler=scheduler, text_work_ms=text_work_ms,
            loader_work_ms=loader_work_ms, text_encoder=text_encoder, vae=vae, fps=fps,
            filename_prefix=filename_prefix, ids=T2V)
    p[T2V.LATENT] = _node("EmptyHunyuanLatentVideo", {"width": width, "height": height, "length": length,
                                                      "batch_size": 1})
    p[T2V.SAMPLER]["inputs"]["latent_image"] = link(T2V.LATENT)
    return p


def wan_i2v_graph(image_name: str, seed: int = 0, prompt_text: str = "a tiny test video", *,
                  negative_text: str | None = None, width: int = 64, height: int = 64, length: int = 9,
                  steps: int = 2, cfg: float = 1.0, sampler_name: str = "euler", scheduler: str = "simple",
                  fps: float = 16.0, text_work_ms: int = 0, loader_work_ms: int = 0,
                  clip_vision_work_ms: int = 0, crop: str = "center", encoders: str = "standin",
                  unet: str = tm.I2V, vae: str = tm.VAE, text_encoder: str = tm.TEXT_ENCODER,
                  clip_vision: str | None = None, filename_prefix: str = "seedreuse_test/i2v") -> dict:
    """LoadImage(image_name, must exist in the worker's input dir: see write_test_image) ->
    CLIP vision (``encoders``: stock ViT-H or stand-in) -> WanImageToVideo(clip_vision_output,
    start_image) -> KSampler (tiny i2v) -> VAEDecode -> CreateVideo -> SaveVideo. Ids: I2V."""
    p: dict = {}
    _common(p, seed=seed, prompt_text=prompt_text, negative_text=negative_text, unet=unet, steps=steps,
            cfg=cfg, sampler_name=sampler_name, scheduler=scheduler, text_work_ms=text_work_ms,
            loader_work_ms=loader_work_ms, text_encoder=text_encoder, vae=vae, fps=fps,
            filename_prefix=filename_prefix, ids=I2V)
    p[I2V.IMAGE] = _node("LoadImage", {"image": image_name})
    clip_vision_nodes(p, I2V.CLIP_VISION_LOADER, I2V.CLIP_VISION_ENCODE, link(I2V.IMAGE, 0), encoders=encoders,
                      clip_vision=clip_vision, crop=crop, work_ms=clip_vision_work_ms, loader_work_ms=loader_work_ms)
    p[I2V.WAN_I2V] = _node("WanImageToVideo", {
        "positive": link(I2V.POS), "negative": link(I2V.NEG), "vae": link(I2V.VAE),
        "width": width, "height": height, "length": length, "batch_size": 1,
        "clip_vision_output": link(I2V.CLIP_VISION_ENCODE), "start_image": link(I2V.IMAGE, 0)})
    s = p[I2V.SAMPLER]["inputs"]
    s["positive"], s["negative"], s["latent_image"] = link(I2V.WAN_I2V, 0), link(I2V.WAN_I2V, 1), link(I2V.WAN_I2V, 2)
    return p


def add_audio_encoder(prompt: dict, seconds: float = 1.0, *, sample_rate: int = 16000,
                      frequency: float = 440.0, work_ms: int = 0, loader_work_ms: int = 0,
                      audio_encoder: str | None = None, encoders: str = "standin",
                      audio_file: str | None = None) -> dict:
    """Add an audio source (SeedReuseTestSineAudio, or LoadAudio(audio_file)) -> audio encoder
    (``encoders``: stock wav2vec2 base or stand-in) with ids AUDIO. The AUDIO is link(AUDIO.SINE)
    (e.g. for CreateVideo's audio input), the encoder output is link(AUDIO.ENCODE). Returns the prompt."""
    audio = audio_source(prompt, AUDIO.SINE, seconds=seconds, sample_rate=sample_rate, frequency=frequency,
                         audio_file=audio_file)
    audio_encoder_nodes(prompt, AUDIO.LOADER, AUDIO.ENCODE, audio, encoders=encoders, audio_encoder=audio_encoder,
                        work_ms=work_ms, loader_work_ms=loader_work_ms)
    return prompt


# ---------------------------------------------------------------- editing helpers

def next_id(prompt: dict) -> str:
    nums = [int(k) for k in prompt if str(k).isdigit()]
    return str(max(nums, default=0) + 1)


def add_node(prompt: dict, class_type: str, inputs: dict, node_id: str | None = None,
             title: str | None = None) -> str:
    nid = str(node_id) if node_id is not None else next_id(prompt)
    if nid in prompt:
        raise KeyError(f"node id {nid} already used")
    prompt[nid] = _node(class_type, dict(inputs), title)
    return nid


def insert_between(prompt: dict, src_id: str, src_index: int, dst_id: str, dst_input: str,
                   class_type: str, inputs: dict, *, input_name: str, output_index: int = 0,
                   node_id: str | None = None) -> str:
    """Insert a node on the edge src[src_index] -> dst.dst_input: the new node gets
    inputs[input_name] = link(src, src_index), and dst.dst_input = link(new, output_index).
    Returns the new node id. Raises if the edge does not exist."""
    cur = prompt[str(dst_id)]["inputs"].get(dst_input)
    if cur != link(src_id, src_index):
        raise ValueError(f"{dst_id}.{dst_input} is {cur!r}, not a link from {src_id}[{src_index}]")
    ins = dict(inputs)
    ins[input_name] = link(src_id, src_index)
    nid = add_node(prompt, class_type, ins, node_id)
    prompt[str(dst_id)]["inputs"][dst_input] = link(nid, output_index)
    return nid


def add_inspect(prompt: dict, src_id: str, src_index: int = 0, label: str = "",
                node_id: str | None = None) -> str:
    """Add a SeedReuseTestInspect output node reading src[src_index]; after a run,
    RunResult.inspected(node_id) is describe(value): structure, shapes, dtypes, tensor sha256s."""
    return add_node(prompt, "SeedReuseTestInspect", {"value": link(src_id, src_index), "label": label}, node_id)


def rewire(prompt: dict, old_src: tuple[str, int], new_src: tuple[str, int]) -> int:
    """Point every input linked to old_src at new_src. Returns how many inputs changed."""
    n = 0
    for node in prompt.values():
        for k, v in node["inputs"].items():
            if v == link(*old_src):
                node["inputs"][k] = link(*new_src)
                n += 1
    return n


def clone(prompt: dict) -> dict:
    return copy.deepcopy(prompt)


# ---------------------------------------------------------------- inputs

def write_test_wav(dest: Path, seconds: float = 1.0, sample_rate: int = 16000, frequency: float = 440.0) -> Path:
    """A 16-bit mono PCM WAV of SeedReuseTestSineAudio's sine at dest (for LoadAudio)."""
    import math
    import struct
    import wave

    n = int(round(seconds * sample_rate))
    frames = b"".join(struct.pack("<h", int(round(16383 * math.sin(2 * math.pi * frequency * i / sample_rate))))
                      for i in range(n))
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(dest), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(frames)
    return dest


def write_test_image(dest: Path, width: int = 64, height: int = 64, seed: int = 0) -> Path:
    """A deterministic RGB PNG (smooth gradient + seeded noise) at dest (e.g. worker.input_dir/'x.png')."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(str(seed).encode()).digest()[:8], "little"))
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([xx / max(1, width - 1), yy / max(1, height - 1),
                     0.5 + 0.5 * np.sin((xx + yy) / 7.0 + seed)], axis=-1)
    img = np.clip(base * 200 + rng.normal(0, 12, size=base.shape), 0, 255).astype(np.uint8)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img, "RGB").save(dest, format="PNG")
    return dest
