"""Stand-ins for encoders that cannot be made tiny (umT5-XXL, CLIP vision ViT-H, wav2vec2 large).

Every output has the exact type and shape that ComfyUI 0.3.75's real node returns, with values
that are a deterministic function of (input content, model file sha256). Each loader and encoder
counts its executions in a process-global counter (read over HTTP: GET /seedreuse_test/counts)
and can burn ``work_ms`` of CPU in a busy loop so benchmarks can make them realistically slow.
"""
from __future__ import annotations

import hashlib
import math
import os
import struct
import threading
import time
from collections import Counter

import torch

import comfy.clip_vision
import comfy.model_management
import folder_paths
from comfy_api.latest import io

_COUNTS: Counter = Counter()
_COUNTS_LOCK = threading.Lock()

COUNTER_NAMES = ("text_loader", "text_encode", "clip_vision_loader", "clip_vision_encode",
                 "audio_loader", "audio_encode", "sine_audio", "fail", "slow", "inspect", "sink",
                 "wildcard", "llm_loader", "llm_generate", "volatile")


def count(name: str) -> None:
    with _COUNTS_LOCK:
        _COUNTS[name] += 1


def counts_snapshot() -> dict:
    with _COUNTS_LOCK:
        out = {k: 0 for k in COUNTER_NAMES}
        out.update(_COUNTS)
        return out


def reset_counts() -> None:
    with _COUNTS_LOCK:
        _COUNTS.clear()


def burn_cpu(work_ms: int) -> None:
    """Busy-loop for work_ms milliseconds of wall time (stays interruptible)."""
    if work_ms <= 0:
        return
    end = time.perf_counter() + work_ms / 1000.0
    x = 0
    nxt = time.perf_counter() + 0.05
    while True:
        for i in range(2000):
            x = (x * 1103515245 + i) & 0xFFFFFFFF
        now = time.perf_counter()
        if now >= end:
            return
        if now >= nxt:
            comfy.model_management.throw_exception_if_processing_interrupted()
            nxt = now + 0.05


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _generator(*parts: bytes | str) -> torch.Generator:
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    return torch.Generator(device="cpu").manual_seed(int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1))


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().to("cpu", torch.float32).contiguous()
    return repr(tuple(t.shape)).encode() + t.numpy().tobytes()


class StandInModel:
    """What a stand-in loader returns: the file it stands for, identified by content."""

    def __init__(self, kind: str, name: str, path: str):
        self.kind = kind
        self.name = name
        self.path = path
        self.sha256 = _file_sha256(path)

    def __repr__(self):
        return f"StandInModel({self.kind!r}, {self.name!r}, sha256={self.sha256[:12]})"


# --------------------------------------------------------------------------- text (umT5-XXL)

TEXT_LEN = 512      # WanT5Tokenizer min_length: the real cond is always padded to >= 512 tokens
TEXT_DIM = 4096     # umT5-XXL d_model


def stand_in_loader(node_id: str, display_name: str, folder: str, input_name: str, kind: str,
                    counter: str, output, *, work_input: bool = True) -> type:
    """A stand-in model loader: a file combo from ``folder`` (+ ``work_ms``), counted as ``counter``,
    returning a StandInModel whose file hash seeds the matching stand-in encoder."""
    def define_schema(cls):   # the file list is read each time, like the stock loaders
        inputs = [io.Combo.Input(input_name, options=folder_paths.get_filename_list(folder))]
        if work_input:
            inputs.append(io.Int.Input("work_ms", default=0, min=0, max=600000))
        return io.Schema(node_id=node_id, display_name=display_name, category="SeedReuse/test",
                         inputs=inputs, outputs=[output.Output()])

    def execute(cls, work_ms=0, **kw):
        count(counter)
        burn_cpu(work_ms)
        name = kw[input_name]
        return io.NodeOutput(StandInModel(kind, name, folder_paths.get_full_path_or_raise(folder, name)))

    return type(node_id, (io.ComfyNode,), {"define_schema": classmethod(define_schema),
                                           "execute": classmethod(execute)})


def _approx_token_count(text: str) -> int:
    """Positions the real encoder leaves non-zero (tokens + end token; zero_out_masked=True)."""
    return min(TEXT_LEN, len(text.split()) + 1)


SeedReuseTestTextEncoderLoader = stand_in_loader(
    "SeedReuseTestTextEncoderLoader", "SeedReuse Test: Text Encoder Loader (stand-in umT5)",
    "text_encoders", "clip_name", "umt5", "text_loader", io.Clip)


class SeedReuseTestTextEncode(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestTextEncode",
            display_name="SeedReuse Test: Text Encode (stand-in CLIPTextEncode, Wan)",
            category="SeedReuse/test",
            inputs=[
                io.Clip.Input("clip"),
                io.String.Input("text", multiline=True, dynamic_prompts=True),
                io.Int.Input("work_ms", default=0, min=0, max=600000),
            ],
            outputs=[io.Conditioning.Output()],
        )

    @classmethod
    def execute(cls, clip, text, work_ms=0):
        count("text_encode")
        if not isinstance(clip, StandInModel) or clip.kind != "umt5":
            raise RuntimeError("SeedReuseTestTextEncode needs the CLIP from SeedReuseTestTextEncoderLoader")
        burn_cpu(work_ms)
        g = _generator("text", clip.sha256, text)
        cond = torch.randn((1, TEXT_LEN, TEXT_DIM), generator=g, dtype=torch.float32)
        cond[:, _approx_token_count(text):] = 0.0
        # CLIPTextEncode -> clip.encode_from_tokens_scheduled -> [[cond, {"pooled_output": None}]]
        return io.NodeOutput([[cond, {"pooled_output": None}]])


# --------------------------------------------------------------------------- CLIP vision (ViT-H/14)

CV_TOKENS = 257       # 16x16 patches + class token at 224 px
CV_HIDDEN = 1280      # ViT-H width
CV_PROJ = 1024        # ViT-H projection_dim


SeedReuseTestClipVisionLoader = stand_in_loader(
    "SeedReuseTestClipVisionLoader", "SeedReuse Test: CLIP Vision Loader (stand-in ViT-H)",
    "clip_vision", "clip_name", "clip_vision_h", "clip_vision_loader", io.ClipVision)


class SeedReuseTestClipVisionEncode(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestClipVisionEncode",
            display_name="SeedReuse Test: CLIP Vision Encode (stand-in)",
            category="SeedReuse/test",
            inputs=[
                io.ClipVision.Input("clip_vision"),
                io.Image.Input("image"),
                io.Combo.Input("crop", options=["center", "none"]),
                io.Int.Input("work_ms", default=0, min=0, max=600000),
            ],
            outputs=[io.ClipVisionOutput.Output()],
        )

    @classmethod
    def execute(cls, clip_vision, image, crop="center", work_ms=0):
        count("clip_vision_encode")
        if not isinstance(clip_vision, StandInModel) or clip_vision.kind != "clip_vision_h":
            raise RuntimeError("SeedReuseTestClipVisionEncode needs SeedReuseTestClipVisionLoader's output")
        burn_cpu(work_ms)
        b = image.shape[0]
        g = _generator("clip_vision", clip_vision.sha256, crop, _tensor_bytes(image))
        # Same fields as comfy.clip_vision.ClipVisionModel.encode_image for CLIP ViT-H (not siglip)
        out = comfy.clip_vision.Output()
        out["last_hidden_state"] = torch.randn((b, CV_TOKENS, CV_HIDDEN), generator=g)
        out["image_embeds"] = torch.randn((b, CV_PROJ), generator=g)
        out["penultimate_hidden_states"] = torch.randn((b, CV_TOKENS, CV_HIDDEN), generator=g)
        out["mm_projected"] = None
        return io.NodeOutput(out)


# --------------------------------------------------------------------------- audio (wav2vec2 large)

W2V_RATE = 16000
W2V_DIM = 1024
W2V_LAYERS = 24       # all-layers output has W2V_LAYERS + 1 entries
_W2V_CONVS = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2


def resampled_length(n: int, orig: int, new: int = W2V_RATE) -> int:
    """torchaudio.functional.resample's output length."""
    if orig == new:
        return n
    gcd = math.gcd(int(orig), int(new))
    o, w = int(orig) // gcd, int(new) // gcd
    return int(math.ceil(w * n / o))


def wav2vec2_frames(n16k: int) -> int:
    """Frames of wav2vec2's conv feature encoder for n16k samples at 16 kHz (~50 Hz)."""
    n = n16k
    for k, s in _W2V_CONVS:
        n = (n - k) // s + 1
        if n <= 0:
            raise RuntimeError(f"audio too short for wav2vec2 ({n16k} samples at 16 kHz; need >= 400)")
    return n


SeedReuseTestAudioEncoderLoader = stand_in_loader(
    "SeedReuseTestAudioEncoderLoader", "SeedReuse Test: Audio Encoder Loader (stand-in wav2vec2)",
    "audio_encoders", "audio_encoder_name", "wav2vec2", "audio_loader", io.AudioEncoder)


class SeedReuseTestAudioEncode(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestAudioEncode",
            display_name="SeedReuse Test: Audio Encoder Encode (stand-in)",
            category="SeedReuse/test",
            inputs=[
                io.AudioEncoder.Input("audio_encoder"),
                io.Audio.Input("audio"),
                io.Int.Input("work_ms", default=0, min=0, max=600000),
            ],
            outputs=[io.AudioEncoderOutput.Output()],
        )

    @classmethod
    def execute(cls, audio_encoder, audio, work_ms=0):
        count("audio_encode")
        if not isinstance(audio_encoder, StandInModel) or audio_encoder.kind != "wav2vec2":
            raise RuntimeError("SeedReuseTestAudioEncode needs SeedReuseTestAudioEncoderLoader's output")
        burn_cpu(work_ms)
        wave = audio["waveform"]
        sr = int(audio["sample_rate"])
        b = wave.shape[0]
        n16 = resampled_length(wave.shape[-1], sr)
        frames = wav2vec2_frames(n16)
        g = _generator("wav2vec2", audio_encoder.sha256, str(sr), _tensor_bytes(wave))
        # AudioEncoderModel.encode_audio: {"encoded_audio": x, "encoded_audio_all_layers": all_x,
        # "audio_samples": samples at 16 kHz}; all_x is a tuple of num_layers + 1 tensors and
        # x is all_x[-1] (wav2vec2 with do_stable_layer_norm).
        layers = tuple(torch.randn((b, frames, W2V_DIM), generator=g) for _ in range(W2V_LAYERS + 1))
        return io.NodeOutput({
            "encoded_audio": layers[-1],
            "encoded_audio_all_layers": layers,
            "audio_samples": n16,
        })


class SeedReuseTestSineAudio(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestSineAudio",
            display_name="SeedReuse Test: Sine Audio",
            category="SeedReuse/test",
            inputs=[
                io.Float.Input("seconds", default=1.0, min=0.01, max=3600.0, step=0.01),
                io.Int.Input("sample_rate", default=16000, min=1000, max=192000),
                io.Float.Input("frequency", default=440.0, min=0.0, max=20000.0, step=0.1),
            ],
            outputs=[io.Audio.Output()],
        )

    @classmethod
    def execute(cls, seconds, sample_rate, frequency):
        count("sine_audio")
        n = int(round(seconds * sample_rate))
        t = torch.arange(n, dtype=torch.float64) / sample_rate
        wave = (0.5 * torch.sin(2 * math.pi * frequency * t)).to(torch.float32).reshape(1, 1, n)
        return io.NodeOutput({"waveform": wave, "sample_rate": int(sample_rate)})


# --------------------------------------------------------------------------- failure / slowness

class SeedReuseTestFail(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestFail",
            display_name="SeedReuse Test: Fail",
            category="SeedReuse/test",
            inputs=[
                io.AnyType.Input("value"),
                io.Boolean.Input("fail", default=True),
                io.String.Input("message", default="SeedReuseTestFail: failing on purpose"),
            ],
            outputs=[io.AnyType.Output()],
        )

    @classmethod
    def execute(cls, value, fail=True, message="SeedReuseTestFail: failing on purpose"):
        count("fail")
        if fail:
            raise RuntimeError(message)
        return io.NodeOutput(value)


class SeedReuseTestSlow(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestSlow",
            display_name="SeedReuse Test: Slow (interruptible)",
            category="SeedReuse/test",
            inputs=[
                io.AnyType.Input("value"),
                io.Float.Input("seconds", default=1.0, min=0.0, max=3600.0, step=0.01),
            ],
            outputs=[io.AnyType.Output()],
        )

    @classmethod
    def execute(cls, value, seconds=1.0):
        count("slow")
        end = time.monotonic() + seconds
        while True:
            comfy.model_management.throw_exception_if_processing_interrupted()
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(0.02, left))
        return io.NodeOutput(value)


def describe(v, depth: int = 0):
    """JSON description of a value: structure, shapes, dtypes and a sha256 of every tensor."""
    if depth > 8:
        return {"type": "...", "repr": "too deep"}
    if isinstance(v, torch.Tensor):
        t = v.detach().to("cpu")
        d = {"type": "tensor", "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
             "sha256": hashlib.sha256(_tensor_bytes(t) + str(t.dtype).encode()).hexdigest()}
        if t.numel() and t.is_floating_point():
            tf = t.float()
            d.update(mean=float(tf.mean()), std=float(tf.std()) if t.numel() > 1 else 0.0,
                     min=float(tf.min()), max=float(tf.max()))
        return d
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"type": type(v).__name__, "value": v}
    if isinstance(v, dict):
        return {"type": "dict", "items": {str(k): describe(x, depth + 1) for k, x in v.items()}}
    if isinstance(v, (list, tuple)):
        return {"type": type(v).__name__, "items": [describe(x, depth + 1) for x in v]}
    if isinstance(v, comfy.clip_vision.Output):
        return {"type": "comfy.clip_vision.Output",
                "items": {k: describe(x, depth + 1) for k, x in vars(v).items()}}
    return {"type": f"{type(v).__module__}.{type(v).__qualname__}", "repr": repr(v)[:300]}


class SeedReuseTestInspect(io.ComfyNode):
    """Output node: records describe(value) in the prompt's history outputs under "inspect"."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestInspect",
            display_name="SeedReuse Test: Inspect",
            category="SeedReuse/test",
            inputs=[
                io.AnyType.Input("value"),
                io.String.Input("label", default=""),
            ],
            outputs=[],
            is_output_node=True,
        )

    @classmethod
    def execute(cls, value, label=""):
        count("inspect")
        return io.NodeOutput(ui={"inspect": [{"label": label, "value": describe(value)}]})


class SeedReuseTestSink(io.ComfyNode):
    """Output node that only takes a value (so ComfyUI evaluates it) and does nothing with it: a
    consumer that costs nothing, for benchmarks (SeedReuseTestInspect hashes every tensor)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestSink",
            display_name="SeedReuse Test: Sink",
            category="SeedReuse/test",
            inputs=[io.AnyType.Input("value")],
            outputs=[],
            is_output_node=True,
        )

    @classmethod
    def execute(cls, value):
        count("sink")
        return io.NodeOutput()


NODES = [
    SeedReuseTestInspect,
    SeedReuseTestSink,
    SeedReuseTestTextEncoderLoader,
    SeedReuseTestTextEncode,
    SeedReuseTestClipVisionLoader,
    SeedReuseTestClipVisionEncode,
    SeedReuseTestAudioEncoderLoader,
    SeedReuseTestAudioEncode,
    SeedReuseTestSineAudio,
    SeedReuseTestFail,
    SeedReuseTestSlow,
]


def register_routes() -> None:
    from aiohttp import web
    from server import PromptServer

    routes = PromptServer.instance.routes

    @routes.get("/seedreuse_test/counts")
    async def _get_counts(request):
        return web.json_response(counts_snapshot())

    @routes.post("/seedreuse_test/counts/reset")
    async def _reset_counts(request):
        reset_counts()
        return web.json_response(counts_snapshot())

    from . import key_probe
    key_probe.register(routes)

    @routes.get("/seedreuse_test/info")
    async def _info(request):
        return web.json_response({"pid": os.getpid()})

    @routes.get("/seedreuse_test/gpu")
    async def _gpu(request):       # the worker's peak CUDA memory (the GPU benchmark script)
        if not torch.cuda.is_available():
            return web.json_response({"available": False})
        return web.json_response({"available": True, "device": torch.cuda.get_device_name(0),
                                  "max_allocated": torch.cuda.max_memory_allocated(),
                                  "max_reserved": torch.cuda.max_memory_reserved()})
