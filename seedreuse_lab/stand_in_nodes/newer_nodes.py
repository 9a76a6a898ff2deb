"""Stand-ins for core nodes newer than ComfyUI 0.3.75 that the official templates use
(comfyui-workflow-templates-json): same class names, inputs, outputs and widget order as the
templates save them, so their workflows load, convert and run on the test host.

* ComfySwitchNode: ``on_false`` / ``on_true`` (lazy, any type), ``switch`` -> ``output``; only
  the chosen branch is evaluated (a LoRA branch that is switched off never loads).
* ComfyMathExpression: ``expression`` over ``values.a`` / ``values.b`` / ``values.c`` (the
  newer host's autogrow inputs, dotted in API prompts) -> FLOAT, INT; arithmetic only.
* BatchImagesNode: ``images.image0`` .. ``images.image2`` -> one IMAGE batch (resized to the first).
* Painter: optional ``image`` and its canvas widgets -> the image (or a blank canvas) and an
  empty MASK (nothing is painted on a test host).
Not WanInfiniteTalkToVideo: family_standins.SeedReuseTestInfiniteTalkToVideo stands in for it.
"""
from __future__ import annotations

import ast
import math
import operator

import torch

import comfy.utils
from comfy_api.latest import io

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_FUNCS = {"floor": math.floor, "ceil": math.ceil, "round": round, "min": min, "max": max, "abs": abs,
          "int": int, "float": float, "sqrt": math.sqrt}


def evaluate(expression: str, names: dict) -> float:
    """An arithmetic expression over ``names`` (numbers, + - * / // % **, a few functions)."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return _BIN[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS \
                and not node.keywords:
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ValueError(f"unsupported expression part: {ast.dump(node)[:80]}")
    if len(expression) > 1000:
        raise ValueError("expression too long")
    return ev(ast.parse(expression, mode="eval"))


class ComfySwitchNode(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="ComfySwitchNode", display_name="Switch (stand-in)", category="SeedReuse/test/newer core",
            inputs=[io.AnyType.Input("on_false", lazy=True, optional=True),
                    io.AnyType.Input("on_true", lazy=True, optional=True),
                    io.Boolean.Input("switch", default=False)],
            outputs=[io.AnyType.Output("output")])

    @classmethod
    def check_lazy_status(cls, switch, on_false=None, on_true=None):
        want = "on_true" if switch else "on_false"
        return [want] if (on_true if switch else on_false) is None else []

    @classmethod
    def execute(cls, switch, on_false=None, on_true=None):
        return io.NodeOutput(on_true if switch else on_false)


class ComfyMathExpression(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="ComfyMathExpression", display_name="Math Expression (stand-in)",
            category="SeedReuse/test/newer core",
            inputs=[io.String.Input("expression", default="a"),
                    *[io.AnyType.Input(f"values.{k}", optional=True) for k in "abc"]],
            outputs=[io.Float.Output("FLOAT"), io.Int.Output("INT")])

    @classmethod
    def execute(cls, expression, **values):
        names = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("values.") and v is not None}
        v = evaluate(expression, names)
        return io.NodeOutput(float(v), int(math.floor(v)))


class BatchImagesNode(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BatchImagesNode", display_name="Batch Images (stand-in)", category="SeedReuse/test/newer core",
            inputs=[io.Image.Input("images.image0"), io.Image.Input("images.image1", optional=True),
                    io.Image.Input("images.image2", optional=True)],
            outputs=[io.Image.Output("IMAGE")])

    @classmethod
    def execute(cls, **images):
        imgs = [images[k] for k in sorted(images) if images[k] is not None]
        first = imgs[0]
        out = [first] + [i if i.shape[1:3] == first.shape[1:3] else
                         comfy.utils.common_upscale(i.movedim(-1, 1), first.shape[2], first.shape[1],
                                                    "bilinear", "center").movedim(1, -1) for i in imgs[1:]]
        return io.NodeOutput(torch.cat(out, dim=0))


class Painter(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="Painter", display_name="Painter (stand-in)", category="SeedReuse/test/newer core",
            inputs=[io.Image.Input("image", optional=True), io.String.Input("mask", default=""),
                    io.Int.Input("width", default=512, min=16, max=8192),
                    io.Int.Input("height", default=512, min=16, max=8192),
                    io.String.Input("bg_color", default="#000000"), io.String.Input("brush_color", default="#000000")],
            outputs=[io.Image.Output("IMAGE"), io.Mask.Output("MASK")])

    @classmethod
    def execute(cls, mask, width, height, bg_color, brush_color, image=None):
        if image is None:
            image = torch.zeros((1, height, width, 3))
        return io.NodeOutput(image, torch.zeros(image.shape[:3]))


NEWER_NODES = [ComfySwitchNode, ComfyMathExpression, BatchImagesNode, Painter]
