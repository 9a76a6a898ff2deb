"""Concurrent clients in the soak (issue 27): several requests in flight at once across the workers.

The serial chain of tests/soak/soak.py checks one request at a time against its model; a burst
sends several requests at the same moment, one or more per worker, and checks what the contract
promises for concurrent use (folder/commit.py, store/rebase.py, store/claim.py):

* encoder cache: three requests with a new text (the same key) and, when a text is committed,
  one with that text that fails after sampling (an injected fault; a hit, or a miss when a
  commit of the new text came first: the order is the commits', so it is not predicted); every
  request that is not the injected failure succeeds (0 failures from contention), exactly one
  request with the new key encodes it (single flight: the others wait and reuse its commit; the
  stand-in encoder's executions are reported), the committed version is one of the requests
  with the new text, and the failure published nothing;
* segment cache: two new takes (N = 0, new seeds) at once: both succeed and both become takes
  (renumbered in commit order above the kept ones), each take's result is that request's
  saved output (sha256), the older kept takes are unchanged (up to K), nothing is lost; the two
  requests go to workers on different hosts where the fleet spans hosts, and a third request
  runs at the same time on a spare worker, whose worker is SIGKILLed while the run holds after
  its last segment (everything staged under its run lease, before its commit): the other two
  still commit as above, the killed run is no take, what it left behind is only repairable
  (check), and it is recovered on its own host (a commit there after the kill, or
  ``check --repair`` run as that host), never by another host before its lease expired
  (burst_kill.py says who, in code and in the soak's log line);
* after each burst check() reports nothing and nothing is left behind (no staging, lease,
  claim or lock). Both models then take the committed state as it is (its order was decided by
  the commits, which the serial model cannot predict).

Not covered here: a kill during another run's commit (tests/backend/test_overlap.py); another
host's recovery once the killed run's lease expired (the serial chain's kills cover the recovery
itself; waiting out the lease here would add two minutes).
"""
from __future__ import annotations

import time
from pathlib import Path

from . import burst_kill
from .take_model import SoakFailure, records

FAIL_MESSAGE = "soak: injected failure in burst request"


def _wait_all(handles, timeout: float) -> list:
    return [h.wait(timeout=timeout) for h in handles]


def _err(res) -> str:
    return str((res.error or {}).get("exception_message", ""))[:300]


def _wait_queue_empty(w, timeout: float = 60.0) -> None:
    """Until the worker runs and holds nothing (GET /queue), bounded; a worker that does not
    answer is left to the checks that follow (they report what it left)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            q = w.get_json("/queue", timeout=5)
        except Exception:   # noqa: BLE001 - a worker restarting: the checks below judge its leftovers
            return
        if not q.get("queue_running") and not q.get("queue_pending"):
            return
        time.sleep(0.2)


def encoder_burst(soak, idx: int) -> dict:
    from .soak import T2V_CACHE, TEXTS, FAULT_NODE
    from seedreuse_lab import graphs
    from seedreuse_lab.graphs import T2V
    from seedreuse_lab.reuse_graphs import t2v_reuse
    m = soak.models[T2V_CACHE]
    ws = soak.fleet.workers
    new = TEXTS[1] if m.text == TEXTS[0] else TEXTS[0]
    # three with the new text (one key: single flight), and one with the committed text that
    # fails after sampling (a hit, or a miss when a commit of the new text came first)
    plan = [(new, False)] * 3 + ([(m.text, True)] if m.text else [])
    prompts = []
    for n, (text, fail) in enumerate(plan):
        p = t2v_reuse(soak._new_seed(), text, cache_name=T2V_CACHE, filename_prefix=f"soak/burst_{idx}_{n}")
        if fail:
            graphs.insert_between(p, T2V.DECODE, 0, T2V.VIDEO, "images", "SeedReuseTestFail",
                                  {"fail": True, "message": FAIL_MESSAGE}, input_name="value", node_id=FAULT_NODE)
        prompts.append(p)
    for w in ws:
        w.reset_counts()
    t0 = time.monotonic()
    handles = [ws[n % len(ws)].start_run(p) for n, p in enumerate(prompts)]
    res = _wait_all(handles, soak.cfg.request_timeout_s * 2)
    secs = time.monotonic() - t0
    encodes = sum(w.counts().get("text_encode", 0) for w in ws)
    actions = [{e["data"]["slot"]: e["data"]["action"] for e in r.events_of("seedreuse.slot")}.get("positive")
               for r in res]
    encoded_new = [n for n, (a, (text, _)) in enumerate(zip(actions, plan)) if text == new and a == "encoded"]
    contention = [(n, r.status, _err(r)) for n, (r, (_, fail)) in enumerate(zip(res, plan))
                  if not fail and r.status != "success"]
    wrong_fail = [(n, r.status, _err(r)) for n, (r, (_, fail)) in enumerate(zip(res, plan))
                  if fail and (r.status != "error" or FAIL_MESSAGE not in _err(r))]
    actual = soak._snapshot_manifest(T2V_CACHE)
    writers = {h.prompt_id for h, (text, fail) in zip(handles, plan) if text == new and not fail}
    problems = []
    if contention:
        problems.append(f"requests failed while others wrote the cache: {contention}")
    if wrong_fail:
        problems.append(f"the injected failure did not fail as injected: {wrong_fail}")
    decided_new = [a for a, (text, _) in zip(actions, plan) if text == new and a is not None]
    # exactly one request of the new key encodes it; none only when no request decided at all
    # (ComfyUI served the Encode-or-Reuse node from its memory: no decision, nothing staged)
    if len(encoded_new) > 1 or (not encoded_new and decided_new):
        problems.append(f"{len(encoded_new)} of the {sum(t == new for t, _ in plan)} requests with one new key encoded "
                        f"it (single flight: 1); actions {actions}")
    if actual is None or actual["run"].get("prompt_id") not in writers:
        problems.append(f"the committed version is not one of the requests with the new text "
                        f"(run {actual and actual['run']})")
    else:
        m.manifest, m.text = actual, new
    return {"kind": "encoder", "requests": len(plan), "seconds": round(secs, 1), "encodes": encodes,
            "contention_failures": len(contention), "problems": problems}


def segment_burst(soak, idx: int, n: int = 2, kill: bool = True) -> dict:
    from .soak import S, SEG_CACHE, sha256_file
    ws = soak.fleet.workers
    m = soak.models[SEG_CACHE]
    before = list(m.takes.takes)
    where, victim_at = burst_kill.placement(soak.fleet, n, kill)
    reqs = []
    for k in range(n):
        req = soak._draw(idx * 100 + k, (SEG_CACHE, where[k]))
        # S segments, as a plain request: the serial chain's resumes after the burst (N up to S - 1)
        # need the latest take to hold them (take_model.predict)
        req.mode, req.N, req.fault, req.from_take, req.variant, req.segments = "auto", 0, "none", 0, "", S
        reqs.append(req)
    prompts = [soak._prompt(r)[0] for r in reqs]
    victim = burst_kill.victim(soak, idx, n, victim_at) if victim_at is not None else None
    t0 = time.monotonic()
    handles = [ws[r.worker].start_run(p) for r, p in zip(reqs, prompts)]
    if victim is not None:
        victim["thread"].start()
    res = _wait_all(handles, soak.cfg.request_timeout_s * 2)
    problems = []
    if victim is not None:
        problems += burst_kill.settle(soak, victim, [ws[r.worker] for r in reqs])
    secs = time.monotonic() - t0
    contention = [(r.idx, x.status, _err(x)) for r, x in zip(reqs, res) if x.status != "success"]
    if contention:
        problems.append(f"requests failed while others wrote the cache: {contention}")
    actual = soak._snapshot_manifest(SEG_CACHE)
    recs = records(actual) if actual is not None else []
    files = (actual or {}).get("files") or {}
    got_new = recs[:n]
    want_numbers = list(range(m.takes.next_number() + n - 1, m.takes.next_number() - 1, -1))
    if [r["take"] for r in got_new] != want_numbers:
        problems.append(f"new takes {[r['take'] for r in got_new]} != {want_numbers}")
    outputs = {}
    for r, x in zip(reqs, res):
        outs = sorted((Path(ws[r.worker].output_dir) / "soak").glob(f"seg_{r.idx:03d}_*.mp4"))
        if outs:
            outputs[r.seed] = sha256_file(outs[-1])
    for rec in got_new:
        seed = rec["segments"].get("seed")
        if seed not in outputs:
            problems.append(f"take {rec['take']} (seed {seed}) is none of the burst's requests {sorted(outputs)}")
        elif files[rec["result"]]["sha256"] != outputs[seed]:
            problems.append(f"take {rec['take']}'s result differs from its request's saved output")
    if not contention and sorted(r["segments"].get("seed") for r in got_new) != sorted(r.seed for r in reqs):
        problems.append("a success of the burst is not a take (lost)")
    kept = recs[n:]
    for rec, old in zip(kept, before[:max(0, m.takes.keep - n)]):
        if rec["take"] != old.number or files[rec["result"]]["sha256"] != old.result_sha:
            problems.append(f"kept take {old.number} changed or went missing")
    if len(recs) != min(m.takes.keep, len(before) + n):
        problems.append(f"{len(recs)} takes kept, expected {min(m.takes.keep, len(before) + n)}")
    if actual is not None:     # the model takes the committed order as it is (decided by the commits)
        m.takes.resync(actual, soak.store, SEG_CACHE, f"burst{idx}")
        m.manifest = actual
        m.result_copy = soak.out / f"burst_{idx:03d}.mp4"
        soak.store.copy(SEG_CACHE, "result.mp4", m.result_copy)
    out = {"kind": "segment", "requests": n, "seconds": round(secs, 1),
           "contention_failures": len(contention), "problems": problems, "kill_planned": victim is not None,
           "lingering": (victim or {}).get("lingering", [])}
    if victim is not None:
        out["requests"] += 1
        out["killed"] = victim["report"]
    return out


def run_bursts(soak, idx: int) -> list[dict]:
    """Both bursts, then the checks every step gets (check(), nothing left behind)."""
    for w in soak.fleet.workers:
        soak._wait_restarted(w)
    names = list(soak.models)
    # what runs killed before the burst left and that is not yours to remove yet (on a bucket a
    # dead run's lease and claim stay until they expire): the burst must add nothing to it
    before = set(soak.store.left_behind(names)) if soak.store.kills_linger else set()
    out = [encoder_burst(soak, idx), segment_burst(soak, idx)]
    # a client sees execution_success before its worker has released its run lease (the prompt
    # ends after the message): judge what is left only once every worker's queue is empty
    for w in soak.fleet.workers:
        soak._wait_restarted(w)
        _wait_queue_empty(w)
    for name in names:
        probs = soak.store.problems(name)
        if probs:
            out[-1]["problems"].append(f"check({name}) -> {[str(p) for p in probs]}")
    lingering = {x for b in out for x in b.get("lingering", [])}
    left = [x for x in soak.store.left_behind(names) if x not in before and x not in lingering]
    if left:
        out[-1]["problems"].append(f"left behind after the burst: {left}")
    for b in out:
        soak.c["burst_requests"] += b["requests"]
        soak.c["burst_contention_failures"] += b["contention_failures"]
        soak.log(f"[soak burst] {b['kind']}: {b['requests']} requests at once, {b['seconds']} s, "
                 f"{b['contention_failures']} contention failure(s)"
                 + (f", encoder ran {b['encodes']}x" if "encodes" in b else "")
                 + (f" ! {b['problems']}" if b["problems"] else ""))
        for p in b["problems"]:
            soak.violations.append(f"burst ({b['kind']}): {p}")
            if "lost" in p or "changed" in p or "differs" in p:
                soak.corruptions.append(f"burst ({b['kind']}): {p}")
    if any(b["problems"] for b in out):
        soak._resync()
    return out


__all__ = ["run_bursts", "SoakFailure"]
