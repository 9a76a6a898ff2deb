"""Shared pytest fixtures: tiny real models, real ComfyUI workers, prompt builders.

    def test_x(comfy_worker):                     # one started worker per test module
        res = comfy_worker.run(graphs.wan_t2v_graph(seed=1)).raise_for_status()

    def test_y(comfy_workers):                    # factory, workers stopped after the test
        w0, w1 = comfy_workers(2)                 # started concurrently, one shared cache root
        assert w0.env["SEEDREUSE_CACHE_ROOT"] == str(comfy_workers.cache_root)

Import the harness as ``from seedreuse_lab import graphs, worker`` (the repository root is on pytest's pythonpath).
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from seedreuse_lab import graphs, host  # noqa: E402
from seedreuse_lab import tiny_models as _tm  # noqa: E402
from seedreuse_lab.worker import ComfyWorker, WorkerGroup  # noqa: E402


class _RepoRootIsNotATestPackage:
    """The repo root is a ComfyUI pack (it has an __init__.py), so pytest >= 8 would collect it as
    a Package and import the pack's __init__.py at setup; while the pack is being written (or if it
    ever imports ComfyUI at module level) every test would then error. Collect it as a plain Dir."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collect_directory(self, path, parent):
        if Path(path).resolve() == host.REPO_ROOT and hasattr(pytest, "Dir"):
            return pytest.Dir.from_parent(parent, path=Path(path))
        return None


# Tiers (docs/DEVELOPMENT.md, "Test tiers"): every test gets exactly one tier marker, from where it lives and what it
# needs, so `-m` selects lanes without anyone having to remember to mark a new test.
TIERS = {
    "backend": "the backend and static checks: real files in tmp_path, no ComfyUI worker",
    "host": "real ComfyUI workers over HTTP (one host): nodes, routes, examples, cross-worker reuse",
    "families": "the support matrix (Wan 2.2, Qwen-Image, InfiniteTalk) in real workers",
    "templates": "the official ComfyUI templates instrumented and run on two real workers",
    "browser": "the web extension in a real Chromium against a real worker",
    "soak": "many requests with injected failures, interrupts and kills",
    "sharedfs": "real shared filesystems (GlusterFS, ...) across simulated hosts in network namespaces",
    "objectstore": "the cache on a real object store (Ceph RGW): the bucket store, real workers, two hosts",
    "distributed": "the pack under ComfyUI-Distributed 1.4.4: a master and two local workers, jobs through /distributed/queue",
}
SMOKE_FILES = {"test_pack_loads.py", "test_host_smoke.py"}   # the host part of the fast lane

# ComfyUI 0.33.0 is the primary host: every tier runs there. The secondary host (0.3.75, a year
# older) runs only what exercises a code path that differs by host (marker ``both_hosts``,
# selected by scripts/test.sh): each entry says which host difference it covers. Left to the
# primary: the templates tier (on 0.3.75 the templates of a newer package run on stand-ins of the
# nodes that host lacks; that host's own templates are instrumented and converted by the key
# mutation checker), the families, the newest frontend and the README's picture.
BOTH_HOSTS = {
    "test_pack_loads.py": "the pack's import and registration through each host's V3 API",
    "test_host_smoke.py": "the host adapter (nodes/host/): server, executor hook, node classes",
    "test_encoder_reuse.py": "lazy evaluation and the executor hook that commits a prompt",
    "test_segment_reuse.py": "node expansion (the segment loop) and the executor's loop bookkeeping",
    "test_routes.py": "the server's routes, request handling and the dry run's class introspection",
    "test_auto_mode.py": "automatic mode's on_prompt handler and middleware on each server",
    "test_cache_modes.py": "each host's cache modes (0.3.75: classic default; 0.33: RAM pressure default)",
    "test_examples.py": "the shipped examples' stock-node layouts (the oldest host's widgets)",
    "test_real_encoders.py": "each host's CLIP vision and audio-encoder loaders and outputs",
    "test_key_mutations.py": "each host's own official templates, instrumented and converted to the API form with its schemas",
    "test_key_cases.py": "the key's seed, sampler and prompt-enhancer cases end to end on each host",
    "browser": "each host's own frontend (1.32.9 on 0.3.75)",
}
SMOKE_EXCLUDED = {"test_two_workers_are_deterministic_and_survive_kill"}   # minutes, not seconds


def _tier(item) -> str:
    parts = Path(str(item.fspath)).relative_to(Path(__file__).resolve().parent).parts
    if parts[0] in ("backend", "browser", "soak", "families", "templates"):
        return parts[0]
    if parts[0] == "shared_fs":
        return "sharedfs"
    if parts[0] == "object_store":      # a test parametrized on the in-memory double: the fast lane
        return "backend" if _on_memory_double(item) else "objectstore"
    if parts[0] == "distributed":
        return "distributed"
    return "host" if item.get_closest_marker("comfy") else "backend"


def _on_memory_double(item) -> bool:
    """A test of tests/object_store/ run on the in-memory S3 double (fixture ``bucket`` with
    parameter "memory", or ``memory_bucket``): no gateway, seconds, so it belongs to the backend
    tier."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return params.get("bucket") == "memory" or "memory_bucket" in params \
        or params.get("medium") in ("folder", "memory")      # the store contract (test_store_contract.py)


def _one_host_elsewhere(item) -> str | None:
    """The host a ``one_host`` test runs on instead of this one, or None (it runs here).

    ``@pytest.mark.one_host("0.3.75")``: what the test proves does not depend on the ComfyUI host
    (a shared filesystem's or an object store's semantics across two simulated hosts), so a run of
    scripts/test.sh over several hosts runs it once, on the named one (CI time). Where that host is
    not among the hosts of this run (SEEDREUSE_RUN_HOSTS, set by scripts/test.sh; unset: a plain
    pytest run) it runs on whatever host this is."""
    mark = item.get_closest_marker("one_host")
    if mark is None or not mark.args:
        return None
    want = str(mark.args[0])
    run_hosts = os.environ.get("SEEDREUSE_RUN_HOSTS", "").split()
    if want not in run_hosts:
        return None
    try:
        here = host.comfyui_version()
    except host.HostNotFound:
        return None
    return None if here == want else want


def pytest_collection_modifyitems(config, items):
    elsewhere = [it for it in items if _one_host_elsewhere(it)]
    if elsewhere:
        config.hook.pytest_deselected(items=elsewhere)
        items[:] = [it for it in items if it not in elsewhere]
    for item in items:
        tier = _tier(item)
        item.add_marker(getattr(pytest.mark, tier))
        if tier == "backend":
            item.add_marker(pytest.mark.hostfree)
        if Path(str(item.fspath)).name in SMOKE_FILES and item.originalname not in SMOKE_EXCLUDED:
            item.add_marker(pytest.mark.smoke)
        path = Path(str(item.fspath))
        if path.name in BOTH_HOSTS or tier in BOTH_HOSTS:
            item.add_marker(pytest.mark.both_hosts)


def pytest_report_header(config):
    try:
        return f"ComfyUI host: {host.comfyui_version()} at {host.comfyui_dir()}"
    except host.HostNotFound as e:
        return f"ComfyUI host: none ({e})"


def pytest_configure(config):
    config.addinivalue_line("markers", "comfy: needs a real ComfyUI worker (seedreuse_lab)")
    for name, what in TIERS.items():
        config.addinivalue_line("markers", f"{name}: tier - {what}")
    config.addinivalue_line("markers", "smoke: a few host smoke tests (with backend: the fast lane)")
    config.addinivalue_line("markers", "one_host(version): runs on that ComfyUI host only when scripts/test.sh "
                                       "runs several (what it proves does not depend on the host)")
    config.addinivalue_line("markers", "hostfree: starts no ComfyUI worker and imports no host (the backend "
                                       "tier, and modules of other tiers that say so): scripts/test.sh runs "
                                       "it with the first host only")
    config.addinivalue_line("markers", "both_hosts: exercises a code path that differs by host: scripts/test.sh "
                                       "runs it on the secondary host (0.3.75) too (BOTH_HOSTS)")
    config.addinivalue_line("markers", "exhaustive: enumerations (every fs operation, every write kind, "
                                       "two uids): in the full suite, not in the fast lane")
    if not config.pluginmanager.has_plugin("seedreuse-root-dir"):
        config.pluginmanager.register(_RepoRootIsNotATestPackage(), "seedreuse-root-dir")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


def _failed(request) -> bool:
    node = request.node
    return any(getattr(getattr(node, f"rep_{w}", None), "failed", False) for w in ("setup", "call"))


# ------------------------------------------------------------------ host and models

@pytest.fixture(scope="session")
def comfyui_dir() -> Path:
    return host.comfyui_dir()


@pytest.fixture(scope="session")
def tiny_models() -> _tm.TinyModels:
    """The tiny models (generated once per generator version into <repo>/.cache/tiny-models)."""
    return _tm.ensure_tiny_models()


@pytest.fixture(scope="session")
def models_dir(tiny_models, tmp_path_factory) -> Path:
    """A models directory (per-file symlinks to the tiny models) shared by all workers of the
    session. Do not add files here; for extra models use ``private_models_dir``."""
    return tiny_models.link_models_dir(tmp_path_factory.mktemp("models"))


@pytest.fixture
def private_models_dir(tiny_models, tmp_path) -> Path:
    """A models directory of this test only (symlinks to the tiny models); add files freely."""
    return tiny_models.link_models_dir(tmp_path / "models")


@pytest.fixture(scope="session")
def seedreuse_cache_root(tmp_path_factory) -> Path:
    """One SEEDREUSE_CACHE_ROOT for the whole session (workers of module_workers share it)."""
    return tmp_path_factory.mktemp("seedreuse-cache-root")


# ------------------------------------------------------------------ workers

class WorkerFactory:
    """Starts workers on demand; stops all of them at teardown (also when the test failed).

    factory(n=1, *, env=None, extra_args=(), models_dir=None, custom_nodes=None, cache_root=None)
        -> WorkerGroup (started; iterable/indexable; unpack with ``w0, w1 = factory(2)``)
    factory.one(**kw) -> ComfyWorker
    factory.cache_root -> the root shared by every worker this factory starts (unless overridden)
    """

    def __init__(self, base: Path, models_dir: Path, cache_root: Path):
        self.base = base
        self.models_dir = models_dir
        self.cache_root = cache_root
        self.groups: list[WorkerGroup] = []
        self._n = 0

    def __call__(self, n: int = 1, *, env: dict | None = None, extra_args=(), models_dir: Path | None = None,
                 custom_nodes=None, cache_root: Path | None = None, name_prefix: str | None = None,
                 startup_timeout: float = 120.0, api_nodes: bool = False) -> WorkerGroup:
        prefix = name_prefix or f"g{len(self.groups)}w"
        group = WorkerGroup(self.base, n, models_dir=models_dir or self.models_dir,
                            cache_root=cache_root or self.cache_root, env=env, custom_nodes=custom_nodes,
                            extra_args=extra_args, name_prefix=prefix, startup_timeout=startup_timeout,
                            api_nodes=api_nodes)
        self.groups.append(group)
        group.start()
        return group

    def one(self, **kw) -> ComfyWorker:
        return self(1, **kw)[0]

    def workers(self) -> list[ComfyWorker]:
        return [w for g in self.groups for w in g]

    def close(self, report_logs: bool = False) -> None:
        if report_logs:
            for w in self.workers():
                sys.stderr.write(f"\n[{w.name}] {w.log_tail(60)}\n")
        for g in self.groups:
            g.stop()


def _factory(request, base: Path, models_dir: Path, cache_root: Path):
    f = WorkerFactory(base, models_dir, cache_root)
    yield f
    f.close(report_logs=_failed(request))


@pytest.fixture
def comfy_workers(request, tmp_path, models_dir):
    """Function-scoped worker factory: fresh processes, a fresh cache root (tmp_path/'cache')."""
    root = tmp_path / "cache"
    root.mkdir()
    yield from _factory(request, tmp_path / "workers", models_dir, root)


@pytest.fixture(scope="module")
def module_workers(request, tmp_path_factory, models_dir):
    """Module-scoped worker factory (workers live until the module's last test)."""
    base = tmp_path_factory.mktemp("workers-" + request.module.__name__.rsplit(".", 1)[-1])
    root = base / "cache"
    root.mkdir()
    yield from _factory(request, base, models_dir, root)


@pytest.fixture(scope="module")
def comfy_worker(module_workers) -> ComfyWorker:
    """One started worker shared by the tests of a module (its in-memory cache persists between
    them: call worker.free() or use unique seeds/texts if a test needs cold execution)."""
    return module_workers.one()


@pytest.fixture(scope="module")
def _module_pair(module_workers):
    a, b = module_workers(2)
    for w in (a, b):
        graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
    return a, b, module_workers.cache_root


@pytest.fixture
def pair_over_empty_root(_module_pair):
    """(a, b, cache_root): the module's two workers (started once per module, ~12 s per test
    saved on 2 cores) over an EMPTY cache root, so each test starts from no cache; both have
    input/ref.png. Worker state that outlives a test cannot change the next one's results:
    ComfyUI's in-memory node outputs are emptied and its models unloaded (POST /free), so an
    encoder or loader that does not run in a test did not run because of the pack, not because
    an earlier test left its output in memory; the stand-in counters (process-wide) are reset.
    A test that restarts a worker leaves a fresh process for the next; for a test that stops or
    kills one, use comfy_workers (fresh processes)."""
    a, b, root = _module_pair
    for p in list(root.iterdir()):
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    for w in (a, b):
        w.free(settle=0)
    time.sleep(0.3)                 # the prompt threads apply /free when idle (worker.free)
    for w in (a, b):
        w.reset_counts()
    return a, b, root


# ------------------------------------------------------------------ prompt helpers

@pytest.fixture
def test_image(comfy_worker):
    """Writes a deterministic PNG into the module worker's input dir; returns a callable
    name -> image name for LoadImage: ``test_image("a.png", seed=3)``."""
    def make(name: str = "seedreuse_start.png", *, width: int = 64, height: int = 64, seed: int = 0,
             worker: ComfyWorker | None = None) -> str:
        graphs.write_test_image((worker or comfy_worker).input_dir / name, width, height, seed)
        return name
    return make
