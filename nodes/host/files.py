"""The host's folders: the cache root's default, the files a widget value names (input files and
model files, for the reuse keys' file identities), where outputs are saved."""
from __future__ import annotations

import os
import re

import folder_paths

from ...reuse_backend.keys import file_identity
from ...reuse_backend import settings
from ...reuse_backend.store import roots

# a file name: anything, a dot, an extension, and ComfyUI's optional " [input]" annotation
_FILE_RE = re.compile(r"^[^\n\r\x00]{1,512}\.[A-Za-z0-9]{1,16}( \[(input|output|temp)\])?$")


def cache_root() -> str:
    """The configured cache location: $SEEDREUSE_CACHE_URL (``s3://bucket/prefix``: the object
    store, with the folder below as this host's local tier), else the folder $SEEDREUSE_CACHE_ROOT,
    else <ComfyUI user dir>/seedreuse_cache."""
    default = os.path.join(folder_paths.get_user_directory(), "seedreuse_cache")
    folder = str(roots.resolve_root(default=default))
    roots.set_default_root(folder)
    return settings.cache_url() or folder


# widget value -> (identity prefix, path, kind) of the file it resolved to: finding a model file
# asks every model folder in turn (~40 on 0.3.75, a stat or more each), about 0.3 ms per value on
# every prompt; a re-queue names the same files. An entry is used only while its path is still a
# file (and, for input files, still inside the input/output/temp folders); the content identity
# itself is always recomputed (file_identity: re-hashed when size/mtime/inode change). What this
# does not follow: a file of the same name added later to a model folder that sorts earlier
# keeps resolving to the first one found (restart the worker after such a change).
_RESOLVED: dict[str, tuple[str, str, str]] = {}
_RESOLVED_MAX = 4096


def resolve_file(class_type: str, input_name: str, value: str) -> str | None:
    """Content identity of a file named by a widget value (input file or model file), or None."""
    if not isinstance(value, str) or not _FILE_RE.match(value):
        return None
    hit = _RESOLVED.get(value)
    if hit is not None:
        prefix, path, kind = hit
        if os.path.isfile(path) and (kind != "input" or _inside_io_folders(path)):
            return prefix + file_identity.content_id(path, kind=kind)
        _RESOLVED.pop(value, None)
    found = _find_file(value)
    if found is None:
        return None
    if len(_RESOLVED) >= _RESOLVED_MAX:
        _RESOLVED.clear()
    _RESOLVED[value] = found
    prefix, path, kind = found
    return prefix + file_identity.content_id(path, kind=kind)


def _find_file(value: str) -> tuple[str, str, str] | None:
    try:
        path = folder_paths.get_annotated_filepath(value)
    except Exception:  # annotated-path parsing of odd strings: not a file then
        path = None
    # only files inside ComfyUI's input/output/temp folders: a widget value naming any other
    # path ("../x", "/etc/passwd") is plain text to the key, never read
    if path and os.path.isfile(path) and _inside_io_folders(path):
        return "input:", path, "input"
    for folder in sorted(folder_paths.folder_names_and_paths):
        if folder in ("custom_nodes", "configs"):
            continue
        try:
            path = folder_paths.get_full_path(folder, value)
        except Exception:
            path = None
        if path and os.path.isfile(path):
            return f"model:{folder}:", path, "model"
    return None


def input_file_path(value) -> str | None:
    """The path of an input file named by a widget value (as LoadImage / LoadAudio resolve it),
    only inside ComfyUI's input/output/temp folders; None for anything else."""
    if not isinstance(value, str) or not _FILE_RE.match(value):
        return None
    try:
        path = folder_paths.get_annotated_filepath(value)
    except Exception:
        return None
    return path if path and os.path.isfile(path) and _inside_io_folders(path) else None


def _inside_io_folders(path: str) -> bool:
    real = os.path.realpath(path)
    for base in (folder_paths.get_input_directory(), folder_paths.get_output_directory(),
                 folder_paths.get_temp_directory()):
        b = os.path.realpath(base)
        if real.startswith(b + os.sep):
            return True
    return False


def output_directory() -> str:
    return folder_paths.get_output_directory()


def save_path(filename_prefix: str, width: int, height: int):
    return folder_paths.get_save_image_path(filename_prefix, output_directory(), width, height)
