"""A ComfyUI-Distributed fleet of real ComfyUI processes: one master and N local workers.

    fleet = Fleet(tmp / "fleet", models_dir=models, cache_root=root, workers=2).start()
    run = fleet.run(prompt)          # POST /distributed/queue on the master, followed to its end
    run.master.raise_for_status()    # the master's RunResult (websocket-followed, as worker.py)
    run.parts                        # {participant name: [history entries of its part]}
    fleet.stop()

ComfyUI-Distributed 1.4.4 comes from ``../shared/peers/comfyui-distributed-1.4.4.tar.xz``
(``SEEDREUSE_PEERS_DIR`` overrides the folder), checked against its sha256 and unpacked once
under ``<repo>/.cache/peers/``. Every fleet gets its own copy of the pack (its config file,
``gpu_config.json``, lives inside the pack folder), with the config written here: the master at
127.0.0.1 and every worker as a ``local`` worker on its own port, all enabled; a master finds
its workers only through that file (``api/queue_orchestration.py`` ``_resolve_enabled_workers``).
Every participant also loads the SeedReuse pack and the stand-in pack (worker.py), shares one
models folder and one ``SEEDREUSE_CACHE_ROOT``; workers run with ``COMFYUI_IS_WORKER=1`` as the
orchestrator's own launcher sets it (no worker auto-launch, no signal handlers of the master).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import websocket  # websocket-client

from . import host
from .worker import ComfyWorker, HTTPFailure, RunHandle, RunResult, default_custom_nodes, free_port

VERSION = "1.4.4"
TARBALL = f"comfyui-distributed-{VERSION}.tar.xz"
SHA256 = "5f7703b7422160803ae192e0f2faed527c4eaae4e2ec5d81d3c34c9cfbf16e22"
TOP = "ComfyUI-Distributed"
LINK_NAME = "ComfyUI-Distributed"
MASTER = "master"


class PeerUnavailable(RuntimeError):
    """The ComfyUI-Distributed archive is absent or is not the one the tests were written for."""


def peers_dir() -> Path:
    return Path(os.environ.get("SEEDREUSE_PEERS_DIR") or host.REPO_ROOT.parent / "shared" / "peers")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def unpacked_pack() -> Path:
    """The unpacked ComfyUI-Distributed folder under .cache/peers/ (unpacked once: into a temp
    name, then renamed, so a cut-off unpack is never taken for a whole one)."""
    dest = host.REPO_ROOT / ".cache" / "peers" / f"{TOP}-{VERSION}"
    if (dest / "__init__.py").is_file():
        return dest
    archive = peers_dir() / TARBALL
    if not archive.is_file():
        raise PeerUnavailable(f"{archive} is absent (set SEEDREUSE_PEERS_DIR to the folder that holds {TARBALL})")
    got = _sha256(archive)
    if got != SHA256:
        raise PeerUnavailable(f"{archive}: sha256 {got}, expected {SHA256} (peers README)")
    tmp = dest.with_name(f"{dest.name}.part-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r:xz") as tf:
            names = tf.getnames()
            if any(not (n == TOP or n.startswith(TOP + "/")) or ".." in Path(n).parts for n in names):
                raise PeerUnavailable(f"{archive}: unexpected member layout (one top folder {TOP}/ expected)")
            tf.extractall(tmp, filter="data")
        os.replace(tmp / TOP, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def fleet_config(worker_ports: dict[str, int], *, worker_timeout_s: int | None = None) -> dict:
    """ComfyUI-Distributed's gpu_config.json for a master and local workers on 127.0.0.1
    (utils/config.py get_default_config: unknown keys kept, missing ones defaulted)."""
    settings = {"debug": True, "auto_launch_workers": False, "stop_workers_on_master_exit": False,
                "master_delegate_only": False, "websocket_orchestration": True}
    if worker_timeout_s is not None:
        settings["worker_timeout_seconds"] = int(worker_timeout_s)
    return {"master": {"host": "127.0.0.1"},
            "workers": [{"id": wid, "name": f"worker {wid}", "host": "127.0.0.1", "port": port,
                         "enabled": True, "type": "local"} for wid, port in worker_ports.items()],
            "settings": settings}


@dataclass
class FleetRun:
    """One job: the master's prompt (followed on its websocket) and each participant's history
    entries with a collector that appeared during the job (the worker parts; the master's own)."""
    master: RunResult
    parts: dict = field(default_factory=dict)     # name -> [history entry dicts, oldest first]
    seconds: float = 0.0                          # queueing to the last participant's end

    def part(self, name: str) -> dict:
        entries = self.parts.get(name) or []
        assert len(entries) == 1, f"{name}: expected one prompt of this job, got {len(entries)}"
        return entries[0]


def part_succeeded(entry: dict) -> bool:
    return (entry.get("status") or {}).get("status_str") == "success"


def slot_payloads(entry: dict) -> list[dict]:
    """The Encode-or-Reuse outputs (``seedreuse`` ui: reused / encoded, why) of one history entry."""
    return [p for ui in (entry.get("outputs") or {}).values() for p in (ui.get("seedreuse") or [])]


class Fleet:
    def __init__(self, base_dir: Path | str, *, models_dir: Path | str, cache_root: Path | str,
                 workers: int = 2, env: dict | None = None, worker_timeout_s: int | None = None,
                 startup_timeout: float = 180.0):
        self.base_dir = Path(base_dir).resolve()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.cache_root = Path(cache_root)
        self.cache_root.mkdir(parents=True, exist_ok=True)
        ports = {str(i + 1): free_port() for i in range(workers)}
        config = fleet_config(ports, worker_timeout_s=worker_timeout_s)
        common = {"SEEDREUSE_CACHE_ROOT": str(self.cache_root), **(env or {})}
        self.master = self._participant(MASTER, config, common, models_dir, startup_timeout)
        self.workers = {wid: self._participant(f"worker{wid}", config, {**common, "COMFYUI_IS_WORKER": "1"},
                                               models_dir, startup_timeout, port=port)
                        for wid, port in ports.items()}

    def _participant(self, name: str, config: dict, env: dict, models_dir, startup_timeout: float,
                     port: int | None = None) -> ComfyWorker:
        """One ComfyUI process with its own copy of ComfyUI-Distributed: every process rewrites the
        pack's config file at startup (its process manager) through one temp name, so processes
        sharing one copy race on it."""
        pack = self.base_dir / "packs" / name / TOP
        if not pack.exists():
            shutil.copytree(unpacked_pack(), pack)
        (pack / "gpu_config.json").write_text(json.dumps(config, indent=2))
        nodes = default_custom_nodes() + [(LINK_NAME, pack)]
        return ComfyWorker(name, self.base_dir / name, port=port, custom_nodes=nodes, models_dir=models_dir,
                           env=env, startup_timeout=startup_timeout)

    @property
    def participants(self) -> dict[str, ComfyWorker]:
        return {MASTER: self.master, **{w.name: w for w in self.workers.values()}}

    def start(self) -> "Fleet":
        procs = list(self.participants.values())
        with ThreadPoolExecutor(max_workers=len(procs)) as ex:
            errors = [f.exception() for f in [ex.submit(p.start) for p in procs]]
        errors = [e for e in errors if e is not None]
        if errors:
            self.stop()
            raise errors[0]
        for p in procs:
            p.require_nodes("SeedReuseSession", "DistributedCollector", "DistributedSeed")
        return self

    def stop(self) -> None:
        with ThreadPoolExecutor(max_workers=3) as ex:
            list(ex.map(_quiet_stop, self.participants.values()))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------------ jobs
    def queue(self, prompt: dict, client_id: str, *, workers: list[str] | None = None) -> dict:
        """POST /distributed/queue (docs/comfyui-distributed-api.md); the answer (prompt_id,
        worker_count)."""
        body = {"prompt": prompt, "client_id": client_id,
                "enabled_worker_ids": list(workers if workers is not None else self.workers)}
        return self.master.post_json("/distributed/queue", body, timeout=120)

    def start_job(self, prompt: dict, *, workers: list[str] | None = None) -> "Job":
        seen = {name: set(_history(p)) for name, p in self.participants.items() if p.alive()}
        client_id = uuid.uuid4().hex
        ws = websocket.create_connection(f"ws://127.0.0.1:{self.master.port}/ws?clientId={client_id}", timeout=30)
        t0 = time.monotonic()
        try:
            answer = self.queue(prompt, client_id, workers=workers)
        except BaseException:
            ws.close()
            raise
        return Job(self, RunHandle(self.master, ws, answer["prompt_id"], client_id, t0), answer, seen, t0)

    def run(self, prompt: dict, *, workers: list[str] | None = None, timeout: float = 300) -> FleetRun:
        return self.start_job(prompt, workers=workers).wait(timeout)

    def counts(self) -> dict[str, dict]:
        """The stand-in counters of every live participant."""
        return {name: p.counts() for name, p in self.participants.items() if p.alive()}

    def reset_counts(self) -> None:
        for p in self.participants.values():
            if p.alive():
                p.reset_counts()

    def free(self) -> None:
        """Empty every participant's in-memory node cache (worker.free), so what runs again
        runs because of the pack, not because ComfyUI kept it."""
        for p in self.participants.values():
            if p.alive():
                p.free(settle=0)
        time.sleep(0.3)


class Job:
    """A queued job: ``handle`` follows the master's prompt; ``wait`` also waits until every live
    participant's queue is empty, then collects the history entries the job added."""

    def __init__(self, fleet: Fleet, handle: RunHandle, answer: dict, seen: dict, t0: float):
        self.fleet, self.handle, self.answer, self.seen, self.t0 = fleet, handle, answer, seen, t0

    def wait(self, timeout: float = 300) -> FleetRun:
        master = self.handle.wait(timeout)
        deadline = time.monotonic() + timeout
        parts = {}
        for name, p in self.fleet.participants.items():
            if name not in self.seen or not p.alive():
                continue
            while time.monotonic() < deadline:
                try:
                    q = p.get_json("/queue")
                except (HTTPFailure, OSError):
                    break                          # died meanwhile: its part is what it left
                if not q.get("queue_running") and not q.get("queue_pending"):
                    break
                time.sleep(0.1)
            try:
                hist = _history(p)
            except (HTTPFailure, OSError):
                continue
            new = [h for pid, h in hist.items() if pid not in self.seen[name] and _is_part(h)]
            parts[name] = sorted(new, key=lambda h: h["prompt"][0])
        return FleetRun(master, parts, time.monotonic() - self.t0)


def _is_part(entry: dict) -> bool:
    """A history entry of a job's part (its prompt holds the collector), not another prompt that
    ended meanwhile on that participant."""
    prompt = (entry.get("prompt") or [None, None, {}])[2]
    return isinstance(prompt, dict) and any(isinstance(n, dict) and n.get("class_type") == COLLECTOR
                                            for n in prompt.values())


def _history(p: ComfyWorker) -> dict:
    return p.get_json("/history?max_items=10000")


def _quiet_stop(p: ComfyWorker) -> None:
    try:
        p.stop()
    except Exception:  # noqa: BLE001 - stopping the rest matters more
        pass


# ---------------------------------------------------------------------- graphs

def distributed_graph(prompt: dict, *, sampler: str, images: list, seed: int) -> dict:
    """The prompt made a ComfyUI-Distributed job as its README shows it: the sampler's seed from a
    ``DistributedSeed`` (master: seed, worker i: seed + i + 1), the decoded ``images`` (a link)
    through a ``DistributedCollector`` into a PreviewImage; the prompt's other outputs removed."""
    p = json.loads(json.dumps(prompt))
    for nid in [n for n, node in p.items() if node["class_type"] in OUTPUT_CLASSES]:
        p.pop(nid)
    ids = [int(n) for n in p if str(n).isdigit()]
    seed_id, collect_id, preview_id = (str(max(ids, default=0) + k) for k in (1, 2, 3))
    p[seed_id] = {"class_type": "DistributedSeed", "inputs": {"seed": int(seed)}}
    field_name = "noise_seed" if "noise_seed" in p[sampler]["inputs"] else "seed"
    p[sampler]["inputs"][field_name] = [seed_id, 0]
    p[collect_id] = {"class_type": "DistributedCollector", "inputs": {"images": list(images), "load_balance": False}}
    p[preview_id] = {"class_type": "PreviewImage", "inputs": {"images": [collect_id, 0]}}
    return p


OUTPUT_CLASSES = {"SaveVideo", "CreateVideo", "SaveImage", "PreviewImage", "SaveAnimatedWEBP", "SaveWEBM"}
COLLECTOR = "DistributedCollector"


def collected_images(run: FleetRun) -> int:
    """How many images the master's PreviewImage after the collector shows."""
    return sum(len(ui.get("images") or []) for ui in run.master.outputs.values())
