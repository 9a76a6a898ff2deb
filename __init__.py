"""SeedReuse: make "change the seed and try again" cheap in ComfyUI.

Encoder Reuse restores encoder outputs from a shared-disk cache so encoders and their
loaders never run again; Segment Reuse keeps the first N segments of the previous video
and generates only the rest. Only a fully successful prompt replaces the cache.
"""
from .nodes import comfy_entrypoint

WEB_DIRECTORY = "./web"

__all__ = ["comfy_entrypoint", "WEB_DIRECTORY"]
