"""Fixtures of the browser tests: a real Chromium (Debian's, never downloaded) driven by
Playwright against a real ComfyUI worker that serves the pack's web/ extension.

The browser is found at $SEEDREUSE_CHROMIUM or /usr/bin/chromium (installed by
``scripts/setup.sh --with-browser``). When it is missing the tests FAIL with a message saying
how to install it: they never skip silently.
"""
from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

from seedreuse_lab import host

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
ARTIFACTS = host.REPO_ROOT / "test-artifacts"

# Settings written for the worker's default user before the page opens: no first-run
# template browser over the canvas, no nag dialogs.
UI_SETTINGS = {
    "Comfy.TutorialCompleted": True,
    "Comfy.Workflow.ShowMissingModelsWarning": False,
    "Comfy.Workflow.ShowMissingNodesWarning": False,
    "Comfy.Validation.Workflows": False,
    "Comfy.Minimap.Visible": False,
}


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives a real Chromium against a real ComfyUI worker")


def chromium_path() -> str:
    env = os.environ.get("SEEDREUSE_CHROMIUM")
    for cand in ([env] if env else []) + ["/usr/bin/chromium", shutil.which("chromium") or ""]:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    pytest.fail("Chromium is not installed, so the browser test cannot run. Install Debian's chromium with "
                "`bash scripts/setup.sh --with-browser` (or `apt-get install -y chromium`), or point "
                "SEEDREUSE_CHROMIUM at a Chromium binary. Playwright's own browser downloads are not used.",
                pytrace=False)


@pytest.fixture(scope="module")
def playwright_mod():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the Python package 'playwright' is missing: run `bash scripts/setup.sh` "
                    "(requirements-test.txt pins it)", pytrace=False)
    exe = chromium_path()
    with sync_playwright() as pw:
        yield pw, exe


@pytest.fixture(scope="module")
def browser(playwright_mod):
    pw, exe = playwright_mod
    b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def ui_worker(module_workers):
    """One real ComfyUI worker (the pack + the stand-in test pack), UI settings pre-seeded."""
    w = module_workers.one()
    req = urllib.request.Request(w.url + "/settings", data=json.dumps(UI_SETTINGS).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
    return w


@pytest.fixture
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
