"""Fixtures of the ComfyUI-Distributed tier: one fleet per module (a master and two local
workers, seedreuse_lab/distributed.py) on one cache root, and the encoder-count lines every test
records: printed at the end of the run (pytest's terminal summary), so the CI log shows them.

Where CI=true, a missing ComfyUI-Distributed archive fails the run; elsewhere the tier skips and
says what is missing.
"""
from __future__ import annotations

import pytest

from seedreuse_lab import distributed
from tests import tier_gate

LINES: list[str] = []


def record(line: str) -> None:
    """One line for the run's summary (and stdout, shown with a failing test)."""
    print(line)
    LINES.append(line)


def pytest_terminal_summary(terminalreporter):
    if LINES:
        terminalreporter.section("ComfyUI-Distributed: encoder runs per participant")
        for line in LINES:
            terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def fleet_factory(tmp_path_factory, models_dir):
    """Starts fleets on demand (``fleet_factory(env=..., worker_timeout_s=...)``), stops them at
    the module's end."""
    try:
        distributed.unpacked_pack()
    except distributed.PeerUnavailable as e:
        tier_gate.require("the distributed tier", str(e))
    fleets = []

    def start(**kw) -> distributed.Fleet:
        base = tmp_path_factory.mktemp("fleet")
        f = distributed.Fleet(base / "fleet", models_dir=models_dir, cache_root=base / "cache", **kw)
        fleets.append(f)
        return f.start()

    yield start
    for f in fleets:
        f.stop()
