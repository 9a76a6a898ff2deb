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
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from seedreuse_lab import host

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
ARTIFACTS = host.REPO_ROOT / "test-artifacts"
# The newest ComfyUI frontend the badges are checked on besides the host's own (1.32.9 for
# ComfyUI 0.3.75): pinned in newest-frontend.txt (also read by `scripts/setup.sh --with-browser`),
# installed with pip --target under .cache/frontend/<version>/ and served with --front-end-root.
NEWEST_FRONTEND_PIN = Path(__file__).with_name("newest-frontend.txt")
FRONTEND_CACHE = host.REPO_ROOT / ".cache" / "frontend"

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
    """One real ComfyUI worker (the pack + the stand-in test pack), UI settings pre-seeded; it
    serves a browser, so it starts as a user's would (API nodes loaded: seedreuse_lab/worker.py)."""
    w = module_workers.one(api_nodes=True)
    req = urllib.request.Request(w.url + "/settings", data=json.dumps(UI_SETTINGS).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
    return w


@pytest.fixture
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def newest_frontend_spec() -> tuple[str, str]:
    """(pip requirement, version) of the newest frontend, from newest-frontend.txt."""
    for line in NEWEST_FRONTEND_PIN.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            return line, line.split("==", 1)[1]
    raise AssertionError(f"{NEWEST_FRONTEND_PIN} names no comfyui-frontend-package==<version>")


def newest_frontend_static() -> Path:
    """The static folder of the newest frontend: installed once (pip --target, from the
    configured index) into .cache/frontend/<version>/, then reused. The test FAILS with pip's
    message when it cannot be installed."""
    spec, version = newest_frontend_spec()
    target = FRONTEND_CACHE / version
    static = target / "comfyui_frontend_package" / "static"
    if (static / "index.html").is_file():
        return static
    tmp = FRONTEND_CACHE / f".{version}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "-q",
           "--target", str(tmp), spec]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.fail(f"installing {spec} took over 600 s: {' '.join(cmd)}", pytrace=False)
    if r.returncode != 0 or not (tmp / "comfyui_frontend_package" / "static" / "index.html").is_file():
        pytest.fail(f"could not install {spec} for the browser test ({' '.join(cmd)}):\n{r.stdout}{r.stderr}"
                    "\nRun `bash scripts/setup.sh --with-browser` where the package index is reachable.",
                    pytrace=False)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return static


def post_settings(worker, settings: dict) -> None:
    """Writes UI settings for the worker's default user (read by the page when it opens)."""
    req = urllib.request.Request(worker.url + "/settings", data=json.dumps(settings).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200


@pytest.fixture(scope="session")
def newest_frontend() -> tuple[str, Path]:
    """(version, static folder) of the newest frontend (installed on first use)."""
    return newest_frontend_spec()[1], newest_frontend_static()


@pytest.fixture(scope="session")
def write_ui_settings():
    """write_ui_settings(worker, **extra): the UI settings above plus `extra`, for the worker's user."""
    def write(worker, extra: dict | None = None) -> None:
        post_settings(worker, {**UI_SETTINGS, **(extra or {})})
    return write


@pytest.fixture
def browser_artifacts() -> Path:
    """test-artifacts/browser/: the screenshots of the browser tests."""
    d = ARTIFACTS / "browser"
    d.mkdir(parents=True, exist_ok=True)
    return d
