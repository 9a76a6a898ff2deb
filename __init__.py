"""SeedReuse: make "change the seed and try again" cheap in ComfyUI.

Encoder Reuse restores encoder outputs from a shared-disk cache so encoders and their
loaders never run again; Segment Reuse keeps the first N segments of the previous video
and generates only the rest. Only a fully successful prompt replaces the cache.
"""
WEB_DIRECTORY = "./web"


async def comfy_entrypoint():
    # Imported here, not at module load, so that importing the pack outside ComfyUI
    # (pytest collects this folder as a package) does not need the host.
    from .nodes import comfy_entrypoint as entrypoint
    return await entrypoint()


__all__ = ["comfy_entrypoint", "WEB_DIRECTORY"]
