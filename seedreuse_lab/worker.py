"""Real ComfyUI worker processes for tests.

    w = ComfyWorker("w0", tmp_path / "w0", models_dir=models, env={"SEEDREUSE_CACHE_ROOT": str(root)})
    w.start()                      # blocks until GET /object_info answers
    res = w.run(prompt)            # RunResult(status="success" | "error" | "interrupted", ...)
    w.stop()

Each worker has its own --base-directory (custom_nodes/ with symlinks to the packs, models ->
the shared models dir, input/, output/, temp/, user/) and logs to <base_dir>/worker.log.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import websocket  # websocket-client

from . import host

DEFAULT_STARTUP_TIMEOUT = 120.0


class WorkerError(RuntimeError):
    """The worker process failed (did not start, died, timed out). Carries the log tail."""


class PromptRejected(RuntimeError):
    """POST /prompt answered 400 (validation failed)."""

    def __init__(self, status: int, body: dict):
        self.status = status
        self.body = body
        self.error = body.get("error")
        self.node_errors = body.get("node_errors", {})
        msg = self.error.get("message") if isinstance(self.error, dict) else self.error
        super().__init__(f"prompt rejected ({status}): {msg}; node_errors={json.dumps(self.node_errors)[:2000]}")


class HTTPFailure(RuntimeError):
    def __init__(self, status: int, body: str, url: str):
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status} from {url}: {body[:500]}")


@dataclass
class RunResult:
    prompt_id: str
    status: str                     # "success" | "error" | "interrupted"
    executed: list[str]             # node ids from 'executing' events (node != None), in order
    cached: list[str]               # node ids from 'execution_cached'
    outputs: dict                   # /history/<id>[id]["outputs"] (node id -> ui output)
    error: dict | None              # the execution_error payload (or execution_interrupted's)
    events: list[dict]              # every raw ws event seen while waiting ({"type", "data"})
    seconds: float                  # wall time from queueing to the terminal event
    history: dict = field(default_factory=dict)  # the full /history/<id>[id] entry

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def events_of(self, prefix: str) -> list[dict]:
        """Events whose type starts with prefix (e.g. 'seedreuse.')."""
        return [e for e in self.events if str(e.get("type", "")).startswith(prefix)]

    def output_files(self, node_id: str | None = None, kind: str | None = None) -> list[dict]:
        """[{filename, subfolder, type}] from the history outputs ('images', 'gifs', 'videos', ...)."""
        out = []
        for nid, ui in self.outputs.items():
            if node_id is not None and nid != str(node_id):
                continue
            for k, v in ui.items():
                if kind is not None and k != kind:
                    continue
                if isinstance(v, list):
                    out.extend(x for x in v if isinstance(x, dict) and "filename" in x)
        return out

    def inspected(self, node_id: str) -> dict:
        """describe(value) recorded by a SeedReuseTestInspect node (see graphs.add_inspect)."""
        return self.outputs[str(node_id)]["inspect"][0]["value"]

    def raise_for_status(self) -> "RunResult":
        if self.status != "success":
            err = self.error or {}
            raise AssertionError(
                f"prompt {self.prompt_id} ended {self.status}: {err.get('exception_type')}: "
                f"{err.get('exception_message')} (node {err.get('node_id')} {err.get('node_type')})\n"
                + "".join(err.get("traceback") or [])[-3000:])
        return self


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@lru_cache(maxsize=None)
def _cli_supports(flag: str) -> bool:
    try:
        return f'"{flag}"' in (host.comfyui_dir() / "comfy" / "cli_args.py").read_text()
    except OSError:
        return False


def default_custom_nodes() -> list[tuple[str, Path]]:
    """The real pack (the repo root, as ComfyUI-SeedReuse) and the stand-in test pack."""
    return [(host.PACK_LINK_NAME, host.REPO_ROOT), ("seedreuse_stand_in_nodes", host.STAND_IN_NODES)]


class RunHandle:
    """A queued prompt whose events are being followed (websocket connected before queueing)."""

    def __init__(self, worker: "ComfyWorker", ws: websocket.WebSocket, prompt_id: str, client_id: str, t0: float):
        self.worker = worker
        self.ws = ws
        self.prompt_id = prompt_id
        self.client_id = client_id
        self.t0 = t0
        self.events: list[dict] = []
        self.executed: list[str] = []
        self.cached: list[str] = []
        self.terminal: dict | None = None
        self._done_executing = False
        self._result: RunResult | None = None

    def _mine(self, data: Any) -> bool:
        return isinstance(data, dict) and data.get("prompt_id") == self.prompt_id

    def _recv(self, deadline: float) -> dict | None:
        """One event, or None on a 0.5 s tick. Raises WorkerError if the worker died / timeout."""
        if time.monotonic() > deadline:
            raise WorkerError(f"{self.worker.name}: prompt {self.prompt_id} did not finish in time; "
                              f"executed={self.executed}\n{self.worker.log_tail()}")
        self.ws.settimeout(0.5)
        try:
            msg = self.ws.recv()
        except websocket.WebSocketTimeoutException:
            if not self.worker.alive():
                raise WorkerError(f"{self.worker.name} died while running {self.prompt_id}\n"
                                  f"{self.worker.log_tail()}")
            return None
        except (websocket.WebSocketConnectionClosedException, ConnectionError, OSError) as e:
            raise WorkerError(f"{self.worker.name}: websocket closed ({e}) while running "
                              f"{self.prompt_id}\n{self.worker.log_tail()}") from e
        if isinstance(msg, bytes):  # binary preview frames
            return None
        ev = json.loads(msg)
        self.events.append(ev)
        t, data = ev.get("type"), ev.get("data")
        if t == "executing" and self._mine(data):
            if data.get("node") is None:
                self._done_executing = True
            else:
                self.executed.append(str(data["node"]))
        elif t == "execution_cached" and self._mine(data):
            self.cached.extend(str(n) for n in data.get("nodes", []))
        elif t in ("execution_success", "execution_error", "execution_interrupted") and self._mine(data):
            self.terminal = ev
        return ev

    def wait_for(self, pred: Callable[[dict], bool], timeout: float = 60) -> dict:
        """Block until an event satisfying pred arrives (already-seen events count)."""
        for ev in self.events:
            if pred(ev):
                return ev
        deadline = time.monotonic() + timeout
        while True:
            if self.terminal is not None and self._done_executing:
                raise WorkerError(f"prompt {self.prompt_id} finished before the awaited event")
            ev = self._recv(deadline)
            if ev is not None and pred(ev):
                return ev

    def wait_executing(self, node_id: str, timeout: float = 60) -> dict:
        return self.wait_for(lambda e: e.get("type") == "executing" and self._mine(e.get("data"))
                             and str(e["data"].get("node")) == str(node_id), timeout)

    def wait(self, timeout: float = 300) -> RunResult:
        if self._result is not None:
            return self._result
        deadline = time.monotonic() + timeout
        try:
            while self.terminal is None:
                self._recv(deadline)
            seconds = time.monotonic() - self.t0
            # 'executing' node=None is sent after the history entry is written
            tail_deadline = time.monotonic() + 10
            while not self._done_executing and time.monotonic() < tail_deadline:
                self._recv(deadline + 10)
        finally:
            try:
                self.ws.close()
            except Exception:
                pass
        history = {}
        hist_deadline = time.monotonic() + 10
        while True:
            h = self.worker.get_json(f"/history/{self.prompt_id}")
            if self.prompt_id in h:
                history = h[self.prompt_id]
                break
            if time.monotonic() > hist_deadline:
                break
            time.sleep(0.05)
        t = self.terminal["type"]
        status = {"execution_success": "success", "execution_error": "error",
                  "execution_interrupted": "interrupted"}[t]
        self._result = RunResult(
            prompt_id=self.prompt_id, status=status, executed=list(self.executed),
            cached=list(self.cached), outputs=history.get("outputs", {}),
            error=None if status == "success" else self.terminal.get("data"),
            events=list(self.events), seconds=seconds, history=history)
        return self._result


class ComfyWorker:
    def __init__(self, name: str, base_dir: Path | str, *, port: int | None = None,
                 custom_nodes: Iterable[Path | tuple[str, Path]] | None = None,
                 models_dir: Path | str | None = None, env: dict | None = None,
                 extra_args: Iterable[str] = (), startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
                 api_nodes: bool = False):
        self.name = name
        self.base_dir = Path(base_dir).resolve()
        self._fixed_port = port
        self.port = port or 0
        cn = default_custom_nodes() if custom_nodes is None else list(custom_nodes)
        self.custom_nodes = [(c if isinstance(c, tuple) else (Path(c).name, Path(c))) for c in cn]
        self.models_dir = Path(models_dir).resolve() if models_dir else None
        self.env = dict(env or {})
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.api_nodes = api_nodes
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.startup_seconds: float | None = None
        self.last_node_errors: dict = {}
        self.headers: dict = {}       # sent with every HTTP request (not the websocket)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ layout / lifecycle
    @property
    def log_path(self) -> Path:
        return self.base_dir / "worker.log"

    @property
    def input_dir(self) -> Path:
        return self.base_dir / "input"

    @property
    def output_dir(self) -> Path:
        return self.base_dir / "output"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def prepare(self) -> None:
        """Create base_dir/{custom_nodes,input,output,temp,user} and the symlinks."""
        for d in ("custom_nodes", "input", "output", "temp", "user"):
            (self.base_dir / d).mkdir(parents=True, exist_ok=True)
        cn = self.base_dir / "custom_nodes"
        for link_name, target in self.custom_nodes:
            link = cn / link_name
            if link.is_symlink() or link.is_file():
                link.unlink()
            elif link.is_dir():
                shutil.rmtree(link)
            link.symlink_to(Path(target).resolve(), target_is_directory=True)
        models = self.base_dir / "models"
        if self.models_dir is not None:
            if models.is_symlink() or models.is_file():
                models.unlink()
            elif models.is_dir():
                shutil.rmtree(models)
            models.symlink_to(self.models_dir, target_is_directory=True)
        else:
            models.mkdir(exist_ok=True)

    def command(self) -> list[str]:
        # SEEDREUSE_WORKER_DEVICE=gpu (the GPU benchmark script): ComfyUI picks its CUDA device
        device = [] if os.environ.get("SEEDREUSE_WORKER_DEVICE") == "gpu" else ["--cpu"]
        cmd = [host.python_executable(), "main.py", *device, "--listen", "127.0.0.1",
               "--port", str(self.port), "--base-directory", str(self.base_dir),
               "--disable-auto-launch"]
        if _cli_supports("--database-url"):
            cmd += ["--database-url", "sqlite:///:memory:"]
        # the partner-service (API) nodes need the internet, which these workers never reach;
        # not importing their modules saves ~1.3 s of every start (0.3.75, 2 cores). A worker
        # that serves a browser keeps them (api_nodes=True): with the flag the server also sends
        # a `connect-src 'self'` CSP, and the frontend's blocked requests are console errors
        if not self.api_nodes and _cli_supports("--disable-api-nodes"):
            cmd += ["--disable-api-nodes"]
        try:
            import comfyui_frontend_package  # noqa: F401
        except ImportError:
            empty = self.base_dir / "empty-frontend"
            empty.mkdir(exist_ok=True)
            cmd += ["--front-end-root", str(empty)]
        return cmd + self.extra_args

    def start(self, timeout: float | None = None) -> "ComfyWorker":
        """Launch and block until GET /object_info answers (raises WorkerError with the log tail)."""
        if self.alive():
            return self
        timeout = timeout or self.startup_timeout
        self.prepare()
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            # a restart keeps its port when it is still free; otherwise pick a new one
            if not self._fixed_port and (attempt > 0 or not self.port or not _port_free(self.port)):
                self.port = free_port()
            self._launch()
            try:
                self._wait_ready(timeout)
                return self
            except WorkerError:
                in_use = "address already in use" in self.log_tail().lower()
                self._terminate(5)
                if not in_use or attempt == attempts - 1:
                    raise
        return self

    def _launch(self) -> None:
        env = os.environ.copy()
        env.update({"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                    # the stand-in pack exits the worker when this process is gone
                    "SEEDREUSE_TEST_PARENT_PID": str(os.getpid())})
        env.update({k: str(v) for k, v in self.env.items()})
        self._close_log()
        self._log = open(self.log_path, "ab", buffering=0)
        self._log.write(f"\n===== seedreuse harness: start {self.name} port {self.port} "
                        f"{time.strftime('%H:%M:%S')} =====\n{' '.join(self.command())}\n".encode())
        self._t_start = time.monotonic()
        self.proc = subprocess.Popen(self.command(), cwd=str(host.comfyui_dir()), env=env,
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        _LIVE.add(self)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise WorkerError(f"{self.name} exited with {self.proc.returncode} during startup\n"
                                  f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/object_info", timeout=5) as r:
                    if r.status == 200:
                        json.loads(r.read())
                        self.startup_seconds = time.monotonic() - self._t_start
                        return
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise WorkerError(f"{self.name} did not answer /object_info within {timeout:.0f} s\n"
                                  f"{self.log_tail()}")
            time.sleep(0.25)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM, then SIGKILL after timeout. Always closes the log file."""
        try:
            self._terminate(timeout)
        finally:
            self._close_log()

    def _terminate(self, timeout: float) -> None:
        p = self.proc
        if p is None:
            return
        if p.poll() is None:
            try:
                p.terminate()
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._sigkill()
            except ProcessLookupError:
                pass
        self.proc = None
        _LIVE.discard(self)

    def _sigkill(self) -> None:
        p = self.proc
        if p is None:
            return
        try:
            os.killpg(p.pid, signal.SIGKILL)  # own session: ComfyUI and anything it spawned
        except (ProcessLookupError, PermissionError):
            try:
                p.kill()
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        """SIGKILL now (simulates a crash). The base_dir is kept."""
        try:
            p = self.proc
            self._sigkill()
            if self.proc is p:     # start() in another thread may have launched a new one
                self.proc = None
                _LIVE.discard(self)
        finally:
            self._close_log()

    def restart(self, timeout: float | None = None) -> "ComfyWorker":
        self.stop()
        return self.start(timeout)

    def _close_log(self) -> None:
        if self._log is not None:
            try:
                self._log.close()
            finally:
                self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 80) -> str:
        lines = self.log_text().splitlines()
        return f"--- {self.log_path} (last {n} lines) ---\n" + "\n".join(lines[-n:])

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"ComfyWorker({self.name!r}, port={self.port}, alive={self.alive()})"

    # ------------------------------------------------------------------ HTTP
    def request(self, method: str, path: str, data: Any = None, headers: dict | None = None,
                timeout: float = 60) -> tuple[int, dict, bytes]:
        """(status, response headers, body) of one request, an error status included. ``data``:
        sent as JSON, or as it is when bytes; ``headers`` go over the worker's own ``headers``."""
        body = None if data is None else (data if isinstance(data, bytes) else json.dumps(data).encode())
        sent = dict(self.headers)             # e.g. {"comfy-user": id} on a --multi-user server
        if body:
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=sent)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def _request(self, method: str, path: str, data: Any = None, timeout: float = 30):
        status, _, raw = self.request(method, path, data, timeout=timeout)
        return status, raw

    def get_json(self, path: str, timeout: float = 30) -> Any:
        status, raw = self._request("GET", path, timeout=timeout)
        if status != 200:
            raise HTTPFailure(status, raw.decode(errors="replace"), path)
        return json.loads(raw)

    def post_json(self, path: str, data: Any = None, timeout: float = 30) -> Any:
        status, raw = self._request("POST", path, {} if data is None else data, timeout=timeout)
        if status != 200:
            raise HTTPFailure(status, raw.decode(errors="replace"), path)
        return json.loads(raw) if raw.strip() else None

    def get_bytes(self, path: str, timeout: float = 30) -> bytes:
        status, raw = self._request("GET", path, timeout=timeout)
        if status != 200:
            raise HTTPFailure(status, raw.decode(errors="replace"), path)
        return raw

    def object_info(self, node_class: str | None = None) -> dict:
        return self.get_json("/object_info" + (f"/{node_class}" if node_class else ""))

    def import_errors(self, pack: str | None = None) -> list[str]:
        """Log lines (with the traceback lines before them) where ComfyUI reported a custom-node
        pack failing to import or its comfy_entrypoint failing; pack filters by link name."""
        lines = self.log_text().splitlines()
        out = []
        for i, ln in enumerate(lines):
            if ("Cannot import" in ln or "Error while calling comfy_entrypoint" in ln
                    or "comfy_entrypoint in" in ln) and "custom_nodes" in ln and "comfy_extras" not in ln:
                if pack is None or f"/{pack}" in ln:
                    j = i
                    if j > 1 and not lines[j - 1].strip():
                        j -= 1  # ComfyUI prints the traceback, a blank line, then "Cannot import"
                    while j > 0 and (lines[j - 1].startswith((" ", "Traceback")) or "Error" in lines[j - 1]):
                        j -= 1
                    out.append("\n".join(lines[j:i + 1]))
        return out

    def require_nodes(self, *node_ids: str) -> dict:
        """Assert these node classes are registered (GET /object_info); on failure the error
        names the packs' import errors from the log. Returns their object_info entries."""
        info = self.object_info()
        missing = [n for n in node_ids if n not in info]
        if missing:
            errs = "\n".join(self.import_errors()) or "(no import error in the log)"
            raise AssertionError(f"{self.name}: node classes not registered: {missing}\n{errs}")
        return {n: info[n] for n in node_ids}

    # ------------------------------------------------------------------ prompts
    def queue(self, prompt: dict, client_id: str | None = None, *, prompt_id: str | None = None,
              extra_data: dict | None = None) -> str:
        """POST /prompt; returns the prompt_id. Raises PromptRejected on a validation failure."""
        payload = {"prompt": prompt, "client_id": client_id or uuid.uuid4().hex,
                   "prompt_id": prompt_id or str(uuid.uuid4())}
        if extra_data:
            payload["extra_data"] = extra_data
        status, raw = self._request("POST", "/prompt", payload)
        try:
            body = json.loads(raw)
        except ValueError:
            raise HTTPFailure(status, raw.decode(errors="replace"), "/prompt")
        if status != 200:
            raise PromptRejected(status, body)
        # 200 with non-empty node_errors: queued, but outputs with invalid inputs were dropped
        self.last_node_errors = body.get("node_errors") or {}
        return body["prompt_id"]

    def start_run(self, prompt: dict, *, extra_data: dict | None = None) -> RunHandle:
        """Connect the websocket, then queue; follow it with .wait() / .wait_executing(node)."""
        client_id = uuid.uuid4().hex
        ws = websocket.create_connection(f"ws://127.0.0.1:{self.port}/ws?clientId={client_id}", timeout=30)
        prompt_id = str(uuid.uuid4())
        t0 = time.monotonic()
        try:
            self.queue(prompt, client_id, prompt_id=prompt_id, extra_data=extra_data)
        except BaseException:
            ws.close()
            raise
        return RunHandle(self, ws, prompt_id, client_id, t0)

    def run(self, prompt: dict, timeout: float = 300, *, extra_data: dict | None = None) -> RunResult:
        return self.start_run(prompt, extra_data=extra_data).wait(timeout)

    def interrupt(self, prompt_id: str | None = None) -> None:
        self.post_json("/interrupt", {"prompt_id": prompt_id} if prompt_id else {})

    def free(self, unload_models: bool = True, free_memory: bool = True, settle: float = 0.3) -> None:
        """POST /free: empties ComfyUI's in-memory output cache. The prompt thread applies it when
        idle (or after the running prompt); settle seconds give it time before the next queue."""
        self.post_json("/free", {"unload_models": unload_models, "free_memory": free_memory})
        time.sleep(settle)

    # ------------------------------------------------------------------ stand-in pack routes
    def counts(self) -> dict:
        return self.get_json("/seedreuse_test/counts")

    def reset_counts(self) -> dict:
        return self.post_json("/seedreuse_test/counts/reset", {})

    # ------------------------------------------------------------------ files
    def output_path(self, file_info: dict) -> Path:
        """Path of a {filename, subfolder, type} entry from a RunResult output."""
        base = {"output": self.output_dir, "temp": self.base_dir / "temp",
                "input": self.input_dir}[file_info.get("type", "output")]
        return base / file_info.get("subfolder", "") / file_info["filename"]


class WorkerGroup:
    """N workers started concurrently, sharing one models dir and one SEEDREUSE_CACHE_ROOT.

        with WorkerGroup(tmp_path, 2, models_dir=m, cache_root=root) as (w0, w1): ...

    Stops every worker on exit, also when a test fails or a start fails."""

    def __init__(self, base_dir: Path | str, n: int, *, models_dir: Path | str | None = None,
                 cache_root: Path | str | None = None, env: dict | None = None,
                 custom_nodes=None, extra_args: Iterable[str] = (), name_prefix: str = "w",
                 startup_timeout: float = DEFAULT_STARTUP_TIMEOUT, api_nodes: bool = False):
        base_dir = Path(base_dir)
        self.cache_root = Path(cache_root) if cache_root else base_dir / "seedreuse-cache"
        self.cache_root.mkdir(parents=True, exist_ok=True)
        e = {"SEEDREUSE_CACHE_ROOT": str(self.cache_root)}
        e.update(env or {})
        self.workers = [ComfyWorker(f"{name_prefix}{i}", base_dir / f"{name_prefix}{i}", custom_nodes=custom_nodes,
                                    models_dir=models_dir, env=e, extra_args=extra_args,
                                    startup_timeout=startup_timeout, api_nodes=api_nodes) for i in range(n)]

    def start(self) -> "WorkerGroup":
        with ThreadPoolExecutor(max_workers=max(1, len(self.workers))) as ex:
            futs = [ex.submit(w.start) for w in self.workers]
            errors = []
            for f in futs:
                try:
                    f.result()
                except BaseException as e:  # noqa: BLE001
                    errors.append(e)
        if errors:
            self.stop()
            raise errors[0]
        return self

    def stop(self) -> None:
        with ThreadPoolExecutor(max_workers=max(1, len(self.workers))) as ex:
            list(ex.map(lambda w: _quiet(w.stop), self.workers))

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()

    def __iter__(self):
        return iter(self.workers)

    def __getitem__(self, i) -> ComfyWorker:
        return self.workers[i]

    def __len__(self):
        return len(self.workers)


_LIVE: "set[ComfyWorker]" = set()


@atexit.register
def _kill_leftovers() -> None:
    for w in list(_LIVE):
        _quiet(w.kill)


def _quiet(fn):
    try:
        fn()
    except Exception:
        pass
