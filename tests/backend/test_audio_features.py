import pytest
import torch

from reuse_backend.media import segments
from reuse_backend.media.audio_features import slice_features
from reuse_backend.errors import InvalidRequestError


def features(seconds=2.0, rate=50):
    T = int(seconds * rate)
    enc = torch.arange(T, dtype=torch.float32).view(1, T, 1).expand(1, T, 4).contiguous()
    return {"encoded_audio": enc, "encoded_audio_all_layers": tuple(enc + k for k in range(3)),
            "audio_samples": int(seconds * 16000)}


def test_windows_follow_segment_starts():
    f = features()
    F, M, fps = 25, 5, 25.0
    for i in range(3):
        w = slice_features(f, i, F, M, fps)
        start = segments.segment_start(i, F, M)   # frames; 50 feature frames per second
        a = round(start * 50 / fps)
        assert w["encoded_audio"].shape == (1, round(F * 50 / fps), 4)   # same length every segment
        assert w["encoded_audio"][0, 0, 0].item() == a
        assert w["encoded_audio_all_layers"][2][0, 0, 0].item() == a + 2
        assert isinstance(w["encoded_audio_all_layers"], tuple)
        assert w["audio_samples"] == F / fps * 16000


def test_past_the_end_is_zero_padded_and_bad_input_refused():
    w = slice_features(features(seconds=1.0), 3, 25, 5, 25.0)
    assert w["encoded_audio"].shape[1] == 50 and float(w["encoded_audio"][0, -1].abs().sum()) == 0
    with pytest.raises(InvalidRequestError):
        slice_features({"waveform": torch.zeros(1)}, 0, 25, 5, 25.0)


def test_window_length_is_fixed_even_when_rounding_differs():
    f = features(seconds=3.0)
    lengths = {slice_features(f, i, 9, 5, 16.0)["encoded_audio"].shape[1] for i in range(6)}
    assert lengths == {round(9 * 50 / 16.0)}
