"""Per-segment windows of audio-encoder output (wav2vec2-style features), host-free.

An audio-encoder output is a dict with ``encoded_audio`` [B, T, C], optionally
``encoded_audio_all_layers`` (a list/tuple of [B, T, C]) and ``audio_samples`` (the number of
16 kHz samples it was computed from). Slicing the features of the whole track per segment
lets one cached encoding serve every segment of a long video, so a resume never runs the
audio encoder again.
"""
from __future__ import annotations

import torch

from . import segments
from ..errors import InvalidRequestError

ENCODER_SAMPLE_RATE = 16000
FEATURE_RATE = 50.0   # wav2vec2: one feature frame per 320 samples at 16 kHz


def _window(t: torch.Tensor, a: int, b: int) -> torch.Tensor:
    out = t[:, a:b]
    if out.shape[1] < b - a:   # past the end of the track: silence-equivalent zeros
        pad = torch.zeros((t.shape[0], b - a - out.shape[1], *t.shape[2:]), dtype=t.dtype, device=t.device)
        out = torch.cat([out, pad], dim=1)
    return out


def slice_features(features: dict, i: int, F: int, M: int, fps: float,
                   sample_rate: int = ENCODER_SAMPLE_RATE, feature_rate: float = FEATURE_RATE) -> dict:
    """Segment i's window: ``round(F * rate / fps)`` feature frames from ``round(start(i) * rate / fps)``.

    The rate is the encoder's nominal one (50 Hz for wav2vec2), the rate the consuming
    nodes assume; measuring it from ``T / duration`` reads slightly low (the encoder's
    receptive field trims the ends) and would make some windows one frame short. Every
    window has the same length.
    """
    if not isinstance(features, dict) or "encoded_audio" not in features:
        raise InvalidRequestError("audio_features is not an audio-encoder output",
                                  expected="{'encoded_audio': [B, T, C], ...}", actual=type(features).__name__,
                                  fix="connect the output of an audio encoder (e.g. AudioEncoderEncode)")
    enc = features["encoded_audio"]
    rate = feature_rate
    a, _ = segments.feature_window(i, F, M, fps, rate)
    b = a + segments.feature_window(0, F, 0, fps, rate)[1]      # fixed length: F frames' worth
    out = dict(features)
    out["encoded_audio"] = _window(enc, a, b)
    layers = features.get("encoded_audio_all_layers")
    if layers is not None:
        out["encoded_audio_all_layers"] = type(layers)(_window(t, a, b) for t in layers)
    out["audio_samples"] = round((b - a) * sample_rate / rate)
    return out
