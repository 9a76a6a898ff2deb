"""Synthetic video frames and their comparison: what the backend's video tests and the merge
benchmark share (no model, no host)."""
from __future__ import annotations

import math

import numpy as np


def synthetic_frames(start: int, stop: int, width: int, height: int, variant: int = 0):
    """Frames ``start..stop-1`` of a smooth moving test pattern (distinct per frame and
    per ``variant``), uint8 [T, H, W, 3]."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    out = np.empty((max(0, stop - start), height, width, 3), np.uint8)
    for n, k in enumerate(range(start, stop)):
        r = 128 + 60 * np.sin(x / 7 + k * 0.37 + variant) + 40 * np.cos(y / 5 - k * 0.21)
        g = 128 + 70 * np.sin((x + y) / 9 - k * 0.29 - variant * 0.5)
        b = 128 + 50 * np.cos(x / 4 + y / 11 + k * 0.17 + variant * 2)
        img = np.stack([r, g, b], -1)
        s = max(2, min(width, height) // 6)
        cx, cy = (k * 5 + variant * 11) % max(1, width - s), (k * 3) % max(1, height - s)
        img[cy:cy + s, cx:cx + s] = 255 - (k * 37 + variant * 50) % 200
        out[n] = np.clip(img, 0, 255)
    return out


def psnr(a, b) -> float:
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)
