"""The raw-read baseline every load measurement compares with (benchmark, shared-fs harness).

A load returns every value of a cache at once, so its bytes end up in memory that is alive at
the same time: fresh pages, each faulted in and zeroed by the kernel once. A baseline that
frees each buffer before reading the next file measures something cheaper: glibc raises its
mmap threshold after the first large free (up to 32 MiB), so the next same-size buffer reuses
the pages already faulted in, and at page-cache speed the "raw read" no longer pays what any
loader must. Measured here (8 slots of 8 MB, page cache warm, interleaved medians of 15, 2 cores
busy with other jobs): freeing each buffer before the next file 9.2 ms, keeping every buffer
alive 14.1 ms, the cache's own load of the same slots 12.4 ms (a one-off run, 2026-12-01).
So the baseline keeps every buffer until all files are read, then releases them together, as
a load's caller does.

What it does not include: parsing, dtype handling, checksum verification (see the load path).
"""
from __future__ import annotations

import os
from pathlib import Path


def read_files(paths) -> int:
    """Read every file of ``paths`` sequentially into its own new buffer, all kept alive until
    the last is read; returns the bytes read."""
    bufs, n = [], 0
    try:
        for p in paths:
            with open(p, "rb", buffering=0) as fh:
                size = os.fstat(fh.fileno()).st_size
                buf = bytearray(size)
                view, got = memoryview(buf), 0
                try:
                    while got < size:
                        k = fh.readinto(view[got:])
                        if not k:
                            break
                        got += k
                finally:
                    view.release()
                bufs.append(buf)
                n += got
    finally:
        bufs.clear()
    return n


def artifact_files(folder: Path) -> list[Path]:
    """The tensor files of one committed cache version folder (name order)."""
    return [folder / f for f in sorted(os.listdir(folder)) if f.endswith(".safetensors")]
