"""Soak: a serial chain of requests against real ComfyUI workers that share one cache root.

The client sends one request at a time (the serial contract: it waits for the terminal
event before sending the next), each to a random worker (seeded RNG). Requests mix
Encoder Reuse (``t2v_reuse``, reuse auto / require, one of two prompt texts) and Segment
Reuse (``segment_graph``, random N in 0..S-1, random seed; or one of the take-history kinds of
tests/soak/take_model.py: ``extend`` a kept take at N = its segment count S to S + 1 or S + 2
segments, ``longest`` with reuse_prefix_segments = -1, ``from_take`` an older kept take at some
N). Fault kinds:

* ``fail``       SeedReuseTestFail after sampling (t2v: VAEDecode -> CreateVideo; segments:
                 inside the loop body after VAEDecode when N = 0, or between Segment Loop End
                 and Prefix Merge);
* ``interrupt``  SeedReuseTestSlow at the same places; POST /interrupt once it is executing;
* ``kill:*``     SIGKILL of the worker (which is then restarted), triggered by
  - ``late``         a random delay after the last node starts (calibrated on earlier runs);
  - ``tmp-manifest`` ``<name>.tmp/<staging id>/manifest.json`` appearing (+ 0..3 ms);
  - ``.old``         ``<name>.old`` appearing (+ 0..3 ms);
  - ``hold``         the run held in a SeedReuseTestSlow node before its last phase (at the
                     places above): always a kill before the commit, staging and lock left behind;
  - ``success``      the client receiving ``execution_success``: always a kill after the commit
                     (the pack commits before it reports success);
  on a bucket (a fleet with a ``cache_url``: tests/soak/bucket_view.py) ``tmp-manifest`` and
  ``.old`` are replaced by ``upload`` (the first data object the run uploads after its last node
  started: killed while uploading or before its record) and ``record`` (its commit record
  appeared: killed after the publish, before it released its lease and collected).

Coverage is deterministic: the run starts with a *mandatory phase* that plans, in an order
shuffled by the seed, one request per kind of ``MANDATORY`` (fail, interrupt, kill:late,
kill:tmp-manifest, kill:.old, ``resume``: a clean Segment Reuse request with N > 0, and the
clean take-history requests ``extend``, ``longest`` (with a take to resume from) and
``from_take`` (dropped when the workers keep K = 1 take)), each on a request re-planned if
needed so that it can take it (a commit for a kill, a committed version for ``.old`` /
``resume`` / ``extend`` / ``longest``, two kept takes for ``from_take``); a clean kind that an
earlier request of the phase has shown already (an extension is also a resume) is not planned. A planned kind that did not happen (e.g. a kill whose trigger
never came) is planned again on the next request, at most ``max_attempts`` times. When the
mandatory kinds are done, ``kill:hold`` and / or ``kill:success`` are added if no kill so far
landed before / after a commit, so both outcomes are always covered. The commit-window
triggers never depend on speed: the watcher is armed before the prompt is queued and reads
inotify events (queued by the kernel, so a window the run passed while this process had no
CPU is still seen, if late); and when the run committed without the trigger having been seen
(no inotify), the trigger provably happened and the kill lands right after the success. The
time budget and ``requests`` only shorten the random tail that follows (faults dealt from a
seeded deck; a share of its Segment Reuse requests are take-history kinds, which take faults
like any other); they never cut the mandatory phase.

After every step the cache is compared with a model of "the last successful request" and,
for the segment cache, of the kept takes (the latest + up to K-1 older successful takes,
take_model.TakeModel):

* success   -> the committed manifest is the one this request produced (run.prompt_id,
              slots / key text, boundaries, segment section, result.mp4 sha256 == the saved
              output video; the take index: this take new and latest, the K-1 newest takes
              before it kept unchanged, the rest dropped, its boundaries 0..N-1 those of the
              take it resumed from), or unchanged for an all-hit Encoder Reuse request;
* error / interrupted -> the committed manifest is unchanged (byte-for-byte same dict);
* killed    -> unchanged (the request failed) or this request's (it counts as a success);
              anything else is a corruption; a client that saw success must find this
              request's version (else: a lost success).

and the work done is checked: a reused slot means stand-in encode/loader counts of 0, a
segment run of S' segments samples exactly S' - N times (``executing`` events whose
display_node is the sampler) with N the requested one or, for -1, the longest valid prefix the
model predicts (the ``seedreuse.segments`` event and the segment section must say so too), the
result video decodes to P(S') frames with audio whose packets are the encoding of its own track,
its first P(N) frames equal the chosen take's result. ``reuse_backend.check`` must report
no problem after every step, except the repairable leftovers of a kill (stale staging, dead
owner's lock, ``.old``), which the next request on that cache must clean up. The checks read
the cache through the store view (``store_view``: folder_view.FolderView, or for a bucket
bucket_view.BucketView through the store interface, where what a kill leaves is garbage
that a collection removes once its lease expired, judged at the end by ``settle``).
"""
from __future__ import annotations

import hashlib
import json
import random
import socket
import threading
import time
import urllib.error
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS_DIR.parent

import numpy as np

from seedreuse_lab import graphs
from seedreuse_lab.graphs import T2V
from seedreuse_lab.reuse_graphs import SEG, SESSION, segment_graph, t2v_reuse
from seedreuse_lab.worker import ComfyWorker, HTTPFailure, WorkerError, WorkerGroup
from reuse_backend.media import segments as segmod
from reuse_backend.media import video
from reuse_backend.errors import ReuseError

from .burst import run_bursts
from .folder_view import FolderView
from .take_model import VARIANTS, SoakFailure, TakeCorruption, TakeModel, fleet_keep

T2V_CACHE, SEG_CACHE = "default", "segments"
F, M, TOTAL, FPS = 9, 3, 27, 16.0
S = segmod.segment_count(TOTAL, F, M)      # of a plain segment request (take-history kinds: up to SMAX)
TEXTS = ("a red fox in the snow", "a blue bird on a wire")
SEG_TEXT = "a talking test head"
FAULT_NODE = "300"
KILL_ERRORS = (WorkerError, HTTPFailure, urllib.error.URLError, ConnectionError, OSError)


def mandatory_kinds(kill_targets) -> tuple:
    """The mandatory phase: every kind once, in a seeded order, before any time budget applies;
    the commit-phase kills are the store's (FolderView / BucketView ``kill_targets``)."""
    return ("fail", "interrupt", "kill:late") + tuple(f"kill:{t}" for t in kill_targets) + ("resume",) + VARIANTS


MANDATORY = mandatory_kinds(FolderView.kill_targets)
CLEAN_KINDS = ("resume",) + VARIANTS   # clean successes: any request that shows one covers it
# kill outcomes that must be covered, and the kind that produces each whatever the speed
TOP_UPS = (("kill-before-commit", "kill:hold"), ("kill-after-commit", "kill:success"))
HOLD_S = 120.0      # a kill:hold run sleeps this long in its slow node (killed well before)


# ------------------------------------------------------------------ configuration / records

@dataclass
class SoakConfig:
    requests: int = 24
    seed: int = 20240601
    fail: float = 0.15          # share of requests with an injected node failure
    interrupt: float = 0.12     # ... with an interrupt
    kill: float = 0.12          # ... with a SIGKILL in the last phase
    min_each: int = 2           # at least this many of each fault (mandatory phase + tail)
    time_budget_s: float | None = None   # no new tail request after this (never cuts the mandatory phase)
    mandatory: bool = True      # start with the mandatory phase (MANDATORY, then TOP_UPS)
    mandatory_kinds: tuple | None = None   # a subset of MANDATORY for the phase (None: all of it)
    max_attempts: int = 3       # a mandatory kind that did not happen is planned again, this often in all
    request_timeout_s: float = 240.0
    t2v_share: float = 0.45
    variant_share: float = 0.5  # tail: share of Segment Reuse requests drawn as a take-history kind
    verbose: bool = True
    # concurrent clients (tests/soak/burst.py): once after the mandatory phase, requests sent at
    # the same moment across the workers (same and different keys), 0 contention failures
    bursts: bool = True
    # a cache root the pack must refuse (e.g. sshfs): every request that reaches a SeedReuse
    # node must fail with one of these messages, nothing may ever be published
    expect_refused: tuple = ()


@dataclass
class Request:
    idx: int
    kind: str                 # "t2v" | "segment"
    cache: str
    worker: int
    mode: str                 # auto | require
    seed: int
    text: str
    N: int = 0
    fault: str = "none"       # none | fail | interrupt | kill
    where: str = ""           # fault location (fail, interrupt, kill hold)
    kill_mode: str = ""       # late | tmp-manifest | .old | hold | success
    prediction: str = ""      # commit | hit | reject
    reject_reason: str = ""
    follow_up: bool = False
    mandatory: str = ""       # the mandatory kind this request serves ("" in the tail)
    segments: int = S         # S' of a segment request (its total_frames is P(S'))
    from_take: int = 0        # the Session's from_take (0: the latest take)
    variant: str = ""         # "" | extend | longest | from_take (take_model.VARIANTS)
    use_N: int = 0            # the N the pack must use (N, or the predicted longest valid prefix)
    chosen: int = 0           # the take it resumes from (0: none, N = 0)

    @property
    def kind_planned(self) -> str:
        return f"kill:{self.kill_mode}" if self.fault == "kill" else self.fault


@dataclass
class Step:
    idx: int
    req: dict
    outcome: str              # success | error | interrupted | killed
    classified: str           # e.g. success-commit, success-hit, rejected, failed, interrupted, kill-before-commit
    seconds: float
    sampled: int | None = None
    version_before: str | None = None
    version_after: str | None = None
    leftovers: list = field(default_factory=list)
    notes: list = field(default_factory=list)


@dataclass
class CacheModel:
    name: str
    manifest: dict | None = None    # the committed manifest of the last successful request
    text: str | None = None         # t2v: the prompt text of the committed slot
    result_copy: Path | None = None  # segments: a copy of the committed result.mp4
    takes: TakeModel | None = None  # segments: the kept takes
    leftovers: set = field(default_factory=set)   # repairable problems a kill left behind
    lock_owner: dict | None = None  # the killed writer's lock, when it was left behind

    @property
    def version(self):
        return self.manifest["version"] if self.manifest else None

    @property
    def pending(self) -> bool:
        """A kill left something the next writer must recover (also a dead writer's lock that
        check() from a third host still calls live: only its own host can prove it dead)."""
        return bool(self.leftovers or self.lock_owner)


# ------------------------------------------------------------------ fleets

class LocalFleet:
    """N workers on this host (one process each) sharing one cache root."""

    def __init__(self, base: Path, models_dir: Path, n: int = 3):
        self.base = Path(base)
        self.cache_root = self.base / "cache"
        self.group = WorkerGroup(self.base, n, models_dir=models_dir, cache_root=self.cache_root,
                                 name_prefix="soak")
        self.workers: list[ComfyWorker] = list(self.group)

    def start(self) -> "LocalFleet":
        self.group.start()
        for w in self.workers:
            graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
        return self

    def stop(self) -> None:
        self.group.stop()

    def host_of(self, w: ComfyWorker) -> str:
        return socket.gethostname()    # what the lock records as the owner's host

    def restart(self, w: ComfyWorker) -> None:
        w.start()

    def describe(self) -> str:
        return f"{len(self.workers)} workers on this host, cache root {self.cache_root}"


def store_view(fleet):
    """What the soak's checks read: the fleet's cache folder, or its bucket (a fleet with a
    ``cache_url``, tests/object_store/netns_rgw.py) through the store interface."""
    url = getattr(fleet, "cache_url", None)
    if url is None:
        return FolderView(fleet.cache_root)
    from .bucket_view import BucketView       # boto3 only for a bucket
    return BucketView(url, fleet.cache_root, host_roots=fleet.local_roots())


# ------------------------------------------------------------------ helpers

def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def sampled(events) -> int:
    return sum(1 for e in events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)


def t2v_sampled(events) -> int:
    return sum(1 for e in events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == T2V.SAMPLER)


def slot_actions(res, nodes: dict) -> dict:
    """slot -> action from the seedreuse.slot events; an Encode-or-Reuse node that ComfyUI served
    from its own in-memory cache (same inputs, no transaction ended since) counts as reused."""
    acts = {e["data"]["slot"]: e["data"]["action"] for e in res.events
            if e.get("type") == "seedreuse.slot" and isinstance(e.get("data"), dict)}
    for slot, nid in nodes.items():
        if slot not in acts and nid in res.cached:
            acts[slot] = "reused"
    return acts


def adopted(res, slot: str) -> bool:
    """``slot`` was staged from another run's published single-flight encoding of the same key
    (reused, its reason naming single flight): in the serial chain, an entry that a run killed
    after encoding left (it stays usable while its claim is live: store/claim.py)."""
    return any(e["data"].get("slot") == slot and e["data"].get("action") == "reused"
               and "single flight" in str(e["data"].get("reason", "")) for e in res.events
               if e.get("type") == "seedreuse.slot" and isinstance(e.get("data"), dict))


class Soak:
    def __init__(self, fleet, cfg: SoakConfig, out_dir: Path, log=print):
        self.fleet, self.cfg = fleet, cfg
        self.root = Path(fleet.cache_root)
        self.store = store_view(fleet)       # what the checks read: the folder, or the bucket
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        # three streams, so that the plan (requests, faults, their order) never depends on
        # timing: rng plans, jit draws kill / interrupt delays, frng picks follow-up workers
        self.rng = random.Random(cfg.seed)
        self.jit = random.Random(cfg.seed * 7919 + 1)
        self.frng = random.Random(cfg.seed * 7919 + 2)
        self.log = log if cfg.verbose else (lambda *a, **k: None)
        self.keep = fleet_keep(fleet.workers)     # K, the takes the workers keep
        self.models = {T2V_CACHE: CacheModel(T2V_CACHE),
                       SEG_CACHE: CacheModel(SEG_CACHE, takes=TakeModel(self.keep, F, M, FPS, self.out))}
        self.steps: list[Step] = []
        self.c = Counter()
        self.violations: list[str] = []
        self.corruptions: list[str] = []
        self.lost: list[str] = []
        self.calib = {"t2v": 0.15, "segment": 0.15}   # seconds from last node start to terminal
        self.seeds_used: set = set()
        # mandatory phase: the kinds still to plan (head first), per-kind bookkeeping
        self.queue: list[str] = []
        if cfg.mandatory and not cfg.expect_refused:   # on a refused root no fault can ever apply
            every = mandatory_kinds(self.store.kill_targets)
            kinds = every if cfg.mandatory_kinds is None else cfg.mandatory_kinds
            self.queue = [k for k in every if k in kinds and (k != "from_take" or self.keep > 1)]
            self.rng.shuffle(self.queue)
        self.cov: dict[str, dict] = {k: self._cov_entry() for k in self.queue}
        self.mandatory_active = bool(self.queue)
        self.mandatory_planned = 0     # non-follow-up requests planned in the mandatory phase
        self.mandatory_steps = 0       # requests run in it (follow-ups included)
        self.mandatory_seconds = None
        self.max_mandatory = cfg.max_attempts * (len(MANDATORY) + len(TOP_UPS)) + 6
        self.deck: list[str] | None = None    # the tail's faults, dealt when the mandatory phase ends
        self.followups: list[tuple[str, int]] = []   # (cache, worker index) forced next
        self.t_start = None
        self.restarting: dict[str, tuple] = {}   # worker name -> (restart thread, its errors)
        self.bursts: list[dict] | None = None    # what the concurrent bursts did (burst.py)

    @staticmethod
    def _cov_entry() -> dict:
        return {"attempts": 0, "happened": 0, "outcomes": []}

    # -------------------------------------------------------------- planning
    def _new_seed(self) -> int:
        while True:
            s = self.rng.randrange(1, 2**31)
            if s not in self.seeds_used:
                self.seeds_used.add(s)
                return s

    def _predict(self, req: Request) -> None:
        m = self.models[req.cache]
        if self.cfg.expect_refused:
            req.prediction, req.reject_reason = "reject", "refused"
            return
        # A killed writer's lock on another host (it died inside its commit): only its lease
        # (120 s) can expire it. Runs take the writer lock only to commit, and a commit waits for
        # it (SEEDREUSE_COMMIT_WAIT_S, the lease + 60 s by default): such a request is predicted
        # like any other and succeeds once the dead lock's lease has expired (issue 27).
        if req.kind == "t2v":
            if m.manifest is None:
                req.prediction = "reject" if req.mode == "require" else "commit"
                req.reject_reason = "no committed cache" if req.mode == "require" else ""
            elif m.text == req.text:
                req.prediction = "hit"
            elif req.mode == "require":
                req.prediction, req.reject_reason = "reject", "key mismatch"
            else:
                req.prediction = "commit"
        else:
            take, req.use_N, why = m.takes.predict(req.segments, req.N, req.from_take)
            req.chosen = take.number if take is not None and req.use_N > 0 else 0
            if why == "no committed cache" or (m.manifest is None and req.mode == "require"):
                req.prediction, req.reject_reason = "reject", "no committed cache"
            elif why:     # the planner never asks for this: a soak bug, not the pack's
                raise ValueError(f"request {req.idx}: planned {why} (S'={req.segments} N={req.N} "
                                 f"from_take={req.from_take}, kept {[t.number for t in m.takes.takes]})")
            else:
                req.prediction = "commit"

    def _draw(self, idx: int, forced: tuple[str, int] | None) -> Request:
        """A random request (plan RNG); a follow-up keeps its cache and worker."""
        rng = self.rng
        if forced is not None:
            cache, worker = forced
        else:
            cache = T2V_CACHE if rng.random() < self.cfg.t2v_share else SEG_CACHE
            worker = rng.randrange(len(self.fleet.workers))
            # a worker of the same host that is up, when the drawn one is still restarting
            # (a function of the plan, not of timing: a worker restarts from its kill until
            # its next request)
            me = self.fleet.host_of(self.fleet.workers[worker])
            worker = self._not_restarting([worker] + [i for i, x in enumerate(self.fleet.workers)
                                                      if i != worker and self.fleet.host_of(x) == me], None)[0]
        if cache == T2V_CACHE:
            req = Request(idx, "t2v", cache, worker, rng.choice(["auto", "auto", "require"]),
                          self._new_seed(), rng.choice(TEXTS))
        else:
            req = Request(idx, "segment", cache, worker, rng.choice(["auto"] * 4 + ["require"]),
                          self._new_seed(), SEG_TEXT, N=rng.randrange(S))
            if rng.random() < self.cfg.variant_share:
                self._make_variant(req, rng.choice(VARIANTS))
        req.follow_up = forced is not None
        self._predict(req)
        return req

    def _make_variant(self, req: Request, kind: str) -> bool:
        """Turn a segment request into a take-history request of ``kind`` (False: the kept takes
        allow none yet, ``req`` unchanged)."""
        p = self.models[SEG_CACHE].takes.plan(kind, self.rng)
        if p is None:
            return False
        req.segments, req.N, req.from_take = p
        req.variant, req.mode = kind, "auto"
        return True

    def _takes(self, req: Request, kind: str) -> bool:
        """Can this request take the mandatory kind (and make it happen)?"""
        if req.prediction == "reject":
            return False
        if kind.startswith("kill:") and req.prediction != "commit":
            return False
        if kind.startswith("kill:") and self.store.needs_version(kind[5:]) and self.models[req.cache].manifest is None:
            return False                     # a first commit moves nothing aside (.old)
        if kind == "resume" and (req.kind != "segment" or req.use_N == 0 or req.prediction != "commit"):
            return False
        if kind in VARIANTS and (req.variant != kind or req.prediction != "commit" or req.use_N == 0):
            return False
        return True

    def _fit(self, req: Request, kind: str) -> tuple[Request, bool]:
        """``req``, or the same request re-planned (same index, seed and worker; a follow-up keeps
        its cache) into an ``auto`` request that can take ``kind``. If none can (no committed
        version yet for ``.old`` / ``resume``), the re-planned request runs clean and creates one."""
        if self._takes(req, kind):
            return req, True
        seg_only = kind == "resume" or kind in VARIANTS
        caches = [req.cache] if req.follow_up else ([SEG_CACHE] if seg_only else [SEG_CACHE, T2V_CACHE])
        fallback = None
        for cache in caches:
            m = self.models[cache]
            if cache == SEG_CACHE:
                if m.manifest is None:
                    n = 0
                else:
                    n = self.rng.randrange(1, S) if kind == "resume" else self.rng.randrange(S)
                cand = Request(req.idx, "segment", cache, req.worker, "auto", req.seed, SEG_TEXT, N=n)
                if kind in VARIANTS:    # else (no take to build on yet) a clean request that makes one
                    self._make_variant(cand, kind)
            else:
                text = next((t for t in TEXTS if t != m.text), TEXTS[0]) if m.manifest is not None else req.text
                cand = Request(req.idx, "t2v", cache, req.worker, "auto", req.seed, text)
            cand.follow_up = req.follow_up
            self._predict(cand)
            if self._takes(cand, kind):
                return cand, True
            if fallback is None and cand.prediction == "commit":
                fallback = cand
        return (fallback or req), False

    def _where(self, req: Request) -> str:
        if req.kind == "t2v":
            return "after VAEDecode"
        # a node inside the body changes the segment key: only for N = 0
        return self.rng.choice(["loop body", "before merge"]) if req.N == 0 else "before merge"

    def _apply(self, req: Request, kind: str) -> None:
        if kind in ("fail", "interrupt"):
            req.fault, req.where = kind, self._where(req)
        elif kind.startswith("kill:"):
            req.fault, req.kill_mode = "kill", kind.split(":", 1)[1]
            if req.kill_mode == "hold":
                req.where = self._where(req)

    def _plan(self, idx: int, forced: tuple[str, int] | None) -> Request:
        req = self._draw(idx, forced)
        if self.mandatory_active:
            if not self.queue:
                return req
            kind = self.queue[0]
            req, fits = self._fit(req, kind)
            if fits:
                self.queue.pop(0)
                self._apply(req, kind)
                req.mandatory = kind
                self.cov[kind]["attempts"] += 1
            return req
        fault = self.deck.pop(0) if self.deck else "none"
        applicable = req.prediction != "reject" and (fault != "kill" or req.prediction == "commit")
        if fault != "none" and not applicable:
            self.deck.insert(0, fault)          # deferred to the next request that can take it
            fault = "none"
        if fault == "kill":
            mode = self.rng.choice(["late", "fs", "fs"])
            if mode == "fs":
                mode = self.rng.choice(self.store.kill_targets)
                if self.store.needs_version(mode) and self.models[req.cache].manifest is None:
                    mode = self.store.kill_targets[0]      # no version to move aside yet (.old)
            self._apply(req, f"kill:{mode}")
        elif fault != "none":
            self._apply(req, fault)
        return req

    def _happened(self, req: Request, step: Step, kind: str | None = None) -> bool:
        kind, cls = kind or req.mandatory, step.classified
        if kind == "fail":
            return cls == "failed"
        if kind == "interrupt":
            return cls == "interrupted"
        if kind == "kill:hold":
            return cls == "kill-before-commit"
        if kind == "kill:success":
            return cls == "kill-after-commit"
        if kind.startswith("kill:"):
            return step.outcome == "killed" and cls in ("kill-before-commit", "kill-after-commit")
        if kind == "resume":
            return cls == "success-commit" and req.use_N > 0
        if kind in VARIANTS:
            return cls == "success-commit" and req.variant == kind and req.use_N > 0
        return False

    def _account(self, req: Request, step: Step) -> None:
        """Mandatory bookkeeping after a step: retry a kind that did not happen, add top-ups."""
        if not self.mandatory_active:
            return
        self.mandatory_steps += 1
        if req.mandatory:
            cov = self.cov[req.mandatory]
            cov["outcomes"].append(step.classified or "violation")
            if self._happened(req, step):
                cov["happened"] += 1
            elif cov["attempts"] < self.cfg.max_attempts:
                self.queue.insert(0, req.mandatory)      # planned again on the next request
                step.notes.append(f"mandatory {req.mandatory} did not happen: planned again")
            else:
                step.notes.append(f"mandatory {req.mandatory} did not happen in {cov['attempts']} attempts")
        # a clean kind still waiting that this request has shown already (an extension is also a
        # resume with N > 0; a drawn request may be a take-history kind): covered, not planned again
        for kind in [k for k in self.queue if k in CLEAN_KINDS and not self.cov[k]["attempts"]]:
            if self._happened(req, step, kind):
                self.queue.remove(kind)
                cov = self.cov[kind]
                cov["attempts"] += 1
                cov["happened"] += 1
                cov["outcomes"].append(f"{step.classified} (request {req.idx})")
        if not self.queue:
            for outcome, kind in TOP_UPS:
                if not self.c[f"outcome:{outcome}"] and kind not in self.cov:
                    self.cov[kind] = self._cov_entry()
                    self.queue.append(kind)

    def _end_mandatory(self) -> None:
        self.mandatory_active = False
        self.mandatory_seconds = round(time.monotonic() - self.t_start, 1)
        self.queue.clear()
        # the tail's deck: the configured shares of the remaining requests, topped up to min_each
        n = max(0, self.cfg.requests - self.mandatory_planned)
        done = Counter(k.split(":", 1)[0] for k in self.cov)
        counts = {k: max(self.cfg.min_each - done[k], round(n * getattr(self.cfg, k)))
                  for k in ("fail", "interrupt", "kill")}
        deck = [k for k, v in counts.items() for _ in range(v)]
        deck += ["none"] * max(0, n - len(deck))
        self.rng.shuffle(deck)
        self.deck = deck

    def _prompt(self, req: Request) -> tuple[dict, str]:
        if req.kind == "t2v":
            p = t2v_reuse(req.seed, req.text, cache_name=req.cache, reuse=req.mode,
                          filename_prefix=f"soak/t2v_{req.idx:03d}")
            last, edge = T2V.SAVE, (T2V.DECODE, 0, T2V.VIDEO, "images")
        else:
            p = segment_graph("ref.png", req.seed, prefix_segments=req.N, reuse=req.mode, cache_name=req.cache,
                              F=F, M=M, total_frames=segmod.total_frames(req.segments, F, M), fps=FPS,
                              prompt_text=SEG_TEXT)
            if req.from_take:
                p[SESSION]["inputs"]["from_take"] = req.from_take
            p[SEG.MERGE]["inputs"]["filename_prefix"] = f"soak/seg_{req.idx:03d}"
            last = SEG.MERGE
            edge = ((SEG.DECODE, 0, SEG.BOUNDARY, "images") if req.where == "loop body"
                    else (SEG.END, 0, SEG.MERGE, "segments"))
        if req.fault == "fail":
            graphs.insert_between(p, *edge, "SeedReuseTestFail",
                                  {"fail": True, "message": f"soak: injected failure in request {req.idx}"},
                                  input_name="value", node_id=FAULT_NODE)
        elif req.fault == "interrupt":
            graphs.insert_between(p, *edge, "SeedReuseTestSlow", {"seconds": 60.0},
                                  input_name="value", node_id=FAULT_NODE)
        elif req.fault == "kill" and req.kill_mode == "hold":
            graphs.insert_between(p, *edge, "SeedReuseTestSlow", {"seconds": HOLD_S},
                                  input_name="value", node_id=FAULT_NODE)
        return p, last

    # -------------------------------------------------------------- running one request
    def _kill_worker(self, w: ComfyWorker, info: dict) -> None:
        if info.get("killed"):
            return
        info["killed"] = True
        info["kill_at"] = time.monotonic()
        info["pid"] = w.proc.pid if w.proc is not None else None
        try:
            try:    # a note for the report: it must never stand in the way of the kill
                info["fs_state"] = self.store.state(info.get("cache"))
            except (OSError, ReuseError) as e:
                info["fs_state"] = [f"unreadable: {e}"]
            w.kill()
        finally:
            info["kill_done"].set()

    def _fs_watch(self, watch, w: ComfyWorker, info: dict, stop: threading.Event,
                  extra_delay: float) -> None:
        """Kill ``w`` when ``watch`` sees its trigger; once ``stop`` is set, one last look (the
        events of a commit are queued before the client can hear of its success)."""
        tick = watch.tick
        try:
            while True:
                stopping = stop.is_set()
                if watch.seen(0 if stopping else tick):
                    info["trigger"] = watch.target + (" (seen after the run ended)" if stopping else "")
                    if extra_delay:
                        time.sleep(extra_delay)
                    self._kill_worker(w, info)
                    return
                if stopping:
                    return
        except Exception as e:   # noqa: BLE001 - reported; the run goes on unkilled
            info["watch_error"] = f"{type(e).__name__}: {e}"

    def _run(self, req: Request, w: ComfyWorker, prompt: dict, last: str):
        """Returns (RunResult or None, events seen, kill info)."""
        info: dict = {"cache": req.cache, "kill_done": threading.Event()}
        stop = threading.Event()
        mode = req.kill_mode if req.fault == "kill" else ""
        watch = watcher = None
        timers: list[threading.Timer] = []
        if mode in self.store.kill_targets:   # armed before the prompt is queued: every transition counts
            watch = self.store.watch(req.cache, mode)
            info["watch"] = watch.via
        h = w.start_run(prompt)
        info["prompt_id"] = h.prompt_id
        if watch is not None:
            delay = self.jit.choice([0.0, self.jit.uniform(0, 0.003)])
            info["delay"] = delay
            watcher = threading.Thread(target=self._fs_watch, args=(watch, w, info, stop, delay), daemon=True)
            watcher.start()
        deadline = time.monotonic() + self.cfg.request_timeout_s
        t_last = None
        res = None
        try:
            while h.terminal is None:
                ev = h._recv(deadline)
                if ev is None or ev.get("type") != "executing":
                    continue
                data = ev.get("data") or {}
                node = str(data.get("node"))
                at_fault = FAULT_NODE in (node, str(data.get("display_node")))
                if at_fault and req.fault == "interrupt" and not info.get("interrupted"):
                    info["interrupted"] = True
                    d = self.jit.uniform(0.0, 0.3)
                    t = threading.Timer(d, lambda: w.interrupt(h.prompt_id))
                    timers.append(t)
                    t.start()
                if at_fault and mode == "hold" and not info.get("hold_seen"):
                    # the run now sleeps HOLD_S s in the slow node: the kill lands before its commit
                    info["hold_seen"], info["trigger"] = True, "held in the slow node"
                    d = info["delay"] = self.jit.uniform(0.0, 0.3)
                    t = threading.Timer(d, self._kill_worker, args=(w, info))
                    timers.append(t)
                    t.start()
                if node == last and t_last is None:
                    t_last = time.monotonic()
                    if watch is not None:
                        watch.last_node_started()
                    if mode == "late":
                        d = self.jit.uniform(0.0, 1.3 * self.calib[req.kind])
                        info["delay"], info["trigger"] = d, "late"
                        t = threading.Timer(d, self._kill_worker, args=(w, info))
                        timers.append(t)
                        t.start()
            t_end = time.monotonic()
            info["terminal"] = h.terminal
            ok = h.terminal["type"] == "execution_success"
            if mode == "success" and ok:
                info["trigger"] = "execution_success"     # the commit is done before this message
                self._kill_worker(w, info)
            if t_last is not None and ok and req.fault == "none":
                self.calib[req.kind] = 0.5 * self.calib[req.kind] + 0.5 * (t_end - t_last)
            for t in timers:
                t.join()
            if watcher is not None:
                stop.set()
                watcher.join()
                if not info.get("killed") and ok and watch.implied_by_commit(h.prompt_id):
                    # the run committed, so it passed the trigger (no event was seen: no inotify
                    # here, or the staging directory came and went before it could be watched)
                    info["trigger"] = f"{mode} (implied by the commit, killed after it)"
                    self._kill_worker(w, info)
            res = h.wait(self.cfg.request_timeout_s)
        except KILL_ERRORS as e:
            if not info.get("killed"):
                raise
            info["client_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        finally:
            stop.set()
            for t in timers:
                t.cancel() if not info.get("killed") else None
            if watcher is not None:
                watcher.join(timeout=5)
            if watch is not None:
                watch.close()
            try:
                h.ws.close()
            except Exception:
                pass
        info["cached"] = list(h.cached)
        info["events"] = list(h.events)
        if info.get("killed"):
            info["kill_done"].wait(60)        # the killer thread must be done with the worker
            info["client_saw"] = h.terminal["type"] if h.terminal else None
            return None, list(h.events), info
        return res, list(h.events), info

    # -------------------------------------------------------------- the chain
    def run(self) -> dict:
        try:
            return self._run_all()
        finally:
            for w in self.fleet.workers:     # never leave a worker starting after the fleet stops
                self._wait_restarted(w, check=False)

    def _restart_in_background(self, w) -> None:
        """Restart a killed worker on a thread (its start is ~10 s of imports): the next
        requests run on the other workers meanwhile; one for this worker waits for it."""
        errors: list = []

        def restart():
            try:
                self.fleet.restart(w)
                graphs.write_test_image(Path(w.input_dir) / "ref.png", seed=7)
            except BaseException as e:   # re-raised by _wait_restarted
                errors.append(e)

        t = threading.Thread(target=restart, name=f"soak-restart-{w.name}", daemon=True)
        t.start()
        self.restarting[w.name] = (t, errors)

    def _wait_restarted(self, w, check: bool = True) -> float:
        """Seconds waited for a restart of ``w`` still running (0 when none was)."""
        got = self.restarting.pop(w.name, None)
        if got is None:
            return 0.0
        t, errors = got
        t0 = time.monotonic()
        t.join()
        if errors and check:
            raise SoakFailure(f"worker {w.name} did not restart after its kill: {errors[0]}") from errors[0]
        return time.monotonic() - t0

    def _run_all(self) -> dict:
        self.t_start = time.monotonic()
        if not self.mandatory_active:
            self._end_mandatory()
        idx = planned = 0
        while True:
            forced = self.followups.pop(0) if self.followups else None
            if forced is None and self._burst_due():
                self.store.settle(list(self.models), self.log)    # a bucket: what killed runs left is gone
                self.bursts = run_bursts(self, idx + 1)
                idx += 1
                continue
            if forced is None:
                if self.mandatory_active and (not self.queue or self.mandatory_planned >= self.max_mandatory):
                    self._end_mandatory()          # done (or out of bounded attempts: reported)
                if not self.mandatory_active:
                    # the tail: cut by the request count or the time budget, never the mandatory phase
                    if planned >= self.cfg.requests:
                        break
                    if self.cfg.time_budget_s is not None and time.monotonic() - self.t_start > self.cfg.time_budget_s:
                        self.c["stopped_by_time_budget"] = 1
                        break
                else:
                    self.mandatory_planned += 1
                planned += 1
            idx += 1
            req = self._plan(idx, forced)
            self._step(req)
        # settle: every cache must end clean (a kill at the very end leaves leftovers)
        for name, m in self.models.items():
            if m.pending:
                idx += 1
                hosts = [i for i, w in enumerate(self.fleet.workers)
                         if m.lock_owner is None or self.fleet.host_of(w) == m.lock_owner.get("host")]
                req = self._plan(idx, (name, self._not_restarting(hosts, None)[0]))
                req.fault, req.kill_mode, req.where = "none", "", ""
                self._step(req)
        if self.cfg.bursts and self.bursts is None and not self.cfg.expect_refused:
            self.store.settle(list(self.models), self.log)
            self.bursts = run_bursts(self, idx + 1)      # the tail never left the caches clean before
        for w in self.fleet.workers:
            self._wait_restarted(w)
        for name in self.models:
            probs = self.store.problems(name)
            if probs:
                self.corruptions.append(f"end: check({name}) reports {[str(p) for p in probs]}")
        return self.report()

    def _burst_due(self) -> bool:
        """The bursts run once, after the mandatory phase, when no kill's leftovers are pending (on a
        bucket they expire: the burst first settles them, BucketView.settle)."""
        return (self.cfg.bursts and self.bursts is None and not self.cfg.expect_refused
                and not self.mandatory_active and not any(m.pending for m in self.models.values()))

    def _step(self, req: Request) -> None:
        w = self.fleet.workers[req.worker]
        waited = self._wait_restarted(w)
        m = self.models[req.cache]
        before = m.version
        try:
            w.reset_counts()
        except KILL_ERRORS as e:
            raise SoakFailure(f"worker {w.name} is not answering before request {req.idx}: {e}") from e
        prompt, last = self._prompt(req)
        t0 = time.monotonic()
        res, events, info = self._run(req, w, prompt, last)
        secs = time.monotonic() - t0
        step = Step(req.idx, asdict(req), "killed" if res is None else res.status, "", secs,
                    version_before=before)
        if waited:
            step.notes.append(f"waited {waited:.1f}s for {w.name}'s restart")
        try:
            touched = False
            if res is None:
                self._after_kill(req, w, events, info, step)
            else:
                counts = w.counts()
                # did a SeedReuse node really execute (begin a transaction, i.e. run recovery)?
                touched = any(n in res.executed for n in ("101", "105", SEG.START))
                self._after_run(req, w, res, counts, step)
            self._check_all(req, step, touched)
        except SoakFailure as e:
            self.violations.append(f"request {req.idx} ({req.kind}, fault {req.fault}): {e}")
            step.notes.append(f"VIOLATION: {e}")
            self._resync()
        step.version_after = self.models[req.cache].version
        self.steps.append(step)
        self.c["requests"] += 1
        self.c[f"outcome:{step.classified}"] += 1
        self._account(req, step)
        fault = req.kind_planned + (f" ({req.where})" if req.where else "")
        seg = (f"N={req.N}" + (f"->{req.use_N}" if req.N < 0 else "") + f"/S'={req.segments}"
               + (f" from_take={req.from_take}" if req.from_take else "") + (f" {req.variant}" if req.variant else "")
               ) if req.kind == "segment" else "-"
        self.log(f"[soak {req.idx:3d}] {self.fleet.host_of(w)}/{w.name:7s} {req.kind:7s} mode={req.mode:7s} "
                 f"{seg} text={req.text[:12]!r:14s} fault={fault:17s} "
                 f"{'[M] ' if req.mandatory else ''}pred={req.prediction:6s} -> {step.classified} ({secs:.1f}s)"
                 + (f" [{'; '.join(step.notes)}]" if step.notes else ""))

    def _resync(self) -> None:
        """After a violation: take the caches as they are, so later steps are judged on their own."""
        for name, m in self.models.items():
            try:
                actual = self._snapshot_manifest(name)
            except SoakFailure:
                actual = None
            m.manifest = actual
            m.leftovers = {p.code for p in self.store.problems(name) if p.code in self.store.repairable}
            if actual is None:
                m.text, m.result_copy = None, None
            elif name == T2V_CACHE:
                fields = json.dumps(actual["slots"].get("positive", {}).get("key", {}).get("fields"))
                m.text = next((t for t in TEXTS if json.dumps(t)[1:-1] in fields), None)
            elif "result.mp4" in actual["files"]:
                m.result_copy = self.out / f"resync_{len(self.steps):03d}.mp4"
                self.store.copy(name, "result.mp4", m.result_copy)
            if m.takes is not None:
                m.takes.resync(actual, self.store, name, f"{len(self.steps):03d}")

    # -------------------------------------------------------------- verification
    def _snapshot_manifest(self, name: str):
        try:
            snap = self.store.snapshot(name)
        except ReuseError as e:
            self.corruptions.append(f"cache '{name}' unreadable: {e.message}")
            raise SoakFailure(f"cache '{name}' unreadable: {e}") from e
        if snap is None:
            return None
        with snap:
            return json.loads(json.dumps(snap.manifest))

    def _expect_unchanged(self, req: Request, what: str) -> dict | None:
        m = self.models[req.cache]
        actual = self._snapshot_manifest(req.cache)
        if actual != m.manifest:
            msg = (f"{what}: the committed cache changed (version {m.version} -> "
                   f"{actual['version'] if actual else None}, run {actual['run'] if actual else None})")
            self.corruptions.append(f"request {req.idx}: {msg}")
            raise SoakFailure(msg)
        return actual

    def _verify_commit(self, req: Request, actual: dict | None, prompt_id: str, output: Path | None,
                       step: Step) -> None:
        """``actual`` must be the manifest this request produced; update the model."""
        m = self.models[req.cache]
        if actual is None or actual.get("version") == m.version:
            msg = f"success not published: cache version still {m.version}"
            self.lost.append(f"request {req.idx}: {msg}")
            raise SoakFailure(msg)
        if actual["run"].get("prompt_id") != prompt_id:
            msg = f"committed version {actual['version']} belongs to prompt {actual['run'].get('prompt_id')}, not {prompt_id}"
            self.corruptions.append(f"request {req.idx}: {msg}")
            raise SoakFailure(msg)
        if req.kind == "t2v":
            if set(actual["slots"]) != {"positive"}:
                raise SoakFailure(f"slots {sorted(actual['slots'])} != ['positive']")
            fields = json.dumps(actual["slots"]["positive"]["key"]["fields"])
            if json.dumps(req.text)[1:-1] not in fields:
                raise SoakFailure(f"committed 'positive' slot key does not hold the text {req.text!r}")
            m.manifest, m.text = actual, req.text
            return
        if set(actual["slots"]) != {"positive", "clip_vision"}:
            raise SoakFailure(f"slots {sorted(actual['slots'])} != ['clip_vision', 'positive']")
        if sorted(int(b) for b in actual["boundaries"]) != list(range(req.segments - 1)):
            raise SoakFailure(f"boundaries {sorted(actual['boundaries'])} != 0..{req.segments - 2}")
        sec = actual["sections"].get("segments") or {}
        if sec.get("seed") != req.seed or sec.get("reused_prefix_segments") != req.use_N:
            raise SoakFailure(f"segment section seed/N {sec.get('seed')}/{sec.get('reused_prefix_segments')} "
                              f"!= {req.seed}/{req.use_N}")
        chosen = next((t for t in m.takes.takes if t.number == req.chosen), None) if req.use_N else None
        if req.use_N and chosen is None:
            raise SoakFailure(f"resumed at N={req.use_N} from take {req.chosen}, which the model does not keep")
        try:
            recs = m.takes.check_takes(actual, segments=req.segments, N=req.use_N, chosen=chosen)
        except TakeCorruption as e:
            self.corruptions.append(f"request {req.idx}: {e}")
            raise
        if req.use_N > 0 and sec.get("prefix_mode") != "stream-copy":
            step.notes.append(f"prefix_mode {sec.get('prefix_mode')}")
        copy = self.out / f"committed_{req.idx:03d}.mp4"
        self.store.copy(req.cache, "result.mp4", copy)   # serial: nobody writes now; its sha is checked below
        if sha256_file(copy) != actual["files"]["result.mp4"]["sha256"]:
            self.corruptions.append(f"request {req.idx}: committed result.mp4 does not match its manifest sha256")
            raise SoakFailure("committed result.mp4 sha256 != manifest")
        if output is not None and sha256_file(output) != actual["files"]["result.mp4"]["sha256"]:
            raise SoakFailure("the saved output video differs from the committed result.mp4")
        self._verify_video(req, copy, chosen)
        m.takes.commit(actual, recs, copy)
        m.manifest, m.result_copy = actual, copy

    def _verify_video(self, req: Request, path: Path, chosen) -> None:
        total = segmod.total_frames(req.segments, F, M)
        info = video.probe(str(path))
        if info.frames != total or not info.has_audio:
            raise SoakFailure(f"result has {info.frames} frames (audio {info.has_audio}); expected {total} with audio")
        frames = video.decode_frames(str(path))
        if frames.shape[0] != total:
            raise SoakFailure(f"result decodes to {frames.shape[0]} frames, expected {total}")
        audio = video.audio_packets_digest(str(path))
        if audio != self.models[SEG_CACHE].takes.expected_audio(req.segments):
            raise SoakFailure(f"the audio packets are not the encoding of this request's track (P({req.segments}) "
                              "frames of the sine)")
        if req.use_N > 0:
            if chosen is None:
                raise SoakFailure("resume succeeded without the chosen take in the model")
            P = segmod.prefix_frames(req.use_N, F, M)
            old = video.decode_frames(str(chosen.result_copy), 0, P)
            if not np.array_equal(old, frames[:P]):
                raise SoakFailure(f"the first {P} frames differ from take {chosen.number}'s result")
            if chosen.segments == req.segments and audio != chosen.audio:
                raise SoakFailure(f"the audio track differs from take {chosen.number}'s (the same track)")

    def _check_segments_event(self, req: Request, events, required: bool) -> None:
        """The pack's own account of the plan (seedreuse.segments, sent before any sampling)."""
        evs = [e["data"] for e in events if e.get("type") == "seedreuse.segments" and isinstance(e.get("data"), dict)]
        if not evs:
            if required:
                raise SoakFailure("no seedreuse.segments event")
            return
        d, tm = evs[0], self.models[SEG_CACHE].takes
        want = {"segments": req.segments, "requested": req.N, "kept": req.use_N,
                "source_take": req.chosen or None, "take": tm.next_number(), "kept_takes": tm.expected_numbers()[1:]}
        got = {k: d.get(k) for k in want}
        if got != want:
            raise SoakFailure(f"seedreuse.segments says {got}, the model {want} ({d.get('longest_valid') or d.get('plan')})")

    def _count_segment_success(self, req: Request) -> None:
        if req.use_N > 0:
            self.c["prefix_resumes"] += 1
        if req.variant and req.use_N > 0:
            self.c[{"extend": "extends", "longest": "longest_valid_resumes",
                    "from_take": "from_take_resumes"}[req.variant]] += 1

    def _after_run(self, req: Request, w: ComfyWorker, res, counts: dict, step: Step) -> None:
        m = self.models[req.cache]
        ev = res.events
        acts = slot_actions(res, {"positive": "101"} if req.kind == "t2v"
                            else {"positive": "101", "clip_vision": "105"})
        err = (res.error or {}).get("exception_message", "") or ""
        step.sampled = sampled(ev) if req.kind == "segment" else t2v_sampled(ev)
        if res.status == "success":
            if req.kind == "t2v" and "101" in res.cached and req.reject_reason in ("", "key mismatch"):
                # ComfyUI's own in-memory cache served the Encode-or-Reuse node (same inputs as an
                # earlier all-hit run on this worker; no transaction ended here since), so the
                # request never looked at the shared cache, which another worker may have replaced
                # meanwhile. The conditioning is still the one for these inputs: correct output.
                if counts.get("text_encode") or counts.get("text_loader") or step.sampled != 1:
                    raise SoakFailure(f"served from memory but counts {counts}, sampled {step.sampled}")
                self._expect_unchanged(req, "request served from ComfyUI's in-memory cache")
                self.c["served_from_comfy_memory"] += 1
                self.c["successes"] += 1
                step.classified = "success-memory"
                return
            if req.prediction == "reject":
                raise SoakFailure(f"expected a rejection ({req.reject_reason}) but the request succeeded")
            if req.fault == "kill":          # the kill's trigger never came (e.g. no .old on a first commit)
                self.c["kills_missed"] += 1
                step.notes.append("kill trigger never seen: not killed")
            elif req.fault != "none":
                raise SoakFailure(f"injected {req.fault} but the request succeeded")
            self.c["successes"] += 1
            if req.kind == "t2v":
                hit = req.prediction == "hit"
                if not hit and acts.get("positive") == "reused" and adopted(res, "positive"):
                    # the key's encoding a killed run published (its claim still live): staged as
                    # this run's own, so the commit checked below holds it like an encoded one
                    self.c["adopted_from_killed_runs"] += 1
                    step.notes.append("slot adopted from a killed run's single-flight entry")
                elif acts.get("positive") != ("reused" if hit else "encoded"):
                    raise SoakFailure(f"slot 'positive' was {acts.get('positive')}, expected "
                                      f"{'reused' if hit else 'encoded'}")
                if hit and (counts.get("text_encode") or counts.get("text_loader")):
                    raise SoakFailure(f"reused slot but the text encoder/loader ran: {counts}")
                if step.sampled != 1:
                    raise SoakFailure(f"KSampler executed {step.sampled} times, expected 1")
                out = res.output_files(T2V.SAVE)
                if not out:
                    raise SoakFailure("no saved video")
                n = video.probe(str(w.output_path(out[0]))).frames
                if n != 9 or video.decode_frames(str(w.output_path(out[0]))).shape[0] != 9:
                    raise SoakFailure(f"t2v output has {n} frames, expected 9")
                if hit:
                    self.c["encoder_hits"] += 1
                    self._expect_unchanged(req, "all-hit request")
                    step.classified = "success-hit"
                else:
                    self._verify_commit(req, self._snapshot_manifest(req.cache), res.prompt_id, None, step)
                    step.classified = "success-commit"
                return
            # segments
            self._check_segments_event(req, res.events, required=True)
            if step.sampled != req.segments - req.use_N:
                raise SoakFailure(f"KSampler executed {step.sampled} times, expected S' - N = "
                                  f"{req.segments} - {req.use_N}")
            if m.manifest is not None:   # the text / clip vision slots are reused after the first success
                if acts.get("positive") != "reused" or acts.get("clip_vision") != "reused":
                    raise SoakFailure(f"slot actions {acts}, expected reused")
                busy = {k: counts.get(k) for k in ("text_encode", "text_loader", "clip_vision_encode",
                                                   "clip_vision_loader") if counts.get(k)}
                if busy:
                    raise SoakFailure(f"slots reused but encoders ran: {busy}")
                self.c["encoder_hits"] += 1
            out = res.output_files(SEG.MERGE)
            output = w.output_path(out[0]) if out else None
            if output is None:
                raise SoakFailure("no merged output video")
            self._verify_commit(req, self._snapshot_manifest(req.cache), res.prompt_id, output, step)
            self._count_segment_success(req)
            step.classified = "success-commit"
            return
        # error / interrupted: nothing may change
        self._expect_unchanged(req, f"{res.status} request")
        if req.prediction == "reject":
            no_cache = ["no successful run", "needs a previous successful run", "no committed"]
            want = {"busy": ["is being written by"], "refused": list(self.cfg.expect_refused) + no_cache,
                    "no committed cache": no_cache,
                    "key mismatch": ["value:text", "differ"]}[req.reject_reason]
            if res.status != "error" or not any(s in err for s in want):
                raise SoakFailure(f"expected rejection '{req.reject_reason}', got {res.status}: {err[:300]}")
            if step.sampled and req.reject_reason != "refused":
                raise SoakFailure(f"rejected request sampled {step.sampled} times (must fail before sampling)")
            self.c[f"rejected:{req.reject_reason}"] += 1
            step.classified = "rejected"
            return
        if req.fault == "fail":
            if res.status != "error" or f"injected failure in request {req.idx}" not in err:
                raise SoakFailure(f"expected the injected failure, got {res.status}: {err[:300]}")
            self.c["failures_injected"] += 1
            step.classified = "failed"
            return
        if req.fault == "interrupt":
            if res.status != "interrupted":
                raise SoakFailure(f"expected interrupted, got {res.status}: {err[:300]}")
            self.c["interrupts"] += 1
            step.classified = "interrupted"
            return
        raise SoakFailure(f"unexpected {res.status}: {res.error and res.error.get('exception_type')}: {err[:500]}")

    def _after_kill(self, req: Request, w: ComfyWorker, events, info: dict, step: Step) -> None:
        self.c["kills"] += 1
        m = self.models[req.cache]
        saw = info.get("client_saw")
        fs = info.get("fs_state") or []
        if self.store.in_commit_window(info):
            self.c["kills_in_commit_window"] += 1
        step.notes.append(f"kill {req.kill_mode} trigger={info.get('trigger', '-')} "
                          f"delay={info.get('delay', 0) * 1000:.1f}ms fs={fs} client_saw={saw}"
                          + (f" watch={info['watch']}" if info.get("watch") else "")
                          + (f" WATCH ERROR {info['watch_error']}" if info.get("watch_error") else ""))
        try:
            self._classify_kill(req, w, info, step, m, saw)
        finally:
            self._restart_in_background(w)
            self.c["restarts"] += 1
            step.notes.append("restart in the background")

    def _classify_kill(self, req: Request, w: ComfyWorker, info: dict, step: Step, m: CacheModel, saw) -> None:
        m.lock_owner = self.store.lock_owner(req.cache, info.get("pid"))
        actual = self._snapshot_manifest(req.cache)
        if saw in ("execution_error", "execution_interrupted"):
            # no failure was injected: the request ended on its own before the kill landed
            data = (info.get("terminal") or {}).get("data") or {}
            raise SoakFailure(f"the request ended with {saw} before the kill: "
                              f"{data.get('exception_type')}: {str(data.get('exception_message'))[:300]}")
        if (actual == m.manifest and saw == "execution_success" and req.kind == "t2v"
                and "101" in info.get("cached", ())):
            # ComfyUI served the Encode-or-Reuse node from memory (see _after_run): this request
            # never began a transaction, so it had nothing to publish; the kill came after its end
            step.classified = "kill-nothing-to-publish"
            self.c["kills_nothing_to_publish"] += 1
        elif actual == m.manifest:
            step.classified = "kill-before-commit"
            self.c["kills_before_commit"] += 1
            if saw == "execution_success" and req.prediction == "commit":
                self.lost.append(f"request {req.idx}: client saw success, cache unchanged after the kill")
                raise SoakFailure("client saw success but the cache is unchanged")
        elif actual is not None and actual["run"].get("prompt_id") == info["prompt_id"]:
            step.classified = "kill-after-commit"
            self.c["kills_after_commit"] += 1
            self.c["successes"] += 1
            output = None
            if req.kind == "segment":   # the output file was saved before the commit
                outs = sorted((Path(w.output_dir) / "soak").glob(f"seg_{req.idx:03d}_*.mp4"))
                output = outs[-1] if outs else None
                # sent before the first sampling, so normally seen; a kill may cut the socket first
                self._check_segments_event(req, info.get("events") or [], required=False)
            self._verify_commit(req, actual, info["prompt_id"], output, step)
            if req.kind == "segment":
                self._count_segment_success(req)
        else:
            msg = (f"after the kill the cache holds version {actual and actual['version']} "
                   f"(run {actual and actual['run']}), neither the previous one nor this request's")
            self.corruptions.append(f"request {req.idx}: {msg}")
            raise SoakFailure(msg)
        probs = self.store.problems(req.cache)
        bad = [p for p in probs if p.code not in self.store.repairable]
        if bad:
            self.corruptions.append(f"request {req.idx}: after kill: {[str(p) for p in bad]}")
            raise SoakFailure(f"non-repairable problems after the kill: {[str(p) for p in bad]}")
        step.leftovers = sorted({p.code for p in probs})
        m.leftovers = set(step.leftovers)
        left = self.store.left_behind([req.cache])      # what the dead run left (settle() judges it at the end)
        self.c["objects_left_by_kills"] += len(left)
        step.notes.append(f"left behind: {left}")
        if self.fleet.host_of(w) != socket.gethostname():
            # the killed run's staging under its run lease (folder/run_lease.py): check() here
            # calls it live until its lease expires, then stale; the next request from its own
            # host (a follow-up, below) proves the owner dead and removes it
            m.leftovers |= self.store.remote_kill_leftovers
        if m.lock_owner is not None and m.lock_owner.get("host") != socket.gethostname():
            step.leftovers.append(f"lock of the dead writer on {m.lock_owner.get('host')} "
                                  "(live for check() here until its lease expires)")
        if step.leftovers:
            self.c["kills_leaving_leftovers"] += 1
        # make the next requests exercise recovery on this cache: from another host first
        # (its commit waits for the dead owner's lock to expire), then from the owner's host
        if m.pending:
            me = self.fleet.host_of(w)
            others = [i for i, x in enumerate(self.fleet.workers) if self.fleet.host_of(x) != me]
            same = [i for i, x in enumerate(self.fleet.workers) if self.fleet.host_of(x) == me]
            if others and m.lock_owner is not None:
                self.followups.append((req.cache, self.frng.choice(self._not_restarting(others, w))))
            self.followups.append((req.cache, self.frng.choice(self._not_restarting(same, w))))

    def _not_restarting(self, idxs: list, killed) -> list:
        """The workers of ``idxs`` that are up (not ``killed``, about to restart, nor still
        restarting from an earlier kill), else all of them: the follow-up is another process
        either way, and one that is up does not wait ~10 s for a start."""
        up = [i for i in idxs if self.fleet.workers[i] is not killed
              and self.fleet.workers[i].name not in self.restarting]
        return up or idxs

    def _check_all(self, req: Request, step: Step, touched: bool) -> None:
        for name, m in self.models.items():
            probs = self.store.problems(name)
            if name == req.cache and m.pending and step.outcome != "killed":
                if touched and req.reject_reason != "busy":
                    m.leftovers, m.lock_owner = set(), None    # this request began a transaction: recovery ran
                    self.c["leftovers_recovered"] += 1
                elif not any(f[0] == name for f in self.followups):   # served from memory: try again
                    same = [i for i, x in enumerate(self.fleet.workers) if m.lock_owner is None
                            or self.fleet.host_of(x) == m.lock_owner.get("host")]
                    self.followups.append((name, self.frng.choice(same)))
            allowed = self.store.repairable if self.cfg.expect_refused else m.leftovers
            bad = [p for p in probs if p.code not in allowed]
            if bad:
                self.corruptions.append(f"request {req.idx}: check({name}) -> {[str(p) for p in bad]}")
                raise SoakFailure(f"check({name}) reports {[str(p) for p in bad]}")

    # -------------------------------------------------------------- report
    def report(self) -> dict:
        c = self.c
        r = {
            "requests": c["requests"],
            "successes": c["successes"],
            "encoder_hits": c["encoder_hits"],
            "prefix_resumes": c["prefix_resumes"],
            "extends": c["extends"],
            "longest_valid_resumes": c["longest_valid_resumes"],
            "from_take_resumes": c["from_take_resumes"],
            "keep_takes": self.keep,
            "failures_injected": c["failures_injected"],
            "interrupts": c["interrupts"],
            "kills": c["kills"],
            "kills_before_commit": c["kills_before_commit"],
            "kills_after_commit": c["kills_after_commit"],
            "kills_leaving_leftovers": c["kills_leaving_leftovers"],
            "kills_in_commit_window": c["kills_in_commit_window"],
            "kills_nothing_to_publish": c["kills_nothing_to_publish"],
            "kills_missed": c["kills_missed"],
            "objects_left_by_kills": c["objects_left_by_kills"],
            "adopted_from_killed_runs": c["adopted_from_killed_runs"],
            "leftovers_recovered_by_next_request": c["leftovers_recovered"],
            "restarts": c["restarts"],
            "served_from_comfy_memory": c["served_from_comfy_memory"],
            "rejected_expected": {k.split(":", 1)[1]: v for k, v in c.items() if k.startswith("rejected:")},
            "corruptions": len(self.corruptions),
            "lost_successes": len(self.lost),
            "violations": len(self.violations),
            "seconds": round(time.monotonic() - self.t_start, 1) if self.t_start else None,
            "seed": self.cfg.seed,
            "fleet": self.fleet.describe(),
        }
        r["concurrent"] = {"planned": bool(self.cfg.bursts and not self.cfg.expect_refused),
                           "requests": c["burst_requests"], "contention_failures": c["burst_contention_failures"],
                           "kills": c["burst_kills"],
                           "kills_planned": sum(bool(b.get("kill_planned")) for b in self.bursts or []),
                           "bursts": self.bursts or []}
        if c["stopped_by_time_budget"]:
            r["stopped_by_time_budget"] = True
        planned = list(self.cov)
        r["mandatory"] = {
            "kinds": planned,
            "requests": self.mandatory_steps,
            "seconds": self.mandatory_seconds,
            "complete": not self.mandatory_active and all(self.cov[k]["happened"] for k in planned),
        }
        r["coverage"] = {k: {"attempts": v["attempts"], "happened": v["happened"], "outcomes": v["outcomes"]}
                         for k, v in self.cov.items()}
        r["coverage_missing"] = [k for k in planned if not self.cov[k]["happened"]]
        r["details"] = {"corruptions": self.corruptions, "lost_successes": self.lost,
                        "violations": self.violations,
                        "kill_outcomes": [{"request": s.idx, "classified": s.classified, "notes": s.notes,
                                           "leftovers": s.leftovers}
                                          for s in self.steps if s.outcome == "killed"]}
        (self.out / "soak-report.json").write_text(json.dumps(
            {"report": r, "steps": [asdict(s) for s in self.steps]}, indent=1, default=str))
        return r


def format_report(r: dict) -> str:
    keys = ["requests", "successes", "encoder_hits", "prefix_resumes", "extends", "longest_valid_resumes",
            "from_take_resumes", "keep_takes", "failures_injected", "interrupts",
            "kills", "kills_before_commit", "kills_after_commit", "kills_leaving_leftovers",
            "kills_in_commit_window", "kills_nothing_to_publish", "kills_missed", "objects_left_by_kills",
            "adopted_from_killed_runs",
            "leftovers_recovered_by_next_request", "restarts", "served_from_comfy_memory", "rejected_expected", "corruptions",
            "lost_successes", "violations", "seconds", "seed", "fleet"]
    lines = ["SeedReuse soak report"] + [f"  {k:38s} {r.get(k)}" for k in keys]
    mand = r.get("mandatory") or {}
    conc = r.get("concurrent") or {}
    if conc.get("planned"):
        lines.append(f"  {'concurrent clients':38s} {conc['requests']} requests in bursts, "
                     f"{conc['contention_failures']} contention failure(s), {conc.get('kills', 0)} kill(s)")
        for b in conc["bursts"]:
            lines.append(f"    {b['kind']:36s} {b['requests']} at once, {b['seconds']} s"
                         + (f", encoder ran {b['encodes']}x" if "encodes" in b else "")
                         + (f" ! {b['problems']}" if b["problems"] else ""))
    if mand.get("kinds"):
        lines.append(f"  {'mandatory phase':38s} {mand['requests']} requests, {mand['seconds']} s, "
                     f"{'complete' if mand['complete'] else 'INCOMPLETE'}")
        for k, v in r["coverage"].items():
            lines.append(f"    {k:36s} happened {v['happened']} / attempts {v['attempts']}: {', '.join(v['outcomes'])}")
        if r["coverage_missing"]:
            lines.append(f"  ! never happened: {r['coverage_missing']}")
    if r.get("stopped_by_time_budget"):
        lines.append("  (the tail was stopped early by the time budget)")
    for k in ("corruptions", "lost_successes", "violations"):
        for x in r["details"][k]:
            lines.append(f"  ! {k}: {x}")
    return "\n".join(lines)


def assert_clean(r: dict, min_requests: int = 0) -> None:
    problems = []
    if r["corruptions"]:
        problems.append(f"{r['corruptions']} corruption(s)")
    if r["lost_successes"]:
        problems.append(f"{r['lost_successes']} lost success(es)")
    if r["violations"]:
        problems.append(f"{r['violations']} violation(s)")
    if r["requests"] < min_requests:
        problems.append(f"only {r['requests']} requests (< {min_requests})")
    if problems:
        raise AssertionError("soak failed: " + ", ".join(problems) + "\n" + format_report(r))


def assert_coverage(r: dict) -> None:
    """Every kind planned in the mandatory phase happened (within its bounded attempts); this
    includes a kill before and one after a commit, an injected failure, an interrupt, a Segment
    Reuse resume (so also an encoder hit), an extension of a finished take, a longest-valid-prefix
    resume and (unless the workers keep one take) a resume from an older kept take. Independent
    of speed and of the time budget."""
    mand = r.get("mandatory") or {}
    problems = []
    if not mand.get("kinds"):
        problems.append("no mandatory phase ran")
    if r.get("coverage_missing"):
        problems.append(f"planned but never happened: {r['coverage_missing']}")
    keys = ["kills_before_commit", "kills_after_commit", "failures_injected", "interrupts",
            "encoder_hits", "prefix_resumes"]
    kinds = mand.get("kinds") or ()
    # the take-history kinds, when the phase planned them (SoakConfig.mandatory_kinds)
    keys += [k for kind, k in (("extend", "extends"), ("longest", "longest_valid_resumes"),
                               ("from_take", "from_take_resumes")) if kind in kinds]
    for key in keys:
        if not r.get(key):
            problems.append(f"{key} = 0")
    conc = r.get("concurrent") or {}
    if conc.get("planned") and not conc.get("requests"):
        problems.append("no concurrent burst ran")
    if conc.get("kills_planned", 0) > conc.get("kills", 0):   # a fleet with a spare worker plans one
        problems.append(f"{conc.get('kills', 0)} of {conc['kills_planned']} kill(s) inside a burst happened")
    if problems:
        raise AssertionError("soak coverage: " + ", ".join(problems) + "\n" + format_report(r))
