"""Nodes that make a prompt text before the text encoder, as users' workflows have them:

- ``SeedReuseTestWildcard``: an ordinary wildcard-style custom node (Impact Pack's wildcard
  processor, Dynamic Prompts and many prompt packs work this way): it picks one option of
  ``{a|b|c}`` (or one line) by its own ``seed`` input, a seed widget like a sampler's.
- ``SeedReuseTestLanguageModelLoader``: a stand-in for the language model a prompt enhancer runs
  (Gemma 3, Qwen3: they cannot be made small with the host's loaders): a CLIP object with the
  ``tokenize`` / ``generate`` / ``decode`` methods the STOCK ``TextGenerate`` node calls (0.33), whose
  text is a deterministic function of the prompt and, when sampling is on, of the seed; greedy
  (sampling off) it ignores the seed, as a real model does.

- ``SeedReuseTestPromptReader``: a node whose text depends on the hidden values the host passes
  it (its node id, the whole prompt, the workflow metadata), as metadata and prompt-logging
  nodes do.

- ``SeedReuseTestVolatileText``: a text whose change token is NaN (changed on every run).

They count their runs (``wildcard``, ``llm_loader``, ``llm_generate``, ``volatile``) in the
stand-in counters.
"""
from __future__ import annotations

import random
import re

import folder_paths
from comfy_api.latest import io

from .standins import StandInModel, burn_cpu, count

WORDS = ("misty", "golden", "neon", "quiet", "stormy", "velvet", "crystal", "ancient", "electric", "frozen")


def pick(text: str, seed: int) -> str:
    """Every ``{a|b|c}`` replaced by the option ``seed`` picks (each group its own draw); a text
    without groups: one of its non-empty lines."""
    rng = random.Random(int(seed))
    if "{" in text:
        return re.sub(r"\{([^{}]*)\}", lambda m: rng.choice(m.group(1).split("|")), text)
    lines = [ln for ln in text.splitlines() if ln.strip()] or [""]
    return rng.choice(lines)


class SeedReuseTestWildcard(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestWildcard", display_name="SeedReuse Test: Wildcard (a prompt picked by a seed)",
            category="SeedReuse/test", description="Picks one option of each {a|b} group (or one line) by its seed.",
            inputs=[io.String.Input("wildcard_text", multiline=True, default="{green frog|blue whale|red fox}",
                                    tooltip="Options in {a|b|c}, or one option per line."),
                    io.Int.Input("seed", default=0, min=0, max=0xFFFFFFFFFFFFFFFF, control_after_generate=True,
                                 tooltip="Picks the option.")],
            outputs=[io.String.Output(display_name="text", tooltip="The picked prompt.")])

    @classmethod
    def execute(cls, wildcard_text, seed):
        count("wildcard")
        return io.NodeOutput(pick(wildcard_text, seed))


class StandInLanguageModel(StandInModel):
    """What the stock TextGenerate calls on its CLIP: tokenize, generate, decode."""

    def tokenize(self, text, image=None, skip_template=False, min_length=1, thinking=False, video=None,
                 audio=None, **kw):
        return {"text": str(text), "template": not skip_template, "thinking": bool(thinking),
                "has_image": image is not None}

    def generate(self, tokens, do_sample=True, max_length=512, temperature=1.0, top_k=50, top_p=1.0, min_p=0.0,
                 repetition_penalty=1.0, presence_penalty=0.0, seed=None):
        count("llm_generate")
        burn_cpu(int(getattr(self, "work_ms", 0)))
        base = f"{tokens['text']}"
        if do_sample:
            rng = random.Random(f"{self.sha256}|{base}|{seed}|{temperature}|{top_k}|{top_p}|{min_p}")
            extra = " ".join(rng.choice(WORDS) for _ in range(3))
        else:
            extra = "in soft light"
        return list(f"{base}, {extra}"[:max_length].encode("utf-8"))

    def decode(self, ids, **kw):
        return bytes(ids).decode("utf-8", "replace")


class SeedReuseTestLanguageModelLoader(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestLanguageModelLoader",
            display_name="SeedReuse Test: Language Model Loader (stand-in for a prompt enhancer's LLM)",
            category="SeedReuse/test", description="A CLIP the stock TextGenerate can generate text with (stand-in).",
            inputs=[io.Combo.Input("clip_name", options=folder_paths.get_filename_list("text_encoders"),
                                   tooltip="Any file: its content seeds the generated text."),
                    io.Int.Input("work_ms", default=0, min=0, max=600000, tooltip="CPU time each generate takes.")],
            outputs=[io.Clip.Output(tooltip="A language model for TextGenerate.")])

    @classmethod
    def execute(cls, clip_name, work_ms=0):
        count("llm_loader")
        m = StandInLanguageModel("llm", clip_name, folder_paths.get_full_path_or_raise("text_encoders", clip_name))
        m.work_ms = work_ms
        return io.NodeOutput(m)


class SeedReuseTestPromptReader(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestPromptReader", display_name="SeedReuse Test: Prompt Reader (hidden inputs)",
            category="SeedReuse/test", description="A text made from its node id, the prompt and the workflow.",
            inputs=[io.String.Input("text", default="x", tooltip="Prepended to what it reads.")],
            outputs=[io.String.Output(display_name="text", tooltip="text + what it read.")],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt, io.Hidden.extra_pnginfo])

    @classmethod
    def execute(cls, text):
        seeds = sorted(str(n.get("inputs", {}).get("seed")) for n in (cls.hidden.prompt or {}).values()
                       if isinstance(n, dict) and "seed" in n.get("inputs", {}))
        return io.NodeOutput(f"{text} {cls.hidden.unique_id} {'/'.join(seeds)} {len(str(cls.hidden.extra_pnginfo))}")


class SeedReuseTestVolatileText(io.ComfyNode):
    """A text whose change token is NaN: the host treats it as changed on every run (a node reading
    a clock, a counter or the network)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeedReuseTestVolatileText", display_name="SeedReuse Test: Volatile Text (changes every run)",
            category="SeedReuse/test", description="A text the host must run again on every prompt.",
            inputs=[io.String.Input("text", default="x", tooltip="The text, with a run counter appended.")],
            outputs=[io.String.Output(display_name="text", tooltip="text + a counter.")])

    @classmethod
    def fingerprint_inputs(cls, **kw):
        return float("nan")

    @classmethod
    def execute(cls, text):
        count("volatile")
        return io.NodeOutput(f"{text} #{random.random()}")


PROMPT_NODES = [SeedReuseTestWildcard, SeedReuseTestLanguageModelLoader, SeedReuseTestPromptReader,
                SeedReuseTestVolatileText]
