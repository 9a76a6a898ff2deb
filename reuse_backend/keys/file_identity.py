"""Content identities of files that enter a reuse_key.

Input files (reference images, audio) are hashed in full: they are small and any change
must invalidate the cache. Model files can be tens of GB; their identity is the sha256 of
the size, the whole safetensors header and 16 evenly spaced 1 MiB blocks (head and tail
included). Replacing a model with other weights changes it; copying the same file to
another host does not. ``SEEDREUSE_FULL_MODEL_HASH=1`` hashes model files in full.

Results are memoized per process by (device, inode, size, mtime_ns, ctime_ns), so an
unchanged file is hashed once per worker.
"""
from __future__ import annotations

import hashlib
import os
import threading

from .. import settings

BLOCK = 1 << 20
SAMPLES = 16
_memo: dict[tuple, str] = {}
_lock = threading.Lock()


def _stat_key(path: str, mode: str) -> tuple:
    st = os.stat(path)
    return (mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _full_hash(f) -> str:
    h = hashlib.sha256()
    while True:
        b = f.read(8 * BLOCK)
        if not b:
            return h.hexdigest()
        h.update(b)


def _sampled_hash(f, size: int) -> str:
    h = hashlib.sha256(f"size:{size}".encode())
    if size <= SAMPLES * BLOCK * 2:
        h.update(b"full:")
        h.update(_full_hash(f).encode())
        return h.hexdigest()
    head = f.read(8)
    h.update(head)
    if len(head) == 8:  # safetensors: the header describes every tensor; hash it whole
        n = int.from_bytes(head, "little")
        if 0 < n <= 100 << 20 and n + 8 <= size:
            h.update(f.read(n))
    step = (size - BLOCK) // (SAMPLES - 1)
    for i in range(SAMPLES):
        f.seek(i * step)
        h.update(f.read(BLOCK))
    return "sampled:" + h.hexdigest()


def content_id(path: str, *, kind: str = "input") -> str:
    """sha256-based identity of a file's content. kind: 'input' (full) or 'model' (sampled)."""
    full = kind == "input" or settings.full_model_hash()
    mode = "full" if full else "sampled"
    key = _stat_key(path, mode)
    with _lock:
        hit = _memo.get(key)
    if hit is not None:
        return hit
    with open(path, "rb") as f:
        ident = _full_hash(f) if full else _sampled_hash(f, key[3])
    with _lock:
        _memo[key] = ident
    return ident
