"""The full-size generator's parts at small size (the 11 GB umT5-XXL file itself is made and
loaded by ``scripts/bench.sh --only full-size``): the streamed safetensors writer and the
tokenizer CLIPLoader (type wan) reads from the file."""
from __future__ import annotations

import math

import pytest
import torch
from safetensors import safe_open

from seedreuse_lab import _gen_fullsize_models as gen

SHAPES = {"encoder.block.0.layer.0.SelfAttention.q.weight": (40, 70), "encoder.final_layer_norm.weight": (70,),
          "shared.weight": (90, 70), "decoder.conv.weight": (6, 4, 3, 3)}


def _write(path, chunk):
    return gen.stream_safetensors(str(path), SHAPES, 7, {"spiece_model": b"tokenizer bytes"}, {"what": "test"},
                                  chunk=chunk)


def test_the_streamed_file_is_a_safetensors_file_of_the_given_shapes(tmp_path):
    size = _write(tmp_path / "a.safetensors", chunk=333)      # chunks split every tensor but one
    assert size == (tmp_path / "a.safetensors").stat().st_size
    with safe_open(str(tmp_path / "a.safetensors"), "pt") as f:
        assert set(f.keys()) == {*SHAPES, "spiece_model"}
        assert f.metadata() == {"what": "test"}
        t = {k: f.get_tensor(k) for k in f.keys()}
    assert bytes(t.pop("spiece_model").numpy()) == b"tokenizer bytes"
    for k, shape in SHAPES.items():
        assert tuple(t[k].shape) == shape and t[k].dtype == torch.float16 and bool(torch.isfinite(t[k]).all())
    norm = t["encoder.final_layer_norm.weight"].float()
    assert abs(norm.mean().item() - 1.0) < 0.01 and norm.std().item() < 0.05
    q = t["encoder.block.0.layer.0.SelfAttention.q.weight"].float()
    assert q.std().item() == pytest.approx(1 / math.sqrt(70), rel=0.1)
    assert t["shared.weight"].float().std().item() == pytest.approx(0.02, rel=0.1)
    conv = t["decoder.conv.weight"].float()
    assert conv.std().item() == pytest.approx(1 / math.sqrt(4 * 3 * 3), rel=0.25)


def test_the_streamed_file_is_the_same_bytes_every_time(tmp_path):
    _write(tmp_path / "a.safetensors", chunk=333)
    _write(tmp_path / "b.safetensors", chunk=333)
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    assert not list(tmp_path.glob("*.part-*"))


def test_the_tokenizer_has_umt5_special_ids_and_is_deterministic():
    import sentencepiece as spm

    blob = gen.train_tokenizer()
    assert gen.train_tokenizer() == blob
    sp = spm.SentencePieceProcessor(model_proto=blob)
    assert (sp.pad_id(), sp.eos_id(), sp.unk_id(), sp.bos_id()) == (0, 1, 2, -1)
    assert sp.get_piece_size() == gen.SPM_VOCAB
    ids = sp.encode("a red fox running through fresh snow")
    assert ids and max(ids) < gen.SPM_VOCAB
