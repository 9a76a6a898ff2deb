#!/usr/bin/env python3
"""SeedReuse over ComfyUI's HTTP API: the serial "change the seed and try again" contract.

    python examples/api_client.py --server http://127.0.0.1:8188 \\
        --workflow example_workflows/api/wan21_i2v_segment_reuse.json --cache-name my-session

The API twins in example_workflows/api/ keep snake_case ids; the UI workflows next to them are
named by their titles (what the template browser shows), e.g. "example_workflows/Wan 2.1 long
video, keep the first N segments.json", and name their twin in extra.seedreuse_example.api.

Steps (each one waits until the previous prompt has finished successfully):

  1. first    reuse=off, the workflow's seed: a normal run that builds the cache
  2. reuse    reuse=require, a new seed: encoders are restored from the cache (none run)
  3. resume   reuse=require, reuse_prefix_segments=N, a new seed: keeps segments 0..N-1 of the
              previous video and generates the rest (only for workflows with a Segment Loop)

Optional steps (--steps first,resume,extend,from_take):

  extend     two more segments (total_frames = P(S+2)) keeping every segment of the latest take
             (reuse_prefix_segments = S): only the new segments are generated
  from_take  resume from the oldest kept take (from_take = its number, as the dry run lists the
             takes) with reuse_prefix_segments = -1: as many of its segments as are still valid

Before queueing, every step asks the server what will happen (POST /seedreuse/check, a dry
run that executes nothing) and prints it: per Encode-or-Reuse node "reuse" / "encode" /
"fail" and why; for a segment loop the segment count, the valid N and the frames each N keeps.
When the check predicts a failure the client stops there instead of queueing.

Completion is awaited by polling GET /history/{prompt_id} (no websocket needed): the cache is
published before a prompt shows up there as completed, so the next step always sees it.

Only the Python standard library is used (urllib + json). Options:

  --set NODE.INPUT=VALUE   override an input before the first step (repeatable); NODE is a node
                           id or a class_type (all nodes of that type), VALUE is parsed as JSON
                           when it can be (16, 1.5, true, "text") and taken as a string otherwise
  --steps first,reuse,resume   which steps to run (default: all that apply)
  --prefix-segments N      N for the resume step (default: the largest N the dry run accepts)
  --seed S                 seed of the first step (default: the workflow's); later steps use S+1, S+2
  --json                   print one machine-readable summary line at the end (SEEDREUSE_SUMMARY {...})

Exit status: 0 every step succeeded; 1 a prompt was rejected or failed; 2 the dry run predicted a
failure (nothing was queued for that step); 3 the server could not be reached.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
import urllib.error
import urllib.request
import uuid

SESSION = "SeedReuseSession"
ENCODE_PREFIX = "SeedReuseEncode"
LOOP_START = "SeedReuseSegmentLoopStart"
SEED_INPUTS = ("seed", "noise_seed")


class ServerError(RuntimeError):
    def __init__(self, status: int, body, path: str):
        self.status, self.body, self.path = status, body, path
        text = body if isinstance(body, str) else json.dumps(body)
        super().__init__(f"HTTP {status} from {path}: {text[:1500]}")


class Client:
    def __init__(self, server: str, timeout: float = 60.0):
        self.base = server.rstrip("/")
        self.timeout = timeout
        self.client_id = uuid.uuid4().hex

    def request(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                raw = r.read()
                return json.loads(raw) if raw.strip() else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = raw.decode(errors="replace")
            raise ServerError(e.code, payload, path) from None

    def check(self, prompt: dict) -> dict:
        return self.request("POST", "/seedreuse/check", {"prompt": prompt})

    def queue(self, prompt: dict) -> str:
        body = self.request("POST", "/prompt", {"prompt": prompt, "client_id": self.client_id})
        if body.get("node_errors"):
            raise ServerError(400, body, "/prompt (some outputs failed validation)")
        return body["prompt_id"]

    def wait(self, prompt_id: str, timeout: float, poll: float = 0.25) -> dict:
        """Poll GET /history/{id} until the prompt completed (or failed); return its entry."""
        deadline = time.monotonic() + timeout
        while True:
            hist = self.request("GET", f"/history/{prompt_id}") or {}
            entry = hist.get(prompt_id)
            if entry is not None:
                status = entry.get("status") or {}
                if status.get("completed") or status.get("status_str") in ("success", "error"):
                    return entry
            if time.monotonic() > deadline:
                raise TimeoutError(f"prompt {prompt_id} did not finish within {timeout:.0f} s")
            time.sleep(poll)


# ---------------------------------------------------------------------- workflow edits

def parse_set(spec: str):
    if "=" not in spec or "." not in spec.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"--set wants NODE.INPUT=VALUE, got {spec!r}")
    target, raw = spec.split("=", 1)
    node, inp = target.rsplit(".", 1)
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return node, inp, value


def apply_sets(prompt: dict, sets) -> None:
    for node, inp, value in sets:
        ids = [node] if node in prompt else [nid for nid, n in prompt.items() if n.get("class_type") == node]
        if not ids:
            raise SystemExit(f"--set {node}.{inp}: no node with id or class_type {node!r}")
        for nid in ids:
            prompt[nid].setdefault("inputs", {})[inp] = value


def nodes_of(prompt: dict, class_type: str) -> list[str]:
    return [nid for nid, n in prompt.items() if n.get("class_type") == class_type]


def is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)


def configure(prompt: dict, *, cache_name: str, reuse: str, prefix: int, seed: int | None,
              from_take: int = 0) -> dict:
    p = copy.deepcopy(prompt)
    for nid in nodes_of(p, SESSION):
        p[nid]["inputs"].update(cache_name=cache_name, reuse=reuse, reuse_prefix_segments=prefix)
        if from_take:
            p[nid]["inputs"]["from_take"] = from_take
    if seed is not None:
        for n in p.values():
            for k in SEED_INPUTS:
                if k in n.get("inputs", {}) and not is_link(n["inputs"][k]):
                    n["inputs"][k] = seed
    return p


def workflow_seed(prompt: dict) -> int:
    for nid in nodes_of(prompt, LOOP_START) + list(prompt):
        for k in SEED_INPUTS:
            v = prompt[nid].get("inputs", {}).get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
    return 0


# ---------------------------------------------------------------------- reporting

def say(msg: str = "") -> None:
    print(msg, flush=True)


def describe_check(answer: dict, prompt: dict) -> list[str]:
    """Print the dry run; return the reasons of predicted failures."""
    fails = []
    for nid, a in sorted((answer.get("nodes") or {}).items(), key=lambda kv: node_order(kv[0])):
        title = (prompt.get(nid, {}).get("_meta") or {}).get("title") or prompt.get(nid, {}).get("class_type")
        will = a.get("will")
        say(f"    node {nid} [{a.get('slot')}] {title}: will {will} - {first_line(a.get('reason'))}")
        if will == "fail":
            fails.append(f"node {nid} ({a.get('slot')}): {a.get('reason')}")
    for nid, s in sorted((answer.get("segments") or {}).items(), key=lambda kv: node_order(kv[0])):
        if s.get("valid"):
            frames = s.get("prefix_frames_by_n") or []
            count = f"{s['S']} segments" if s.get("S") else "segment count set by the audio at run time"
            say(f"    segment loop {nid}: {count}, F={s.get('F')} frames, M={s.get('M')} motion frames; "
                f"N={s.get('N')}: will {s.get('will')} - {s.get('plan')}")
            say(f"      valid N: {s.get('valid_n')}; frames kept for N=0..: {frames}")
        else:
            say(f"    segment loop {nid}: will fail - {first_line(s.get('reason'))}")
            fails.append(f"segment loop {nid}: {s.get('reason')}")
    if not answer.get("nodes") and not answer.get("segments"):
        say("    (no SeedReuse nodes in this workflow)")
    return fails


def node_order(nid: str):
    return (0, int(nid), "") if str(nid).isdigit() else (1, 0, str(nid))


def first_line(s) -> str:
    return str(s or "").split("\n", 1)[0]


def describe_result(entry: dict, prompt: dict) -> dict:
    status = entry.get("status") or {}
    ok = status.get("status_str") == "success"
    out = {"ok": ok, "slots": {}, "segments": None, "files": []}
    for nid, ui in sorted((entry.get("outputs") or {}).items(), key=lambda kv: node_order(kv[0])):
        for payload in ui.get("seedreuse") or []:
            out["slots"][payload.get("slot")] = payload.get("action")
            extra = (f", saved {payload['saved_seconds']:.2f} s" if payload.get("action") == "reused"
                     and payload.get("saved_seconds") is not None else "")
            say(f"    node {nid} [{payload.get('slot')}]: {payload.get('action')}{extra}")
        for key in ("images", "gifs", "videos", "video"):
            for f in ui.get(key) or []:
                if isinstance(f, dict) and "filename" in f:
                    out["files"].append("/".join(x for x in (f.get("subfolder"), f["filename"]) if x))
    if not ok:
        for name, data in status.get("messages") or []:
            if name == "execution_error":
                say(f"    FAILED at node {data.get('node_id')} ({data.get('node_type')}): "
                    f"{first_line(data.get('exception_message'))}")
                out["error"] = data.get("exception_message")
    for f in out["files"]:
        say(f"    output: {f}")
    return out


# ---------------------------------------------------------------------- the steps

def run_step(client: Client, name: str, prompt: dict, timeout: float, summary: dict) -> int:
    say("  dry run (POST /seedreuse/check):")
    answer = client.check(prompt)
    fails = describe_check(answer, prompt)
    step = {"check": answer}
    summary["steps"][name] = step
    if fails:
        say("  not queued: the dry run predicts a failure:\n    " + "\n    ".join(first_line(f) for f in fails))
        step["queued"] = False
        return 2
    t0 = time.monotonic()
    try:
        pid = client.queue(prompt)
    except ServerError as e:
        say(f"  rejected by POST /prompt: {e}")
        step.update(queued=False, rejected=e.body)
        return 1
    say(f"  queued prompt {pid}; waiting for GET /history/{pid} ...")
    entry = client.wait(pid, timeout)
    seconds = time.monotonic() - t0
    result = describe_result(entry, prompt)
    step.update(queued=True, prompt_id=pid, seconds=round(seconds, 3), **result)
    say(f"  {'succeeded' if result['ok'] else 'FAILED'} in {seconds:.1f} s")
    if result["ok"]:
        describe_cache(client, cache_name_of(prompt), step)
    return 0 if result["ok"] else 1


def cache_name_of(prompt: dict) -> str | None:
    for nid in nodes_of(prompt, SESSION):
        return prompt[nid]["inputs"].get("cache_name")
    return None


def describe_cache(client: Client, name: str | None, step: dict) -> None:
    """What the cache holds now (GET /seedreuse/caches/{name}): the next step reuses this."""
    if not name:
        return
    c = client.request("GET", f"/seedreuse/caches/{name}")
    step["cache"] = {k: c.get(k) for k in ("committed", "version", "total_bytes")}
    if not c.get("committed"):
        say(f"  cache '{name}': nothing committed")
        return
    seg = (c.get("sections") or {}).get("segments")
    say(f"  cache '{name}' version {c['version'][:8]}: slots {sorted(c.get('slots') or {})}, "
        f"{len(c.get('boundaries') or [])} boundaries, {c.get('total_bytes', 0) / 1e6:.1f} MB")
    if seg:
        step["cache"]["segments"] = seg
        kept = seg.get("reused_prefix_segments") or 0
        say(f"    video: {seg.get('frames')} frames, seed {seg.get('seed')}; "
            + (f"kept segments 0..{kept - 1} ({seg.get('prefix_frames')} frames, {seg.get('prefix_mode')})"
               if kept else "every segment generated"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="SeedReuse serial-contract client (first run, seed change, "
                                             "segment resume) over ComfyUI's HTTP API.")
    ap.add_argument("--server", default="http://127.0.0.1:8188")
    ap.add_argument("--workflow", required=True, help="an API-format workflow (e.g. example_workflows/api/*.json; "
                    "a UI workflow names its twin in extra.seedreuse_example)")
    ap.add_argument("--cache-name", default="api-client", help="cache to use (one per serial session)")
    ap.add_argument("--set", dest="sets", action="append", type=parse_set, default=[], metavar="NODE.INPUT=VALUE")
    ap.add_argument("--steps", default="first,reuse,resume")
    ap.add_argument("--prefix-segments", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for each prompt")
    ap.add_argument("--json", action="store_true", help="print a SEEDREUSE_SUMMARY line at the end")
    args = ap.parse_args(argv)

    with open(args.workflow) as f:
        base = json.load(f)
    if not isinstance(base, dict) or not all(isinstance(n, dict) and "class_type" in n for n in base.values()):
        raise SystemExit(f"{args.workflow} is not an API-format workflow (use the example_workflows/api/ twins "
                         "or the canvas' Export (API))")
    apply_sets(base, args.sets)
    if not nodes_of(base, SESSION):
        raise SystemExit("the workflow has no SeedReuse Session node")
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    has_loop = bool(nodes_of(base, LOOP_START))
    seed = workflow_seed(base) if args.seed is None else args.seed
    client = Client(args.server)
    summary = {"server": args.server, "workflow": args.workflow, "cache_name": args.cache_name, "steps": {}}
    rc = 0
    try:
        for i, step in enumerate(steps):
            if step == "first":
                say(f"[1/3] first run: reuse=off, seed {seed} (builds cache '{args.cache_name}')")
                prompt = configure(base, cache_name=args.cache_name, reuse="off", prefix=0, seed=seed)
            elif step == "reuse":
                say(f"[2/3] seed change: reuse=require, seed {seed + 1} (encoders restored from the cache)")
                prompt = configure(base, cache_name=args.cache_name, reuse="require", prefix=0, seed=seed + 1)
            elif step == "resume":
                if not has_loop:
                    say("[3/3] segment resume: skipped (the workflow has no Segment Loop Start)")
                    summary["steps"]["resume"] = {"skipped": "no segment loop"}
                    continue
                n = args.prefix_segments
                if n is None:  # ask the server which N the cached run supports
                    probe = client.check(configure(base, cache_name=args.cache_name, reuse="require", prefix=0,
                                                   seed=seed + 2))
                    valid = sorted({v for s in (probe.get("segments") or {}).values() for v in s.get("valid_n") or []})
                    n = max(valid) if valid else 1
                say(f"[3/3] segment resume: reuse=require, reuse_prefix_segments={n}, seed {seed + 2}")
                prompt = configure(base, cache_name=args.cache_name, reuse="require", prefix=n, seed=seed + 2)
            elif step in ("extend", "from_take") and has_loop:
                probe = client.check(configure(base, cache_name=args.cache_name, reuse="require", prefix=0,
                                               seed=seed + 3))
                loop = next(iter((probe.get("segments") or {}).values()), {})
                takes = loop.get("takes") or []
                if not takes:
                    say(f"[{step}] skipped: cache '{args.cache_name}' keeps no take yet")
                    summary["steps"][step] = {"skipped": "no take"}
                    continue
                if step == "extend":
                    S, F, M = takes[0]["segments"], loop["F"], loop["M"]
                    total = (S + 2) * (F - M) + M
                    say(f"[extend] reuse_prefix_segments={S} (every segment of take {takes[0]['take']}), "
                        f"total_frames={total}: only segments {S}..{S + 1} are generated")
                    prompt = configure(base, cache_name=args.cache_name, reuse="require", prefix=S, seed=seed + 3)
                    for nid in nodes_of(prompt, LOOP_START):
                        prompt[nid]["inputs"]["total_frames"] = total
                else:
                    oldest = takes[-1]["take"]
                    say(f"[from_take] from_take={oldest} (the oldest kept take), reuse_prefix_segments=-1")
                    prompt = configure(base, cache_name=args.cache_name, reuse="require", prefix=-1,
                                       seed=seed + 4, from_take=oldest)
            elif step in ("extend", "from_take"):
                say(f"[{step}] skipped (the workflow has no Segment Loop Start)")
                continue
            else:
                raise SystemExit(f"unknown step {step!r} (first, reuse, resume, extend, from_take)")
            rc = run_step(client, step, prompt, args.timeout, summary)
            if rc:
                break
    except TimeoutError as e:
        say(f"gave up waiting: {e}")
        rc = 1
    except (urllib.error.URLError, ConnectionError, OSError) as e:
        say(f"cannot reach {args.server}: {e}")
        rc = 3
    except ServerError as e:
        say(f"server error: {e}")
        rc = 1
    summary["exit"] = rc
    if args.json:
        print("SEEDREUSE_SUMMARY " + json.dumps(summary), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
