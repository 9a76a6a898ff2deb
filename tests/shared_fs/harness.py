"""What runs on a SharedFSEnv: the pack's probe, the cross-host soak, the refusal check and the
measurements. Used by test_glusterfs.py (probe + soak / refusal) and run.py (everything).

* ``run_probe``: ``python -m reuse_backend probe <hostA cache root> --peer <hostB cache root> --json``.
* ``CrossHostSoak``: tests/soak/soak.py's ``Soak`` with workers on both hosts; after every step it
  also opens each cache through *each host's* mount (that host's FUSE client, as the workers
  there see it) and records a stale read when the version differs from the last committed one
  the soak knows of (then it polls, bounded, for how long it stays stale).
* ``refusal_check``: a root the pack must refuse: the first request on each host fails before
  sampling with the typed error naming the filesystem, and nothing is ever published.
* ``measure_io`` / ``measure_commit`` / ``measure_hits``: load throughput vs a raw read of the
  same bytes through the same mount, commit latency, cross-host vs same-host hit (queue ->
  first sampler ``executing`` event). Ratios are printed, never asserted.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.soak.soak import S, SEG_CACHE, SEG_TEXT, T2V_CACHE, TEXTS, Request, Soak, SoakConfig, assert_clean, format_report
from tests.soak.two_hosts import NetnsWorker

from seedreuse_lab.bench import raw_read_fresh   # the same raw-read baseline as the benchmark
from seedreuse_lab import graphs
from seedreuse_lab.graphs import T2V
from seedreuse_lab.reuse_graphs import t2v_reuse
from seedreuse_lab.worker import _quiet
from reuse_backend import settings
from reuse_backend.errors import ReuseError
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
from reuse_backend.folder.layout import committed_caches
from reuse_backend.folder import filesystems

from .env import REPO_ROOT, SharedFSEnv

STALE_POLL_S = 10.0      # how long a stale read is followed until it converges


def med(xs):
    return statistics.median(xs) if xs else float("nan")


# ------------------------------------------------------------------------------ probe

def run_probe(env: SharedFSEnv, log=print) -> dict:
    """The pack's probe on hostA's cache root with hostB's as the peer. ``missing`` when this
    checkout has no probe command yet."""
    a, b = env.cache_root(env.hosts[0]), env.cache_root(env.hosts[1])
    cmd = [sys.executable, "-m", "reuse_backend", "probe", str(a), "--peer", str(b), "--json"]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
                           env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    except subprocess.TimeoutExpired:
        return {"error": "the probe did not finish within 300 s", "command": " ".join(cmd)}
    secs = round(time.monotonic() - t0, 1)
    if p.returncode == 2 and ("invalid choice" in p.stderr or "probe" not in p.stderr + p.stdout):
        return {"missing": True, "detail": f"`python -m reuse_backend probe` is not there yet: {p.stderr.strip()[-400:]}",
                "command": " ".join(cmd)}
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        return {"error": f"rc={p.returncode}, no JSON report: {(p.stdout + p.stderr)[-1500:]}", "command": " ".join(cmd)}
    rep.update(rc=p.returncode, seconds=secs, command=" ".join(cmd))
    log(f"  probe: verdict {rep.get('verdict')} (rc {p.returncode}, {secs} s), filesystem {rep.get('filesystem')!r}")
    for c in rep.get("checks", []):
        log(f"    [{c.get('status', '?'):11s}] {c.get('name')}: {c.get('detail', '')}")
    return rep


# ------------------------------------------------------------------------------ workers

class SharedFleet:
    """Workers on the simulated hosts, each with SEEDREUSE_CACHE_ROOT on its host's mount; the
    soak's checks read through the observer mount (``cache_root``)."""

    def __init__(self, env: SharedFSEnv, base: Path, models_dir: Path, per_host=(2, 1), extra_env=None):
        self.env = env
        self.cache_root = env.cache_root()
        self.workers: list[NetnsWorker] = []
        for h, n in zip(env.hosts, per_host):
            for i in range(n):
                self.workers.append(NetnsWorker(
                    f"{h.name}-w{i}", Path(base) / f"{h.name}-w{i}", env_=env, host=h, models_dir=models_dir,
                    env={"SEEDREUSE_CACHE_ROOT": str(env.cache_root(h)), **(extra_env or {})}))

    def start(self) -> "SharedFleet":
        from concurrent.futures import ThreadPoolExecutor
        t0 = time.monotonic()
        with ThreadPoolExecutor(len(self.workers)) as ex:
            futs = [ex.submit(w.start) for w in self.workers]
            errors = [f.exception() for f in futs if f.exception() is not None]
        if errors:
            self.stop()
            raise errors[0]
        for w in self.workers:
            graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
        self.start_seconds = round(time.monotonic() - t0, 1)
        return self

    def stop(self) -> None:
        for w in self.workers:
            _quiet(w.stop)

    def host_of(self, w) -> str:
        return w.sim.name

    def restart(self, w) -> None:
        w.start()

    def on(self, host: str) -> list:
        return [w for w in self.workers if w.sim.name == host]

    def describe(self) -> str:
        return (f"{len(self.workers)} workers on 2 simulated hosts "
                f"({', '.join(f'{w.name}@{w.sim.ns_ip}' for w in self.workers)}); {self.env.describe()}")

    def log_tails(self, n: int = 40) -> str:
        return "\n".join(w.log_tail(n) for w in self.workers)


# ------------------------------------------------------------------------------ the soak

def committed_version(store, name: str):
    """The version a reader through ``store`` (the soak's view of one mount, or of the bucket
    with one host's local tier) is served now (None: nothing committed)."""
    try:
        snap = store.snapshot(name)
    except ReuseError as e:
        return f"unreadable: {type(e).__name__}: {e.message}"
    if snap is None:
        return None
    with snap:
        return snap.version


class CrossHostSoak(Soak):
    def __init__(self, fleet: SharedFleet, cfg: SoakConfig, out_dir: Path, log=print):
        super().__init__(fleet, cfg, out_dir, log=log)
        self.env = fleet.env
        self.host_views = {h.name: self.store.at_local(self.env.cache_root(h)) for h in self.env.hosts}
        self.stale: list[dict] = []
        self.out_of_step: list[dict] = []
        self.cross_reads = 0

    def _step(self, req) -> None:
        super()._step(req)
        self._cross_check(req.idx)

    def _cross_check(self, idx: int) -> None:
        for name, m in self.models.items():
            want = m.version
            truth = committed_version(self.store, name)      # the observer's client: what the soak checked
            if truth != want:
                # the soak's model is out of step with the volume (a violation was just reported and the
                # model resynced from what it could read): no baseline to judge the hosts' reads by
                self.out_of_step.append({"after_request": idx, "cache": name, "model": want, "observer": truth})
                continue
            for h in self.env.hosts:
                got = committed_version(self.host_views[h.name], name)
                self.cross_reads += 1
                if got == want:
                    continue
                t0, converged = time.monotonic(), None
                while time.monotonic() - t0 < STALE_POLL_S:
                    time.sleep(0.2)
                    if committed_version(self.host_views[h.name], name) == want:
                        converged = round(time.monotonic() - t0, 2)
                        break
                rec = {"after_request": idx, "host": h.name, "cache": name, "latest": want, "served": got,
                       "converged_after_s": converged}
                self.stale.append(rec)
                self.log(f"  ! STALE READ on {h.name}: cache {name!r} served {got}, latest committed {want} "
                         f"(converged after {converged if converged is not None else f'> {STALE_POLL_S:.0f}'} s)")

    def epilogue(self) -> None:
        """After the random chain: a commit on hostB that hostA then builds on, and the reverse, on
        both caches (the chain's random workers may never have given hostB a commit): hostB
        resumes from the last result, hostA resumes from hostB's; hostB encodes a new text,
        hostA must reuse hostB's slot. Judged by the soak's own checks."""
        a = next(i for i, w in enumerate(self.fleet.workers) if self.fleet.host_of(w) == "hostA")
        b = next(i for i, w in enumerate(self.fleet.workers) if self.fleet.host_of(w) == "hostB")
        idx = max((s.idx for s in self.steps), default=0)
        seg = self.models[SEG_CACHE]
        plan = [(b, SEG_CACHE, 1 if seg.manifest is not None else 0), (a, SEG_CACHE, S - 1), (b, T2V_CACHE, None),
                (a, T2V_CACHE, None)]
        text = next((t for t in TEXTS if t != self.models[T2V_CACHE].text), TEXTS[0])
        for worker, cache, n in plan:
            idx += 1
            if cache == SEG_CACHE:
                req = Request(idx, "segment", cache, worker, "auto", self._new_seed(), SEG_TEXT, N=n)
            else:
                req = Request(idx, "t2v", cache, worker, "auto", self._new_seed(), text)
            req.follow_up = True
            self._predict(req)
            self._step(req)
        self.epilogue_requests = len(plan)

    def report(self) -> dict:
        r = super().report()
        r["stale_reads"] = len(self.stale)
        r["cross_host_reads"] = self.cross_reads
        r["details"]["stale_reads"] = self.stale
        r["details"]["model_out_of_step"] = self.out_of_step
        by_host: dict[str, dict] = {}
        for st in self.steps:
            h = self.fleet.host_of(self.fleet.workers[st.req["worker"]])
            c = by_host.setdefault(h, {"requests": 0, "commits": 0, "hits": 0})
            c["requests"] += 1
            c["commits"] += st.classified in ("success-commit", "kill-after-commit")
            c["hits"] += st.classified == "success-hit" or (st.classified == "success-commit" and st.req["N"] > 0)
        r["by_host"] = by_host
        r["epilogue_requests"] = getattr(self, "epilogue_requests", 0)
        return r


def soak_config(requests: int, seed: int, **kw) -> SoakConfig:
    return SoakConfig(requests=requests, seed=seed, kill=0.2, min_each=1, request_timeout_s=180, **kw)


def assert_soak_clean(r: dict) -> None:
    assert_clean(r, min_requests=1)
    if r.get("stale_reads"):
        raise AssertionError(f"{r['stale_reads']} stale read(s): {r['details']['stale_reads']}\n" + format_report(r))
    no_commit = [h for h in ("hostA", "hostB") if not (r.get("by_host") or {}).get(h, {}).get("commits")]
    if no_commit:
        raise AssertionError(f"no commit on {no_commit}: the soak did not cross hosts ({r.get('by_host')})")


def soak_summary(r: dict) -> str:
    return (f"{r['requests']} requests, {r['successes']} successes, {r['failures_injected']} failures injected, "
            f"{r['interrupts']} interrupts, {r['kills']} kills ({r['kills_in_commit_window']} in the commit window, "
            f"{r['kills_after_commit']} after the commit), {r['corruptions']} corruptions, "
            f"{r['lost_successes']} lost successes, {r['violations']} violations, "
            f"{r.get('stale_reads', '?')} stale reads; per host {r.get('by_host')}; {r['seconds']} s")


# ------------------------------------------------------------------------------ a refused root

_BACKEND_FIRST_USE = """
import json, sys
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
try:
    FolderCache(sys.argv[1], "refused").begin(RunInfo()).discard()
    out = {"status": "began a transaction"}
except Exception as e:
    out = {"status": "error", "exception_type": type(e).__module__ + "." + type(e).__name__, "message": str(e)}
print(json.dumps(out))
"""


def refusal_check(env: SharedFSEnv, fleet: SharedFleet, expect: str, log=print) -> dict:
    """First use of the root on each host must fail with the typed UnsupportedFilesystemError
    naming ``expect``: a ComfyUI request where the host has a worker (it must fail before
    sampling), else the backend itself (``FolderCache.begin`` in a process on that host); nothing
    may be published."""
    out = {"expect": expect, "requests": []}
    for i, h in enumerate(env.hosts):
        ws = fleet.on(h.name)
        if ws:
            w = ws[0]
            res = w.run(t2v_reuse(1000 + i, "a refused root", cache_name="refused",
                                  filename_prefix=f"refusal/{h.name}"), timeout=180)
            err = res.error or {}
            sampled = sum(1 for e in res.events if e.get("type") == "executing"
                          and (e.get("data") or {}).get("display_node") == T2V.SAMPLER)
            rec = {"host": h.name, "via": f"ComfyUI request on {w.name}", "status": res.status,
                   "seconds": round(res.seconds, 2), "exception_type": err.get("exception_type"),
                   "message": str(err.get("exception_message"))[:1500], "sampled": sampled}
        else:
            t0 = time.monotonic()
            p = subprocess.run(env.host_cmd(h, [sys.executable, "-c", _BACKEND_FIRST_USE, str(env.cache_root(h))]),
                               capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
                               env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
            try:
                got = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                got = {"status": f"rc={p.returncode}", "message": p.stderr[-1500:]}
            rec = {"host": h.name, "via": "FolderCache.begin() in a process on the host", "status": got.get("status"),
                   "seconds": round(time.monotonic() - t0, 2), "exception_type": got.get("exception_type"),
                   "message": str(got.get("message"))[:1500], "sampled": 0}
        out["requests"].append(rec)
        log(f"  refusal on {h.name} ({rec['via']}): {rec['status']} after {rec['seconds']} s, sampled "
            f"{rec['sampled']}x: {rec['exception_type']}: {rec['message'][:300]}")
    out["published"] = committed_caches(env.cache_root())
    out["ok"] = all(r["status"] == "error" and expect in r["message"] and "UnsupportedFilesystemError"
                    in str(r["exception_type"]) and r["sampled"] == 0 for r in out["requests"]) \
        and not out["published"]
    return out


# ------------------------------------------------------------------------------ measurements

def _artifacts(total_mb: int):
    import torch
    g = torch.Generator().manual_seed(0)
    n = max(1, total_mb // 8)
    return [(f"s{i:02d}", torch.randn((8 << 20) // 4, generator=g)) for i in range(n)]   # 8 MB each


def _load_all(root: Path, name: str) -> int:
    with FolderCache(root, name).snapshot() as s:
        vals = [s.load_slot(slot) for slot in sorted(s.manifest["slots"])]
    return len(vals)


def measure_io(env: SharedFSEnv, total_mb: int = 64, repeats: int = 11, log=print) -> dict:
    """A cache's artifacts written on hostA, then load_slot of every slot vs a raw sequential read
    of the same files, through each host's mount (interleaved, medians)."""
    name = "sfs-io"
    t0 = time.perf_counter()
    with FolderCache(env.cache_root(env.hosts[0]), name).begin(RunInfo()) as tx:
        for slot, value in _artifacts(total_mb):
            tx.stage_slot(slot, value, key={"slot": slot})
        tx.commit()
    write_s = time.perf_counter() - t0
    with FolderCache(env.cache_root(), name).snapshot() as s:
        total = sum(e["bytes"] for e in s.manifest["files"].values())
    out = {"bytes": total, "write_mb_s": round(total / 1e6 / write_s, 1)}
    local = Path(tempfile.mkdtemp(prefix="seedreuse-sharedfs-local-"))     # the same bytes on a local disk
    import shutil
    shutil.copytree(env.cache_root() / name, local / name)
    places = [(h.name, env.cache_root(h)) for h in env.hosts] + [("local disk", local)]
    for label, root in places:
        raw_read_fresh(root, name), _load_all(root, name)          # warm-up (and the first cross-host read)
        raw, load = [], []
        for k in range(repeats):
            for which in (("raw", "load") if k % 2 == 0 else ("load", "raw")):
                t = time.perf_counter()
                raw_read_fresh(root, name) if which == "raw" else _load_all(root, name)
                (raw if which == "raw" else load).append(time.perf_counter() - t)
        mb = total / 1e6
        out[label] = {"raw_mb_s": round(mb / med(raw), 1), "load_mb_s": round(mb / med(load), 1),
                      "ratio_load_vs_raw": round(med(raw) / med(load), 2)}
        log(f"  io on {label}: load {out[label]['load_mb_s']} MB/s vs raw {out[label]['raw_mb_s']} MB/s "
            f"(ratio {out[label]['ratio_load_vs_raw']}) over {mb:.0f} MB")
    shutil.rmtree(local, ignore_errors=True)
    FolderCache(env.cache_root(env.hosts[0]), name).clear()
    return out


def _commit_ms(root: Path, name: str, repeats: int) -> list[float]:
    import torch
    value = torch.zeros((1 << 20) // 4)            # 1 MB slot
    cache, ms = FolderCache(root, name), []
    for k in range(repeats + 1):
        tx = cache.begin(RunInfo())
        tx.stage_slot("x", value + k, key={"k": k})
        t0 = time.perf_counter()
        tx.commit()
        if k:                                      # the first commit creates the cache: not counted
            ms.append(1000 * (time.perf_counter() - t0))
    return ms


def measure_commit(env: SharedFSEnv, repeats: int = 5, log=print) -> dict:
    """Transaction.commit wall time on hostA's mount vs on a local disk folder, interleaved."""
    local = Path(tempfile.mkdtemp(prefix="seedreuse-sharedfs-local-"))
    try:
        shared_ms, local_ms = [], []
        for k in range(repeats):
            shared_ms += _commit_ms(env.cache_root(env.hosts[0]), "sfs-commit", 1)
            local_ms += _commit_ms(local, f"c{k}", 1)
    finally:
        import shutil
        shutil.rmtree(local, ignore_errors=True)
    FolderCache(env.cache_root(env.hosts[0]), "sfs-commit").clear()
    out = {"shared_ms": round(med(shared_ms), 1), "local_ms": round(med(local_ms), 1),
           "ratio_shared_vs_local": round(med(shared_ms) / med(local_ms), 1),
           "shared_all_ms": [round(x, 1) for x in shared_ms]}
    log(f"  commit: {out['shared_ms']} ms on the shared mount vs {out['local_ms']} ms on local disk "
        f"(x{out['ratio_shared_vs_local']}), median of {repeats}")
    return out


def queue_to_sampler(w, prompt: dict, timeout: float = 180) -> tuple[float | None, object]:
    """Seconds from queueing to the first 'executing' event of the sampler, and the result."""
    h = w.start_run(prompt)
    deadline, t = time.monotonic() + timeout, None
    try:
        while h.terminal is None:
            ev = h._recv(deadline)
            if t is None and ev is not None and ev.get("type") == "executing":
                d = ev.get("data") or {}
                if T2V.SAMPLER in (str(d.get("node")), str(d.get("display_node"))):
                    t = time.monotonic() - h.t0
    except BaseException:
        _quiet(h.ws.close)
        raise
    return t, h.wait(timeout)


def measure_hits(env: SharedFSEnv, fleet: SharedFleet, repeats: int = 3, log=print) -> dict:
    """One commit on hostA-w0, then encoder hits from hostA-w1 (same host) and hostB-w0 (the
    other host), interleaved, each after /free (so the node really reads the cache)."""
    a = fleet.on("hostA")
    writer, same, cross = a[0], a[1] if len(a) > 1 else a[0], fleet.on("hostB")[0]
    text, name = "a green lamp on a desk", "sfs-hits"
    writer.run(t2v_reuse(1, text, cache_name=name, filename_prefix="hits/w"), timeout=180).raise_for_status()
    times: dict[str, list[float]] = {"same": [], "cross": []}
    seed = 10
    for k in range(repeats + 1):
        order = [("same", same), ("cross", cross)] if k % 2 == 0 else [("cross", cross), ("same", same)]
        for label, w in order:
            for attempt in range(4):     # ComfyUI applies /free between prompts: retry if it came late
                w.free(unload_models=False, settle=0.5 + attempt)
                seed += 1
                t, res = queue_to_sampler(w, t2v_reuse(seed, text, cache_name=name, reuse="require",
                                                       filename_prefix=f"hits/{label}"))
                res.raise_for_status()
                if "101" not in res.cached:
                    break
            acts = {e["data"]["slot"]: e["data"]["action"] for e in res.events
                    if e.get("type") == "seedreuse.slot" and isinstance(e.get("data"), dict)}
            if acts.get("positive") != "reused":
                raise AssertionError(f"{label} hit on {w.name}: slot actions {acts}, served from "
                                     f"ComfyUI's memory: {'101' in res.cached}")
            if k and t is not None:                  # the first round warms each worker up
                times[label].append(t)
    out = {"same_host_s": round(med(times["same"]), 3), "cross_host_s": round(med(times["cross"]), 3),
           "ratio_cross_vs_same": round(med(times["cross"]) / med(times["same"]), 2),
           "same_all_s": [round(x, 3) for x in times["same"]], "cross_all_s": [round(x, 3) for x in times["cross"]]}
    log(f"  hit, queue -> first sampler event: same host {out['same_host_s']} s, other host "
        f"{out['cross_host_s']} s (ratio {out['ratio_cross_vs_same']}), median of {repeats}")
    return out


# ------------------------------------------------------------------------------ one profile

class trusted_fs:
    """SEEDREUSE_TRUSTED_FILESYSTEM=<fstype of the mount> in this process (the operator's override
    of a refusal), restored afterwards."""

    def __init__(self, mount: Path):
        self.fstype = filesystems.mount_of(mount)[1]

    def __enter__(self):
        self.before = os.environ.get(settings.TRUSTED_FILESYSTEM)
        os.environ[settings.TRUSTED_FILESYSTEM] = self.fstype
        filesystems.reset_cache()
        return self

    def __exit__(self, *exc):
        if self.before is None:
            os.environ.pop(settings.TRUSTED_FILESYSTEM, None)
        else:
            os.environ[settings.TRUSTED_FILESYSTEM] = self.before
        filesystems.reset_cache()


def run_profile(profile, out_dir: Path, models_dir: Path, *, requests: int = 8, seed: int = 5,
                measure: bool = False, time_budget_s: float | None = None, trusted: bool = False,
                mandatory_kinds: tuple | None = None, worker_env: dict | None = None, log=print) -> dict:
    """Bring the profile's volume up, probe, (measure,) soak or refusal check, tear down.
    ``mandatory_kinds``: the soak's mandatory phase (SoakConfig.mandatory_kinds; None: all).
    ``trusted``: lift any refusal of this root (SEEDREUSE_TRUSTED_FILESYSTEM=<its fstype>, as an
    operator could) and run the full soak, to see what a refusal protects from (or that it is not
    needed). ``worker_env``: settings for the workers (e.g. a shorter SEEDREUSE_LEASE_S)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_all = time.monotonic()
    refused = bool(profile.refusal) and not trusted
    res: dict = {"profile": profile.name, "fs": profile.fs, "options": profile.options,
                 "version": profile.version(), "refusal_expected": profile.refusal if refused else None}
    env = SharedFSEnv(profile, log=log)
    override = None
    try:
        env.setup()
        res["setup"] = dict(env.timings)
        log(f"== {profile.name}: {res['version']}; up in {env.timings['setup_s']} s; "
            f"mounts {[str(h.mount) for h in env.hosts]}")
        res["probe"] = run_probe(env, log)
        if trusted:
            override = trusted_fs(env.hosts[0].mount).__enter__()
            res["trusted"] = override.fstype
            log(f"  refusal lifted: {settings.TRUSTED_FILESYSTEM}={override.fstype}")
        if measure:
            if refused:      # the pack's own I/O on this root only exists under the override
                with trusted_fs(env.hosts[0].mount) as t:
                    res["measured_with"] = f"{settings.TRUSTED_FILESYSTEM}={t.fstype}"
                    res["io"] = measure_io(env, log=log)
                    res["commit"] = measure_commit(env, log=log)
            else:
                res["io"] = measure_io(env, log=log)
                res["commit"] = measure_commit(env, log=log)
        fleet = SharedFleet(env, out_dir / "workers", models_dir, per_host=(0, 1) if refused else (2, 1),
                            extra_env={**(worker_env or {}),
                                       **({settings.TRUSTED_FILESYSTEM: override.fstype} if override else {})})
        try:
            fleet.start()
            log(f"  started {len(fleet.workers)} workers in {fleet.start_seconds} s")
            res["workers_start_s"] = fleet.start_seconds
            if refused:
                res["refusal"] = refusal_check(env, fleet, profile.refusal, log)
            else:
                if measure:
                    res["hits"] = measure_hits(env, fleet, log=log)
                cfg = soak_config(requests, seed, time_budget_s=time_budget_s, mandatory_kinds=mandatory_kinds)
                soak = CrossHostSoak(fleet, cfg, out_dir / "soak",
                                     log=lambda *a: log("  " + " ".join(str(x) for x in a)))
                soak.run()
                soak.epilogue()
                res["soak"] = soak.report()
                log(format_report(res["soak"]))
                log(f"  stale reads: {res['soak']['stale_reads']} of {res['soak']['cross_host_reads']} cross-host reads")
        except BaseException:
            log(fleet.log_tails(20))
            raise
        finally:
            fleet.stop()
    finally:
        if override is not None:
            override.__exit__(None, None, None)
        env.teardown()
        res["teardown_s"] = env.timings.get("teardown_s")
        res["seconds"] = round(time.monotonic() - t_all, 1)
    (out_dir / "result.json").write_text(json.dumps(res, indent=1, default=str))
    return res
