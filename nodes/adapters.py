"""Serializer adapters for host classes that appear inside encoder outputs.

The backend never imports ComfyUI, and never builds a class named by a file: only the
classes registered here can be restored from a cache. The real CLIPVisionEncode output (a
``comfy.clip_vision.Output`` with last_hidden_state, image_embeds, penultimate_hidden_states and
mm_projected = None for ViT-H) is such an attribute bag; the real AudioEncoderEncode output is a
plain dict (its all-layers entry a tuple) that the serializer stores without an adapter. Both
restore bit-exact on another worker (tests/test_real_encoders.py). The audio-video latents of
LTX-2 (LTXVConcatAVLatent) and MiniMax H3 hold a ``comfy.nested_tensor.NestedTensor`` (video and
audio tensors) as ``samples``: stored as its list of tensors (tests/families/test_ltx2.py,
test_minimax_h3.py).
"""
from __future__ import annotations

from ..reuse_backend.storage import adapters as registry
from . import host


def _attribute_bag(cls, name: str) -> None:
    """Store every instance attribute (values are checked by the serializer itself)."""
    def to_fields(obj):
        return dict(vars(obj))

    def from_fields(fields):
        obj = cls.__new__(cls)
        for k, v in fields.items():
            # only public attribute names: a crafted file must not reach __dict__ and friends
            if not isinstance(k, str) or not k.isidentifier() or k.startswith("_"):
                raise ValueError(f"invalid attribute name {k!r}")
            setattr(obj, k, v)
        return obj

    registry.register_adapter(cls, name, to_fields, from_fields)


def _nested_tensor(cls, name: str) -> None:
    """Only the tensor list: the class sets ``is_nested`` itself."""
    def to_fields(obj):
        return {"tensors": list(obj.tensors)}

    def from_fields(fields):
        tensors = fields.get("tensors")
        if set(fields) != {"tensors"} or type(tensors) is not list:
            raise ValueError(f"a nested tensor holds only a list of tensors, not fields {sorted(map(str, fields))}")
        return cls(tensors)

    registry.register_adapter(cls, name, to_fields, from_fields)


def register_all() -> list[str]:
    names = []
    output_cls = host.clip_vision_output_class()
    if output_cls is not None:   # a host without CLIP vision support has nothing to register
        _attribute_bag(output_cls, "comfy.clip_vision.Output")
        names.append("comfy.clip_vision.Output")
    nested_cls = host.nested_tensor_class()
    if nested_cls is not None:
        _nested_tensor(nested_cls, "comfy.nested_tensor.NestedTensor")
        names.append("comfy.nested_tensor.NestedTensor")
    return names
