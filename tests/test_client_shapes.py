"""Other clients' request shapes on real workers (issue 35 item 2): what reuse and automatic mode's
report do when the client is not ComfyUI's frontend.

Two workers with automatic mode on (``SEEDREUSE_AUTO=1``) share one cache root. Per shape, worker
A runs a plain workflow cold and worker B (its in-memory cache emptied) runs it again with a new
seed: B runs no text encoder and no loader (the cache served them), as docs/ORCHESTRATORS.md says.

- ``{"prompt", "client_id"}`` only, the history deleted right after the end (SwarmUI): the report
  reaches the client as the ``seedreuse.auto_report`` websocket message only; once the history is
  deleted nothing else holds it;
- no ``client_id`` and no ``extra_data`` at all: the report is in the history (with the outcomes);
  no client gets the websocket message (there is no one to send it to; it is never broadcast);
- every ``seed`` / ``noise_seed`` randomised before queueing (deployment services): reuse is
  unaffected (no seed is part of an encoder's key), also with the pack's own Session nodes;
- the same prompt queued twice, the second with ``front: true``: the front one runs first and
  encodes, the other one reuses; both histories hold their report.
"""
from __future__ import annotations

import json
import random
import time
import uuid

import pytest
import websocket

from seedreuse_lab import graphs, reuse_graphs
from seedreuse_lab.worker import ComfyWorker

pytestmark = pytest.mark.comfy

REPORT = "seedreuse_auto_report"
MESSAGE = "seedreuse.auto_report"


@pytest.fixture(scope="module")
def pair(module_workers):
    a, b = module_workers(2, env={"SEEDREUSE_AUTO": "1"}, name_prefix="shape")
    return a, b


@pytest.fixture
def fresh(pair):
    for w in pair:
        w.free(settle=0)
    time.sleep(0.3)
    for w in pair:
        w.reset_counts()
    return pair


def plain(text: str, seed: int) -> dict:
    return graphs.wan_t2v_graph(seed=seed, prompt_text=text, negative_text=f"blurry {text}", length=5, steps=1)


def post(w: ComfyWorker, body: dict) -> str:
    """POST /prompt with exactly this body (no field added); the prompt id the server chose."""
    status, raw = w._request("POST", "/prompt", body)
    assert status == 200, raw[:2000]
    return json.loads(raw)["prompt_id"]


def history(w: ComfyWorker, pid: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        h = w.get_json(f"/history/{pid}")
        if pid in h:
            return h[pid]
        assert time.monotonic() < deadline, f"{w.name}: prompt {pid} did not end\n{w.log_tail()}"
        time.sleep(0.1)


def listen(w: ComfyWorker, client_id: str | None = None):
    cid = client_id or uuid.uuid4().hex
    return websocket.create_connection(f"ws://127.0.0.1:{w.port}/ws?clientId={cid}", timeout=30), cid


def messages_until(ws, pid: str, timeout: float = 120) -> list[dict]:
    """Every JSON message until the prompt's execution_success/error/interrupted (or the end of
    the stream once it ended and the socket is quiet)."""
    out, deadline = [], time.monotonic() + timeout
    ws.settimeout(0.5)
    done = False
    while time.monotonic() < deadline:
        try:
            msg = ws.recv()
        except websocket.WebSocketTimeoutException:
            if done:
                return out
            continue
        if isinstance(msg, bytes):
            continue
        ev = json.loads(msg)
        out.append(ev)
        data = ev.get("data") if isinstance(ev.get("data"), dict) else {}
        if ev.get("type") in ("execution_success", "execution_error", "execution_interrupted") \
                and data.get("prompt_id") == pid:
            done = True          # the report message comes before execution_success; read on briefly
    raise AssertionError(f"prompt {pid}: no end within {timeout} s")


def drain(ws) -> list[dict]:
    """The JSON messages already sent to this socket (read until it is quiet for a second)."""
    out = []
    ws.settimeout(1.0)
    while True:
        try:
            msg = ws.recv()
        except websocket.WebSocketTimeoutException:
            return out
        if not isinstance(msg, bytes):
            out.append(json.loads(msg))


def report_of(entry: dict) -> dict | None:
    return entry["prompt"][3].get(REPORT)


def encoders_ran(w: ComfyWorker) -> int:
    c = w.counts()
    return c["text_encode"] + c["text_loader"]


def reused_on_b(a: ComfyWorker, b: ComfyWorker) -> None:
    assert encoders_ran(b) == 0, b.counts()
    assert encoders_ran(a) > 0, a.counts()


def test_prompt_and_client_id_only_with_the_history_deleted_after(fresh):
    a, b = fresh
    text = f"swarm {uuid.uuid4().hex[:6]}"
    for w, seed in ((a, 1), (b, 2)):
        ws, cid = listen(w)
        try:
            pid = post(w, {"prompt": plain(text, seed), "client_id": cid})
            msgs = messages_until(ws, pid)
        finally:
            ws.close()
        assert [m for m in msgs if m["type"] == "execution_success"], [m["type"] for m in msgs]
        reports = [m["data"] for m in msgs if m["type"] == MESSAGE and m["data"].get("prompt_id") == pid]
        assert len(reports) == 1 and reports[0]["applied"], reports
        want = "encoded" if w is a else "reused"
        assert {o["action"] for o in reports[0]["outputs"]} == {want}, reports[0]["outputs"]
        w.post_json("/history", {"delete": [pid]})      # as SwarmUI does once it has the images
        assert pid not in w.get_json(f"/history/{pid}")  # nothing else holds the report now
    reused_on_b(a, b)


def test_no_client_id_and_no_extra_data(fresh):
    a, b = fresh
    text = f"bare {uuid.uuid4().hex[:6]}"
    for w, seed in ((a, 3), (b, 4)):
        observer, _ = listen(w)
        try:
            pid = post(w, {"prompt": plain(text, seed)})
            entry = history(w, pid)
            seen = drain(observer)          # the prompt ended (history): what this client got
        finally:
            observer.close()
        assert entry["status"]["status_str"] == "success", entry["status"]
        rep = report_of(entry)
        assert rep and rep["applied"] and "outputs" in rep, rep
        want = "encoded" if w is a else "reused"
        assert {o["action"] for o in rep["outputs"]} == {want}, rep["outputs"]
        # the report is sent only to the client that queued the prompt: here nobody
        assert not [m for m in seen if m["type"] == MESSAGE], [m["type"] for m in seen]
    reused_on_b(a, b)


def randomised(p: dict) -> dict:
    for n in p.values():
        for k in ("seed", "noise_seed"):
            if isinstance(n["inputs"].get(k), int):
                n["inputs"][k] = random.randrange(2 ** 50)
    return p


@pytest.mark.parametrize("graph", ["plain", "session"])
def test_every_seed_randomised_before_queueing(fresh, graph):
    a, b = fresh
    text = f"random seeds {uuid.uuid4().hex[:6]}"
    cache = f"shape-{uuid.uuid4().hex[:8]}"
    make = (lambda: plain(text, 0)) if graph == "plain" else \
        (lambda: reuse_graphs.t2v_reuse(seed=0, prompt_text=text, cache_name=cache, length=5, steps=1))
    ra = a.run(randomised(make())).raise_for_status()
    rb = b.run(randomised(make())).raise_for_status()
    reused_on_b(a, b)
    slot_actions = {e["data"]["slot"]: e["data"]["action"] for e in rb.events_of("seedreuse.slot")}
    assert slot_actions and set(slot_actions.values()) == {"reused"}, slot_actions
    if graph == "plain":
        assert report_of(ra.history)["cache"] == report_of(rb.history)["cache"]


def test_the_same_prompt_queued_again_at_the_front(fresh):
    a, _ = fresh
    text = f"front {uuid.uuid4().hex[:6]}"
    p = plain(text, 5)
    blocker = {"1": {"class_type": "SeedReuseTestSineAudio",
                     "inputs": {"seconds": 0.1, "sample_rate": 16000, "frequency": 100.0 + time.time() % 1}},
               "2": {"class_type": "SeedReuseTestSlow", "inputs": {"value": ["1", 0], "seconds": 3.0}},
               "3": {"class_type": "SeedReuseTestSink", "inputs": {"value": ["2", 0]}}}
    cid = uuid.uuid4().hex
    first = post(a, {"prompt": blocker, "client_id": cid})
    back = post(a, {"prompt": p, "client_id": cid})
    front = post(a, {"prompt": p, "client_id": cid, "front": True})
    queued = {item[1]: item[0] for item in a.get_json("/queue")["queue_pending"]}
    assert queued[front] < queued[back], queued           # the front one comes first
    e_front, e_back = history(a, front), history(a, back)
    history(a, first)
    for e in (e_front, e_back):
        assert e["status"]["status_str"] == "success", e["status"]
    order = [m[1]["timestamp"] for m in e_front["status"]["messages"] if m[0] == "execution_start"] + \
            [m[1]["timestamp"] for m in e_back["status"]["messages"] if m[0] == "execution_start"]
    assert order[0] < order[1], order                     # and it ran first
    got = {name: {o["action"] for o in report_of(e)["outputs"]} for name, e in (("front", e_front), ("back", e_back))}
    # the front one encoded; the back one, identical, is served by ComfyUI's memory or the cache:
    # its wrappers are "not run" (memory) or "reused" (cache), never encoded again
    assert got["front"] == {"encoded"} and got["back"] <= {"reused", "not run"}, got
    assert a.counts()["text_encode"] == 2, a.counts()      # positive and negative, once each
