"""One rule for a tier that needs what a machine may lack (root, packages, a peer's archive):
without it the tier skips and says what is missing; under CI (``CI`` set to true/1/yes) it fails
instead, so a CI log never shows a real-server tier as silently skipped."""
from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require(tier: str, why: str) -> None:
    """Skip with ``why``; under CI fail, naming the tier that cannot run."""
    if in_ci():
        pytest.fail(f"CI=true and {tier} cannot run: {why}", pytrace=False)
    pytest.skip(why)
