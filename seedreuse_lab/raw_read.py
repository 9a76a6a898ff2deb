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

``read_files_resident`` is the other end: the same bytes copied into buffers that were
allocated and faulted in before the clock starts, i.e. the page-cache copy alone, what a load
costs when its allocator reuses memory it already holds. Which of the two a load in a ComfyUI
worker pays depends on that process's heap: the I2V hit's 32 MB read in 4-11 ms inside worker
B, against 24.6-27.8 ms for read_files and 3.4-4.1 ms for this in the benchmark's process
(2026-12-02).
"""
from __future__ import annotations

import os
from pathlib import Path


def _fill(path, buf) -> int:
    """Read ``path`` from its start into ``buf`` (up to its length); returns the bytes read."""
    with open(path, "rb", buffering=0) as fh:
        view, got = memoryview(buf), 0
        try:
            while got < len(buf):
                k = fh.readinto(view[got:])
                if not k:
                    break
                got += k
        finally:
            view.release()
    return got


def read_files(paths) -> int:
    """Read every file of ``paths`` sequentially into its own new buffer, all kept alive until
    the last is read; returns the bytes read."""
    bufs, n = [], 0
    try:
        for p in paths:
            buf = bytearray(os.stat(p).st_size)
            n += _fill(p, buf)
            bufs.append(buf)
    finally:
        bufs.clear()
    return n


def resident_buffers(paths) -> list[bytearray]:
    """One zero-filled buffer per file of ``paths`` (its current size), every page touched."""
    return [bytearray(os.stat(p).st_size) for p in paths]


def read_files_resident(paths, bufs: list[bytearray]) -> int:
    """Read every file of ``paths`` into its buffer of ``bufs`` (resident_buffers); returns the
    bytes read. No allocation, no page fault on the destination: the copy from the page cache."""
    return sum(_fill(p, buf) for p, buf in zip(paths, bufs))


def artifact_files(folder: Path) -> list[Path]:
    """The tensor files of one committed cache version folder (name order)."""
    return [folder / f for f in sorted(os.listdir(folder)) if f.endswith(".safetensors")]
