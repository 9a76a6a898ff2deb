"""Automatic mode (SEEDREUSE_AUTO, nodes/auto_mode.py) on real workers: a plain HTTP client queues
the API form of ComfyUI's official templates, unchanged, and they are made reusable on arrival.

Workers A and B (setting on) share one cache root; worker C has the setting off. Per template
(Wan 2.1 T2V and I2V, Wan 2.2 14B T2V, Qwen-Image, Qwen-Image-Edit, and InfiniteTalk where the
worker registers WanInfiniteTalkToVideo): A runs it (every wrapped slot encoded, an automatic
cache named from the encoder inputs under ``<root>/.auto/``), B, a fresh process, runs it with a
new seed: no wrapped encoder and no loader feeding only them executes, the samplers do, the
output has the same shape. Each run's report (what each wrapped output did, the time saved) is
the same in the history, in the ``seedreuse.auto_report`` message to the queuing websocket client
and in ``execution_success``; another connected client gets none. Also: the setting off changes
nothing, the per-request switch overrides the setting both ways, two prompts get two caches, a
prompt with a Session is untouched, a bad switch value is a 400 naming the accepted values, the
dry run answers for the prompt as it would be instrumented.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from reuse_backend.workflow import instrument
from reuse_backend.workflow.node_types import PACK_NODES
from reuse_backend.workflow.ui_to_api import convert
from seedreuse_lab import graphs
from seedreuse_lab.official_templates import (IMAGE, TEMPLATES, decoded_outputs, encoder_work, for_test_host,
                                              layouts, load_template, stock_talk_on, templates_models_dir)
from seedreuse_lab.worker import PromptRejected

pytestmark = pytest.mark.comfy

TALK = "video_wan2_1_infinitetalk"
AUTO_TEMPLATES = ["text_to_video_wan", "image_to_video_wan", "video_wan2_2_14B_t2v", "image_qwen_image",
                  "image_qwen_image_edit", TALK]


@pytest.fixture(scope="module")
def workers(module_workers, tiny_models, tmp_path_factory):
    models = templates_models_dir(tiny_models, tmp_path_factory.mktemp("auto-models"))
    a, b = module_workers(2, models_dir=models, env={"SEEDREUSE_AUTO": "1"}, name_prefix="on")
    c = module_workers.one(models_dir=models, name_prefix="off")
    for w in (a, b, c):
        graphs.write_test_image(w.input_dir / IMAGE, 64, 64, seed=7)
    return a, b, c, module_workers.cache_root


@pytest.fixture(scope="module")
def object_info(workers) -> dict:
    return workers[0].object_info()


def api_form(name: str, info: dict, *, seed: int, prefix: str) -> dict:
    """The template as a client sends it: the frontend's API export, on the test host's models
    (InfiniteTalk with its stock nodes where the worker has them)."""
    api, problems = convert(load_template(name), info, overrides=layouts(info))
    assert not [x for x in problems if "not a class of this host" in x], problems
    return for_test_host(api, TEMPLATES[name], seed=seed, prefix=prefix, stock_talk=stock_talk_on(info))


def queued(res) -> tuple[dict, dict]:
    """(the prompt as the server queued it, its extra_data) from the history entry."""
    entry = res.history["prompt"]
    return entry[2], entry[3]


def auto_report(res) -> dict:
    return queued(res)[1].get("seedreuse_auto_report")


def finished_report(res) -> dict:
    """The report of a run that succeeded as the client that queued it sees it: the history's, the
    one ``seedreuse.auto_report`` message to its websocket and the ``execution_success`` data
    carry the same outcomes."""
    hist = auto_report(res)
    msgs = [e["data"] for e in res.events_of("seedreuse.auto_report")]
    assert len(msgs) == 1 and msgs[0]["prompt_id"] == res.prompt_id, msgs
    success = next(e["data"] for e in res.events if e["type"] == "execution_success")
    assert msgs[0] == {"prompt_id": res.prompt_id, **hist} and success["seedreuse_auto_report"] == hist, \
        (hist, msgs[0], success)
    return hist


def slot_outputs(res) -> dict:
    """slot -> the wrapper's history output (reused / encoded, time saved)."""
    out = {}
    for ui in res.outputs.values():
        for p in ui.get("seedreuse") or []:
            out[p["slot"]] = p
    return out


def output_shapes(worker, res, prompt) -> list:
    return [a.shape for a in decoded_outputs(worker, res, prompt)]


def post(worker, path: str, body) -> tuple[int, dict]:
    req = urllib.request.Request(worker.url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def auto_caches(root: Path) -> set:
    d = root / ".auto"
    return {p.name for p in d.iterdir() if p.is_dir() and not p.name.startswith(".") and "." not in p.name} \
        if d.is_dir() else set()


@pytest.mark.parametrize("name", AUTO_TEMPLATES)
def test_template_queued_unchanged_is_reused_on_another_worker(name, workers, object_info):
    a, b, _, root = workers
    if name == TALK and not stock_talk_on(object_info):
        pytest.skip("InfiniteTalk in automatic mode runs where the worker registers WanInfiniteTalkToVideo "
                    "(ComfyUI 0.33); this host has only the family stand-ins, which tests/templates runs")
    for w in (a, b):
        w.free(settle=0)
        w.reset_counts()
    pa = api_form(name, object_info, seed=1, prefix=f"auto_{name}_a")
    ra = a.run(pa, timeout=600).raise_for_status()
    rep = auto_report(ra)
    assert rep and rep["applied"] and rep["wrapped"], rep
    assert rep["cache"].startswith("auto-") and rep["namespace"] == ".auto"
    wrapped = {w["slot"]: w["producer"]["node"] for w in rep["wrapped"]}
    prompt_a, extra_a = queued(ra)
    assert sum(n["class_type"] == "SeedReuseSession" for n in prompt_a.values()) == 1
    assert prompt_a[rep["session"]]["inputs"]["automatic"] is True
    assert set(pa) <= set(prompt_a) and all(prompt_a[k]["class_type"] == v["class_type"] for k, v in pa.items())
    assert {prompt_a[k]["class_type"] for k in set(prompt_a) - set(pa)} <= PACK_NODES
    untouched = [k for k, v in pa.items()
                 if not any(isinstance(x, list) and x[0] in wrapped.values() for x in v["inputs"].values())]
    assert untouched and all(prompt_a[k] == pa[k] for k in untouched), "only readers of a wrapped output change"
    ev = slot_outputs(ra)
    assert set(ev) == set(wrapped) and all(e["action"] == "encoded" for e in ev.values()), ev
    done = finished_report(ra)
    assert [(o["slot"], o["action"]) for o in done["outputs"]] == [(s, "encoded") for s in wrapped], done
    assert (done["encoded"], done["reused"], done["not_run"]) == (len(wrapped), 0, 0)
    manifest = json.loads((root / ".auto" / rep["cache"] / "manifest.json").read_text())
    assert set(manifest["slots"]) == set(wrapped)
    assert not (root / rep["cache"]).exists(), "an automatic cache is never in the named namespace"

    pb = api_form(name, object_info, seed=2, prefix=f"auto_{name}_b")
    assert pb != pa
    rb = b.run(pb, timeout=600).raise_for_status()
    rep_b = auto_report(rb)
    assert rep_b["applied"] and rep_b["cache"] == rep["cache"], "the same encoder inputs name the same cache"
    ev = slot_outputs(rb)
    assert set(ev) == set(wrapped) and all(e["action"] == "reused" for e in ev.values()), ev
    assert all(e["saved_seconds"] >= 0 and "load_seconds" in e for e in ev.values())
    done = finished_report(rb)
    assert [(o["slot"], o["action"]) for o in done["outputs"]] == [(s, "reused") for s in wrapped], done
    assert all(o["saved_seconds"] == round(ev[o["slot"]]["saved_seconds"], 4) for o in done["outputs"]), (done, ev)
    assert done["reused"] == len(wrapped) and done["saved_seconds"] == round(
        sum(o["saved_seconds"] for o in done["outputs"]), 4)
    work = encoder_work(pb, rb, b.counts(), wrapped)
    assert not any(work.values()), f"the second worker did encoder work, or did not sample: {work}"
    assert output_shapes(a, ra, pa) == output_shapes(b, rb, pb)


def test_setting_off_changes_nothing_and_the_switch_overrides_both_ways(workers, object_info):
    a, _, c, root = workers
    name = "text_to_video_wan"
    p = api_form(name, object_info, seed=11, prefix="auto_off")
    before = auto_caches(root)
    rc = c.run(p, timeout=600).raise_for_status()
    prompt, extra = queued(rc)
    assert prompt == p and "seedreuse_auto_report" not in extra and not slot_outputs(rc)
    assert not rc.events_of("seedreuse.auto_report")
    # off by request on a worker where it is on
    ra = a.run(p, timeout=600, extra_data={"seedreuse_auto": False}).raise_for_status()
    assert queued(ra)[0] == p and not slot_outputs(ra) and not ra.events_of("seedreuse.auto_report")
    assert auto_caches(root) == before
    # on by request on the worker where it is off
    p2 = json.loads(json.dumps(p))
    next(n for n in p2.values() if n["class_type"].endswith("TextEncode"))["inputs"]["text"] += " (switch)"
    rc = c.run(p2, timeout=600, extra_data={"seedreuse_auto": True}).raise_for_status()
    rep = finished_report(rc)
    assert rep["applied"] and all(e["action"] == "encoded" for e in slot_outputs(rc).values())
    assert rep["encoded"] == len(rep["wrapped"]) and not rep["reused"]
    assert auto_caches(root) == before | {rep["cache"]}


def test_two_prompts_get_two_caches_and_a_session_is_untouched(workers, object_info):
    a, _, _, root = workers
    name = "text_to_video_wan"
    p1 = api_form(name, object_info, seed=21, prefix="auto_two")
    p2 = json.loads(json.dumps(p1))
    next(n for n in p2.values() if n["class_type"].endswith("TextEncode"))["inputs"]["text"] = "another prompt"
    r1 = a.run(p1, timeout=600).raise_for_status()
    # the user's workflow in extra_data is never changed (here: a client that sends one)
    wf = {"nodes": [], "links": [], "note": name}
    r2 = a.run(p2, timeout=600, extra_data={"extra_pnginfo": {"workflow": wf}}).raise_for_status()
    assert queued(r2)[1]["extra_pnginfo"] == {"workflow": wf}
    n1, n2 = auto_report(r1)["cache"], auto_report(r2)["cache"]
    assert n1 != n2 and {n1, n2} <= auto_caches(root)
    # a prompt with a Session (the canvas action's output) is queued exactly as it came
    mine, rep = instrument(p1, cache_name="my-named-cache", object_info=object_info)
    assert rep["changed"]
    rm = a.run(mine, timeout=600).raise_for_status()
    prompt, extra = queued(rm)
    assert prompt == mine and extra["seedreuse_auto_report"]["applied"] is False
    assert "already has SeedReuse nodes" in extra["seedreuse_auto_report"]["reason"]
    assert not rm.events_of("seedreuse.auto_report") and "seedreuse_auto_report" not in next(
        e["data"] for e in rm.events if e["type"] == "execution_success"), "left alone quietly: no report sent"
    assert (root / "my-named-cache" / "manifest.json").is_file()


@pytest.mark.parametrize("value", ["yes", 1, "true", [True], {"on": True}])
def test_a_bad_switch_is_refused_before_queueing(workers, object_info, value):
    a = workers[0]
    p = api_form("text_to_video_wan", object_info, seed=31, prefix="auto_bad")
    queue_before = a.get_json("/queue")
    with pytest.raises(PromptRejected) as ei:
        a.queue(p, extra_data={"seedreuse_auto": value})
    e = ei.value
    assert e.status == 400 and "true or false" in e.error["expected"] and e.error["fix"], e.body
    assert e.error["actual"] == json.dumps(value) and e.node_errors == {}
    assert len(a.get_json("/queue")["queue_pending"]) == len(queue_before["queue_pending"])
    status, body = post(a, "/seedreuse/check", {"prompt": p, "extra_data": {"seedreuse_auto": value}})
    assert status == 400 and "true or false" in body["error"]["expected"], body


def test_dry_run_answers_for_the_prompt_as_it_would_be_instrumented(workers, object_info):
    a, _, c, _ = workers
    p = api_form("text_to_video_wan", object_info, seed=41, prefix="auto_check")
    r = a.run(p, timeout=600).raise_for_status()           # commits the automatic cache
    name = auto_report(r)["cache"]
    status, body = post(a, "/seedreuse/check", {"prompt": p})
    assert status == 200 and body["auto"]["applied"] and body["auto"]["cache"] == name, body
    answers = list(body["nodes"].values())
    assert answers and all(x["will"] == "reuse" and x["cache"] == name for x in answers), answers
    status, body = post(a, "/seedreuse/check", {"prompt": p, "extra_data": {"seedreuse_auto": False}})
    assert status == 200 and body["nodes"] == {} and "auto" not in body
    status, body = post(c, "/seedreuse/check", {"prompt": p})
    assert status == 200 and body["nodes"] == {} and "auto" not in body
    status, body = post(c, "/seedreuse/check", {"prompt": p, "extra_data": {"seedreuse_auto": True}})
    assert status == 200 and all(x["will"] == "reuse" for x in body["nodes"].values()) and body["nodes"], body


def _read_until(ws, pred, what: str) -> list:
    """Messages of a websocket-client connection up to and including the first one ``pred``
    accepts (binary preview frames skipped); a 600 s deadline only bounds a hung worker."""
    import websocket
    seen, deadline = [], time.monotonic() + 600
    while time.monotonic() < deadline:
        ws.settimeout(max(1.0, deadline - time.monotonic()))
        try:
            msg = ws.recv()
        except websocket.WebSocketTimeoutException:
            break
        if isinstance(msg, bytes):
            continue
        seen.append(json.loads(msg))
        if pred(seen[-1]):
            return seen
    raise AssertionError(f"no {what} on the websocket; saw {[m.get('type') for m in seen]}")


def test_the_report_goes_to_the_client_that_queued_the_prompt_only(workers, object_info):
    """A plain websocket client (websocket-client, no ComfyUI code) that queued the prompt over HTTP
    with its client id gets ``seedreuse.auto_report`` before ``execution_success``; a client
    connected meanwhile with another id gets no report (it hears the queue's status broadcasts,
    up to the one after the prompt finished, which the server sends after the report)."""
    import websocket
    a = workers[0]
    p = api_form("text_to_video_wan", object_info, seed=71, prefix="auto_ws")
    text = next(n for n in p.values() if n["class_type"].endswith("TextEncode"))["inputs"]
    text["text"] += f" (websocket {uuid.uuid4().hex[:8]})"      # new encoder inputs: encoded, not ComfyUI-cached
    mine, other = uuid.uuid4().hex, uuid.uuid4().hex
    ws = websocket.create_connection(f"ws://127.0.0.1:{a.port}/ws?clientId={mine}", timeout=30)
    by = websocket.create_connection(f"ws://127.0.0.1:{a.port}/ws?clientId={other}", timeout=30)
    try:
        status, body = post(a, "/prompt", {"prompt": p, "client_id": mine})
        assert status == 200, body
        pid = body["prompt_id"]

        def ended(m):
            return m["type"] in ("execution_success", "execution_error") and m["data"].get("prompt_id") == pid
        got = _read_until(ws, ended, "end of the prompt")
        assert got[-1]["type"] == "execution_success", got[-1]
        reports = [m["data"] for m in got if m["type"] == "seedreuse.auto_report"]
        assert len(reports) == 1 and reports[0]["prompt_id"] == pid and reports[0]["applied"], reports
        outs = reports[0]["outputs"]
        assert outs and all(o["action"] == "encoded" and o["slot"] and o["producer"] for o in outs), outs
        assert got[-1]["data"]["seedreuse_auto_report"] == {k: v for k, v in reports[0].items() if k != "prompt_id"}
        busy = [False]

        def idle_after_busy(m):
            q = (((m.get("data") or {}).get("status") or {}).get("exec_info") or {}).get("queue_remaining")
            if m["type"] == "status" and q is not None:
                busy[0] = busy[0] or q > 0
                return busy[0] and q == 0
            return False
        heard = _read_until(by, idle_after_busy, "status broadcast after the prompt")
        assert not [m for m in heard if str(m["type"]).startswith("seedreuse.") or m["type"] == "execution_success"], \
            [m["type"] for m in heard]
    finally:
        ws.close()
        by.close()


def test_the_instrumenters_pack_nodes_are_the_packs_classes(workers, object_info):
    """node_types.PACK_NODES (what automatic mode leaves alone) is exactly the pack's classes."""
    module = object_info["SeedReuseSession"]["python_module"]
    ours = {k for k, v in object_info.items() if v.get("python_module") == module}
    assert ours == set(PACK_NODES)
    assert any(k.startswith("SeedReuseTest") for k in object_info), "the stand-ins are not pack nodes"
    assert "automatic mode (SEEDREUSE_AUTO) on" in workers[0].log_text() and "SEEDREUSE_AUTO" in workers[0].log_text()


def test_a_prompt_the_instrumenter_cannot_handle_runs_unchanged_with_one_warning(workers, object_info):
    """Beyond the instrumenter's node limit (workflow/limits.py): queued as it came, the run
    succeeds, one warning in the log and in the history."""
    a = workers[0]
    p = api_form("text_to_video_wan", object_info, seed=51, prefix="auto_large")
    for i in range(2001):      # unconnected nodes: ComfyUI never runs them, the instrumenter counts them
        p[f"{9000 + i}"] = {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}}
    log_before = a.log_text().count("automatic mode left a prompt unchanged")
    r = a.run(p, timeout=600).raise_for_status()
    prompt, extra = queued(r)
    assert prompt == p and not slot_outputs(r)
    rep = extra["seedreuse_auto_report"]
    assert rep["applied"] is False and "cannot handle" in rep["warning"] and "2000" in rep["warning"], rep
    assert finished_report(r) == rep and "outputs" not in rep, "the warning reaches the client too"
    assert a.log_text().count("automatic mode left a prompt unchanged") == log_before + 1


def test_multi_user_automatic_caches_are_per_user(workers, module_workers, object_info):
    """--multi-user: each user's automatic caches are in that user's namespace (.users/<u>/.auto);
    the same prompt from another user encodes into its own cache, never reads the first's."""
    import uuid
    a, _, _, root = workers
    w = module_workers.one(models_dir=a.models_dir, env={"SEEDREUSE_AUTO": "1"}, extra_args=["--multi-user"],
                           name_prefix="mu")
    graphs.write_test_image(w.input_dir / IMAGE, 64, 64, seed=7)
    users = [w.post_json("/users", {"username": f"{n}-{uuid.uuid4().hex[:6]}"}) for n in ("alice", "bob")]
    p = api_form("text_to_video_wan", object_info, seed=61, prefix="auto_mu")
    p[next(k for k, n in p.items() if n["class_type"].endswith("TextEncode"))]["inputs"]["text"] = "per user"
    names = []
    try:
        for user in users:
            w.headers = {"comfy-user": user}
            r = w.run(p, timeout=600).raise_for_status()
            rep = auto_report(r)
            assert rep["applied"] and all(e["action"] == "encoded" for e in slot_outputs(r).values()), rep
            assert (root / ".users" / user / ".auto" / rep["cache"] / "manifest.json").is_file()
            names.append(rep["cache"])
    finally:
        w.headers = {}
    assert names[0] == names[1], "the name comes from the encoder inputs alone"
    assert not (root / ".auto" / names[0]).exists()
