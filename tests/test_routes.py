"""The pack's HTTP routes in a real worker.

GET  /seedreuse/caches            the committed caches (never .tmp / .old / .lock, symlinks, files)
GET  /seedreuse/caches/{name}     manifest summary of a committed cache
POST /seedreuse/check             dry run: what each reuse node will do

The dry run must agree with what execution then does, for a hit, a miss and each kind of
mismatch (prompt text, model file content, reference image content, a volatile upstream node,
segment resume plans), in "auto" (encode) and "require" (fail before sampling) mode. Every
traversal attempt gets a 4xx JSON refusal and nothing outside the cache root is read.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import uuid

import pytest

from seedreuse_lab import graphs
from seedreuse_lab import tiny_models as tm
from seedreuse_lab.graphs import I2V, T2V
from seedreuse_lab.reuse_graphs import SEG, i2v_reuse, segment_graph, t2v_reuse
from seedreuse_lab.worker import default_custom_nodes

pytestmark = pytest.mark.comfy

TEXT_B = "standin_umt5_b.safetensors"   # a text encoder only the model-content test replaces
MARKER = "SEEDREUSE-OUTSIDE-MARKER-9f41c2"
SMALL = dict(width=32, height=32, length=5, steps=1)

VOLATILE_PACK = '''
class RoutesTestVolatileText:
    """A text source whose change token is NaN: ComfyUI re-runs it every time (volatile)."""
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"default": ""})}}
    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "testing"

    @classmethod
    def IS_CHANGED(cls, text):
        return float("nan")

    def run(self, text):
        return (text,)


NODE_CLASS_MAPPINGS = {"RoutesTestVolatileText": RoutesTestVolatileText}
'''


# ====================================================================== fixtures

@pytest.fixture(scope="module")
def env(module_workers, tiny_models, tmp_path_factory):
    base = tmp_path_factory.mktemp("routes")
    models = tiny_models.link_models_dir(base / "models")
    shutil.copyfile(tiny_models.path("text_encoders", tm.TEXT_ENCODER), models / "text_encoders" / TEXT_B)
    pack = base / "routes_test_volatile"
    pack.mkdir()
    (pack / "__init__.py").write_text(VOLATILE_PACK)
    w = module_workers.one(models_dir=models,
                           custom_nodes=[*default_custom_nodes(), ("routes_test_volatile", pack)])
    graphs.write_test_image(w.input_dir / "ref.png", seed=1)
    graphs.write_test_image(w.input_dir / "seg.png", seed=7)
    # outside the cache root: distinctive content that must never be read through a route
    outside = base / "outside"
    outside.mkdir()
    (outside / "manifest.json").write_text(json.dumps({"format": 1, "name": "evil", "secret": MARKER}))
    (outside / "slot_positive.safetensors").write_text(MARKER)
    root = module_workers.cache_root
    return {"w": w, "root": root, "models": models, "outside": outside}


@pytest.fixture
def w(env):
    return env["w"]


def cache_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ====================================================================== helpers

def check(worker, prompt) -> dict:
    return worker.post_json("/seedreuse/check", {"prompt": prompt})


def slot_events(res) -> dict:
    return {e["data"]["node"]: e["data"] for e in res.events_of("seedreuse.slot")}


def fields(mismatch) -> set:
    return {m["field"] for m in mismatch or []}


def first_line(s) -> str:
    """The first line of a message, with volatile tokens (random uuids) masked."""
    return re.sub(r'"volatile": ?"[0-9a-f]{32}"', '"volatile":"*"', str(s or "").split("\n", 1)[0])


def run_checked(worker, prompt, *, expect: dict | None = None):
    """Dry-run ``prompt``, run it, and assert the two agree node by node.

    expect: node id -> "reuse" | "encode" | "fail" that the dry run must predict (others: any).
    Returns (answer, RunResult)."""
    answer = check(worker, prompt)
    nodes = answer["nodes"]
    for nid, will in (expect or {}).items():
        assert nodes[nid]["will"] == will, (nid, nodes[nid])
    res = worker.run(prompt)
    events = slot_events(res)
    fails = {nid: a for nid, a in nodes.items() if a["will"] == "fail"}
    if fails:
        assert res.status == "error", f"the dry run predicted a failure, execution ended {res.status}: {fails}"
        nid = str(res.error["node_id"])
        assert nid in fails, f"execution failed at node {nid}, the dry run predicted {sorted(fails)}"
        assert first_line(res.error["exception_message"]) == first_line(fails[nid]["reason"])
        assert T2V.SAMPLER not in res.executed and I2V.SAMPLER not in res.executed, "sampled before failing"
        return answer, res
    res.raise_for_status()
    for nid, a in nodes.items():
        ev = events.get(nid)
        if a["will"] == "encode":
            assert ev is not None and ev["action"] == "encoded", (nid, a, ev)
            assert ev["reason"] == a["reason"], (nid, ev["reason"], a["reason"])
            assert fields(ev["mismatch"]) == fields(a["mismatch"][:8]), (nid, ev["mismatch"], a["mismatch"])
        elif a["will"] == "reuse":  # restored, or not executed at all (served by ComfyUI / nested reuse)
            assert ev is None or ev["action"] == "reused", (nid, a, ev)
            value = worker_prompt_value(prompt, nid)
            assert value not in res.executed, f"node {nid} predicted reuse but its encoder {value} ran"
    return answer, res


def worker_prompt_value(prompt, nid) -> str | None:
    v = prompt[nid]["inputs"].get("value")
    return v[0] if isinstance(v, list) else None


def committed_key(worker, name, slot) -> str:
    return worker.get_json(f"/seedreuse/caches/{name}")["slots"][slot]["key"]


# ====================================================================== dry run == execution

def test_miss_then_hit_and_manifest_summary(w):
    name = cache_name("hit")
    # miss: nothing committed yet (auto encodes; require would fail)
    p = t2v_reuse(seed=1, prompt_text="a hit test", cache_name=name, **SMALL)
    assert check(w, t2v_reuse(seed=1, prompt_text="a hit test", cache_name=name, reuse="require",
                              **SMALL))["nodes"]["101"]["will"] == "fail"
    answer, res = run_checked(w, p, expect={"101": "encode"})
    assert "no successful run" in answer["nodes"]["101"]["reason"]
    # the committed slot has the key the dry run computed
    summary = w.get_json(f"/seedreuse/caches/{name}")
    assert summary["committed"] is True and summary["name"] == name
    assert summary["slots"]["positive"]["key"] == answer["nodes"]["101"]["key"]
    assert summary["slots"]["positive"]["key_fields"]["value:text"] == "a hit test"
    assert summary["slots"]["positive"]["meta"]["node"] == "SeedReuseEncodeConditioning"
    assert summary["total_bytes"] == sum(f["bytes"] for f in summary["files"].values()) > 0
    assert summary["run"]["prompt_id"] == res.prompt_id
    assert name in w.get_json("/seedreuse/caches")["caches"]
    # hit: a new seed, auto and require
    run_checked(w, t2v_reuse(seed=2, prompt_text="a hit test", cache_name=name, **SMALL), expect={"101": "reuse"})
    _, res = run_checked(w, t2v_reuse(seed=3, prompt_text="a hit test", cache_name=name, reuse="require", **SMALL),
                         expect={"101": "reuse"})
    assert T2V.POS not in res.executed and T2V.TEXT_LOADER not in res.executed
    # an all-hit run publishes nothing: the summary is unchanged
    assert w.get_json(f"/seedreuse/caches/{name}")["version"] == summary["version"]
    # a valid name that was never committed
    assert w.get_json(f"/seedreuse/caches/{cache_name('never')}")["committed"] is False


def test_text_changed(w):
    name = cache_name("text")
    w.run(t2v_reuse(seed=1, prompt_text="first text", cache_name=name, reuse="off", **SMALL)).raise_for_status()
    answer, _ = run_checked(w, t2v_reuse(seed=2, prompt_text="second text", cache_name=name, **SMALL),
                            expect={"101": "encode"})
    assert fields(answer["nodes"]["101"]["mismatch"]) == {"value:text"}
    assert committed_key(w, name, "positive") == answer["nodes"]["101"]["key"]
    answer, res = run_checked(w, t2v_reuse(seed=3, prompt_text="third text", cache_name=name, reuse="require",
                                           **SMALL), expect={"101": "fail"})
    assert "value:text" in res.error["exception_message"]


def test_model_file_content_changed(env, w):
    name = cache_name("model")
    kw = dict(SMALL, text_encoder=TEXT_B, cache_name=name)
    w.run(t2v_reuse(seed=1, prompt_text="model test", **kw)).raise_for_status()
    run_checked(w, t2v_reuse(seed=2, prompt_text="model test", **kw), expect={"101": "reuse"})
    f = env["models"] / "text_encoders" / TEXT_B
    data = bytearray(f.read_bytes())
    data[-1] ^= 1
    f.unlink()
    f.write_bytes(bytes(data))   # same name, new content
    answer, _ = run_checked(w, t2v_reuse(seed=3, prompt_text="model test", reuse="require", **kw),
                            expect={"101": "fail"})
    assert "value.clip:clip_name@content" in fields(answer["nodes"]["101"]["error"]["details"].get("fields"))
    answer, _ = run_checked(w, t2v_reuse(seed=4, prompt_text="model test", **kw), expect={"101": "encode"})
    assert fields(answer["nodes"]["101"]["mismatch"]) == {"value.clip:clip_name@content"}


def test_reference_image_content_changed(w):
    name = cache_name("image")
    graphs.write_test_image(w.input_dir / "ref_img.png", seed=1)
    first, _ = run_checked(w, i2v_reuse("ref_img.png", seed=1, cache_name=name, **SMALL),
                           expect={k: "encode" for k in ("101", "102", "103", "104", "105")})
    run_checked(w, i2v_reuse("ref_img.png", seed=2, cache_name=name, reuse="require", **SMALL),
                expect={k: "reuse" for k in ("101", "102", "103", "104", "105")})
    graphs.write_test_image(w.input_dir / "ref_img.png", seed=2)   # same file name, new pixels
    outer_and_vision = {"101": "fail", "102": "fail", "103": "fail", "105": "fail", "104": "reuse"}
    run_checked(w, i2v_reuse("ref_img.png", seed=3, cache_name=name, reuse="require", **SMALL),
                expect=outer_and_vision)
    answer, res = run_checked(w, i2v_reuse("ref_img.png", seed=3, cache_name=name, **SMALL),
                              expect={**{k: "encode" for k in ("101", "102", "103", "105")}, "104": "reuse"})
    changed = fields(answer["nodes"]["105"]["mismatch"])
    assert any(f.endswith("#is_changed") for f in changed) and any(f.endswith(":image@content") for f in changed)
    assert I2V.POS not in res.executed   # the text slot was restored although its neighbours encoded


def test_volatile_upstream_never_reuses(w):
    name = cache_name("volatile")

    def prompt(seed, reuse="auto"):
        p = t2v_reuse(seed=seed, prompt_text="ignored", cache_name=name, reuse=reuse, **SMALL)
        p["50"] = {"class_type": "RoutesTestVolatileText", "inputs": {"text": "a volatile prompt"}}
        p[T2V.POS]["inputs"]["text"] = ["50", 0]
        return p

    run_checked(w, prompt(1), expect={"101": "encode"})
    answer, _ = run_checked(w, prompt(2), expect={"101": "encode"})
    assert fields(answer["nodes"]["101"]["mismatch"]) == {"value.text#is_changed"}
    run_checked(w, prompt(3, "require"), expect={"101": "fail"})


def test_literals_as_the_frontend_sends_them(w):
    """The canvas sends a FLOAT widget holding 1.0 as the JSON number 1; ComfyUI's validation turns
    it into 1.0 before execution computes keys. The dry run must do the same (it used to report
    'inputs changed (value:end, value:start)' for a run that then reused)."""
    name = cache_name("floats")

    def prompt(seed):
        p = t2v_reuse(seed=seed, prompt_text="float test", cache_name=name, **SMALL)
        graphs.insert_between(p, T2V.POS, 0, "101", "value", "ConditioningSetTimestepRange",
                              {"start": 0, "end": 1}, input_name="conditioning", node_id="50")
        return p

    sent = json.loads(json.dumps(prompt(1)))["50"]["inputs"]
    assert type(sent["start"]) is int and type(sent["end"]) is int   # what goes over the wire
    run_checked(w, prompt(1), expect={"101": "encode"})
    run_checked(w, prompt(2), expect={"101": "reuse"})


# ====================================================================== segments

def seg_prompt(seed, name, n=0, reuse="auto", text="a talking test head", total_frames=13, audio=True):
    p = segment_graph("seg.png", seed, prefix_segments=n, reuse=reuse, cache_name=name, F=5, M=1,
                      total_frames=total_frames, steps=1, prompt_text=text, audio=audio)
    p[SEG.WAN_I2V]["inputs"].update(width=32, height=32)
    p[SEG.START]["inputs"]["fps"] = 16          # as the canvas sends 16.0
    p[SEG.SAMPLER]["inputs"]["cfg"] = 1
    return p


def run_segments_checked(worker, prompt, *, will: str):
    answer = check(worker, prompt)
    a = answer["segments"][SEG.START]
    assert a["will"] == will, a
    res = worker.run(prompt)
    sampled = sum(1 for e in res.events if e.get("type") == "executing"
                  and (e.get("data") or {}).get("display_node") == SEG.SAMPLER)
    if will == "fail":
        assert res.status == "error" and sampled == 0
        assert first_line(res.error["exception_message"]) == first_line(a["reason"]), (res.error, a)
        return a, res
    res.raise_for_status()
    ev = [e["data"] for e in res.events_of("seedreuse.segments")][0]
    n = a["N"]
    assert ev["segments"] == a["S"] and ev["kept"] == n and n in a["valid_n"]
    assert ev["prefix_frames"] == a["prefix_frames_by_n"][n] and ev["plan"] == a["plan"]
    assert sampled == a["S"] - n
    return a, res


def test_segment_plans_agree_with_execution(w):
    name = cache_name("seg")
    a = check(w, seg_prompt(1, name))["segments"][SEG.START]
    assert a["valid"] and a["S"] == 3 and a["valid_n"] == [0] and a["prefix_frames_by_n"] == [0, 5, 9]
    run_segments_checked(w, seg_prompt(1, name, n=1), will="fail")            # nothing to resume from
    run_segments_checked(w, seg_prompt(1, name), will="generate")
    a = check(w, seg_prompt(2, name, n=1))["segments"][SEG.START]
    assert a["valid_n"] == [0, 1, 2] and a["previous"]["segments"] == 3 and a["previous"]["seed"] == 1
    run_segments_checked(w, seg_prompt(2, name, n=2, reuse="require"), will="resume")
    a, _ = run_segments_checked(w, seg_prompt(3, name, n=3), will="fail")     # N must be < S
    assert "smaller than the segment count" in a["reason"]
    a, _ = run_segments_checked(w, seg_prompt(3, name, n=1, text="another text"), will="fail")
    assert "differ" in a["reason"] and "text" in a["reason"]
    # the length comes from the audio (total_frames 0), but there is none
    a, _ = run_segments_checked(w, seg_prompt(3, name, total_frames=0, audio=False), will="fail")
    assert "no audio is connected" in a["reason"]


# ====================================================================== refusals, traversal

def raw_request(worker, method: str, path: str, body: bytes | None = None):
    """Send the path exactly as given (no client-side normalisation)."""
    conn = http.client.HTTPConnection("127.0.0.1", worker.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        if body is not None:
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body is not None:
            conn.send(body)
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read()
    finally:
        conn.close()


TRAVERSAL_NAMES = ["..", "../x", "..%2Fx", "%2e%2e", "%2e%2e%2f%2e%2e%2fetc", "%2Fetc", "%2fetc%2fpasswd",
                   "..%5c..%5cx", "a%2Fb", "%00", "a%00b", "x.tmp", "x.lock", ".hidden", "%20", "evil",
                   "evil2", "ghost", "%252e%252e", "a" * 65, "caf%C3%A9"]
RAW_PATHS = ["/seedreuse/caches/../../etc/passwd", "/seedreuse/caches//etc", "/seedreuse/caches/",
             "/seedreuse/caches/./x", "/seedreuse/caches/x/..", "/seedreuse//caches/evil",
             "/seedreuse/caches/evil/manifest.json", "/seedreuse/check/../caches/evil"]


@pytest.fixture(scope="module")
def booby_trapped_root(env):
    """Entries inside the cache root that lead outside it."""
    root, outside = env["root"], env["outside"]
    (root / "evil").symlink_to(outside, target_is_directory=True)        # a cache folder -> outside
    (root / "evil2").mkdir()
    (root / "evil2" / "manifest.json").symlink_to(outside / "manifest.json")  # a manifest -> outside
    (root / "ghost.old").symlink_to(outside, target_is_directory=True)   # only a ".old" -> outside
    (root / "plainfile").write_text(MARKER)
    return root


def _assert_refusal(status, ctype, body, what):
    assert 400 <= status < 500, f"{what}: status {status}: {body[:300]!r}"
    assert ctype.startswith("application/json"), f"{what}: not JSON ({ctype}): {body[:300]!r}"
    err = json.loads(body)["error"]
    assert err.get("message") and err.get("type"), (what, err)


def test_traversal_attempts_are_refused_and_read_nothing_outside(w, env, booby_trapped_root):
    secret_hashes = {hashlib.sha256(p.read_bytes()).hexdigest() for p in env["outside"].iterdir()}
    bodies = []

    def seen(body: bytes):
        bodies.append(body)
        return body

    for prefix in ("/seedreuse", "/api/seedreuse"):
        for name in TRAVERSAL_NAMES:
            status, ctype, body = raw_request(w, "GET", f"{prefix}/caches/{name}")
            _assert_refusal(status, ctype, seen(body), f"GET {prefix}/caches/{name}")
        for path in RAW_PATHS:
            path = path.replace("/seedreuse", prefix, 1)
            status, ctype, body = raw_request(w, "GET", path)
            _assert_refusal(status, ctype, seen(body), f"GET {path}")
    # a symlinked cache folder, a symlinked manifest and a symlinked .old are corrupt, not followed
    for name in ("evil", "evil2", "ghost"):
        status, _, body = raw_request(w, "GET", f"/seedreuse/caches/{name}")
        assert status == 400 and json.loads(seen(body))["error"]["code"] == "corrupt_cache", body
    # the listing shows no symlink, sibling or file
    listing = w.get_json("/seedreuse/caches")["caches"]
    bodies.append(json.dumps(listing).encode())
    assert not {"evil", "ghost", "ghost.old", "plainfile"} & set(listing)
    assert all(not n.endswith((".tmp", ".old", ".lock")) for n in listing)
    # the dry run: every cache name of a session is checked before anything is opened
    for bad in ["..", "../x", "/etc", "a/b", "", "\x00", "x\x00", "x.tmp"]:
        p = t2v_reuse(seed=1, prompt_text="traversal", **SMALL)
        p["100"]["inputs"]["cache_name"] = bad
        answer = check(w, p)
        bodies.append(json.dumps(answer).encode())
        a = answer["nodes"]["101"]
        assert a["will"] == "fail" and a["error"]["type"] == "InvalidCacheNameError", (bad, a)
        seg = seg_prompt(1, "x")
        seg["100"]["inputs"]["cache_name"] = bad
        s = check(w, seg)["segments"][SEG.START]
        bodies.append(json.dumps(s).encode())
        assert s["will"] == "fail" and s["valid"] is False, (bad, s)
    # symlinked (hostile) cache folders are never followed: unreadable, so `auto` rebuilds them
    # (the commit replaces the symlink itself), `require` fails, and a resume (N > 0) fails
    for bad in ["evil", "evil2", "ghost"]:
        for mode, want in (("auto", "encode"), ("require", "fail")):
            p = t2v_reuse(seed=1, prompt_text="traversal", reuse=mode, **SMALL)
            p["100"]["inputs"]["cache_name"] = bad
            a = check(w, p)["nodes"]["101"]
            bodies.append(json.dumps(a).encode())
            assert a["will"] == want, (bad, mode, a)
            assert "unreadable" in (a.get("reason") or ""), (bad, mode, a)
        seg = seg_prompt(1, "x")
        seg["100"]["inputs"]["cache_name"] = bad
        s = check(w, seg)["segments"][SEG.START]
        bodies.append(json.dumps(s).encode())
        assert s["will"] == "generate" and s["cache_unreadable"], (bad, s)
        seg["100"]["inputs"]["reuse_prefix_segments"] = 1
        s = check(w, seg)["segments"][SEG.START]
        bodies.append(json.dumps(s).encode())
        assert s["will"] == "fail" and s["error"]["type"] == "CorruptCacheError", (bad, s)
    # ... and execution refuses the same names at validation (POST /prompt -> 400)
    from seedreuse_lab.worker import PromptRejected
    p = t2v_reuse(seed=1, prompt_text="traversal", **SMALL)
    p["100"]["inputs"]["cache_name"] = "../x"
    with pytest.raises(PromptRejected) as ei:
        w.queue(p)
    assert "cache name" in json.dumps(ei.value.body)
    # malformed check requests
    for body in (b"not json", b"[]", b'{"prompt": []}', b'{"prompt": {"1": 5}}',
                 b'{"prompt": {"1": {"class_type": "SeedReuseEncodeConditioning", "inputs": []}}}',
                 b'{"prompt": {"1": {"class_type": 7, "inputs": {}}}}'):
        status, ctype, out = raw_request(w, "POST", "/seedreuse/check", body)
        _assert_refusal(status, ctype, seen(out), f"POST /seedreuse/check {body!r}")
    for body in bodies:
        text = body.decode(errors="replace")
        assert MARKER not in text, "content from outside the cache root reached a response"
        assert not any(h in text for h in secret_hashes), "a hash of a file outside the root reached a response"


def test_a_text_naming_a_file_outside_is_not_read(w, env):
    """A prompt text that is a path outside ComfyUI's input/output/temp folders is plain text to
    the key walk: that file is never read or hashed."""
    name = cache_name("leak")
    target = env["outside"] / "manifest.json"
    secret = hashlib.sha256(target.read_bytes()).hexdigest()
    p = t2v_reuse(seed=1, prompt_text=str(target), cache_name=name, **SMALL)
    first = json.dumps(check(w, p))
    w.run(p).raise_for_status()
    p2 = t2v_reuse(seed=2, prompt_text=os.path.relpath(target, w.input_dir), cache_name=name, **SMALL)
    second = json.dumps(check(w, p2))
    summary = json.dumps(w.get_json(f"/seedreuse/caches/{name}"))
    assert secret not in first + second + summary


def test_check_accepts_nodes_the_server_lacks(w):
    """The canvas exports a node whose type the server does not have without class_type; the dry
    run answers for the rest of the workflow (the web extension posts such prompts)."""
    p = t2v_reuse(seed=1, prompt_text="unknown node", cache_name=cache_name("unknown"), **SMALL)
    p["60"] = {"inputs": {"audio": "speech.wav"}, "_meta": {"title": "Load Audio"}}
    p["61"] = {"class_type": "NoSuchNodeType", "inputs": {"x": ["60", 0]}}
    answer = check(w, p)
    assert answer["nodes"]["101"]["will"] == "encode"
