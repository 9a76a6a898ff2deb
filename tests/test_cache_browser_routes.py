"""The cache browser's routes (nodes/cache_routes.py) in a real worker.

GET  /seedreuse/browser, GET /seedreuse/budget, GET /seedreuse/caches/{name}/result,
POST /seedreuse/caches/{name}/check, POST /seedreuse/caches/{name}/delete {"confirm": name}

The caches are made by real runs of the worker (a segment run with Prefix Merge: a result video,
segments and two takes; the same whose audio ends inside the last segment, so each take's saved
output is cut at the audio's end while the cache keeps every frame; an encoder-only run: slots,
no result). The list and the takes report the saved output's frames, and the result route serves
the saved output (the same frames as the file Prefix Merge saved), not the cached untrimmed result. The list's sizes and last use are
what the store measures, the result streams the committed file's exact bytes (also a byte range),
a delete needs the confirmation and is refused while a writer or a reader holds the cache, names
that are not plain cache names and symlinked caches are refused without reading anything outside
the root, and check reports OK, then finds a corrupted file.
"""
from __future__ import annotations

import glob
import json
import os
import tempfile
import uuid

import av
import numpy as np
import pytest

from reuse_backend.folder.cache import FolderCache
from reuse_backend.folder import usage
from seedreuse_lab import graphs
from seedreuse_lab.reuse_graphs import SEG, segment_graph, t2v_reuse

pytestmark = pytest.mark.comfy

SMALL = dict(width=32, height=32, length=5, steps=1)
MARKER = "SEEDREUSE-BROWSER-OUTSIDE-7c1d"


def seg_prompt(seed: int, name: str, n: int = 0) -> dict:
    p = segment_graph("seg.png", seed, prefix_segments=n, cache_name=name, F=5, M=1, total_frames=13, steps=1)
    p[SEG.WAN_I2V]["inputs"].update(width=32, height=32)
    p[SEG.SAMPLER]["inputs"]["cfg"] = 1
    return p


def trim_prompt(seed: int, name: str, n: int = 0) -> dict:
    """The segment run whose length follows a 0.6 s track: A = ceil(0.6 * 16) = 10 frames, S = 3
    segments of P(3) = 13 frames; the saved output keeps 10 (the last segment's 3 surplus cut)."""
    p = seg_prompt(seed, name, n)
    p[SEG.SINE]["inputs"]["seconds"] = 0.6
    p[SEG.START]["inputs"]["total_frames"] = 0
    return p


def decoded(path) -> np.ndarray:
    """Every frame of the file's video stream, decoded by PyAV (RGB)."""
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def request(w, method: str, path: str, data=None, headers: dict | None = None):
    """(status, headers, body bytes) of one request (seedreuse_lab/worker.py)."""
    return w.request(method, path, data, headers)


def error_of(raw: bytes) -> dict:
    body = json.loads(raw)
    assert set(body) == {"error"}, body
    return body["error"]


def rows(w) -> dict:
    return {c["name"]: c for c in w.get_json("/seedreuse/browser")["caches"]}


@pytest.fixture(scope="module")
def env(module_workers, tmp_path_factory):
    w = module_workers.one()
    graphs.write_test_image(w.input_dir / "seg.png", seed=7)
    root = module_workers.cache_root
    seg, enc, trim = f"seg-{uuid.uuid4().hex[:6]}", f"enc-{uuid.uuid4().hex[:6]}", f"trim-{uuid.uuid4().hex[:6]}"
    first = w.run(seg_prompt(1, seg)).raise_for_status()
    w.run(seg_prompt(2, seg, n=1)).raise_for_status()          # a second take (resumed at 1)
    saved = [w.output_path(w.run(trim_prompt(s, trim, n)).raise_for_status().output_files(SEG.MERGE)[0])
             for s, n in ((5, 0), (6, 1))]                    # what the user saved of take 1, of take 2
    w.run(t2v_reuse(3, "browser prompt", cache_name=enc, **SMALL)).raise_for_status()
    outside = tmp_path_factory.mktemp("outside")
    (outside / "manifest.json").write_text(json.dumps({"secret": MARKER}))
    (outside / "result.mp4").write_text(MARKER)
    return {"w": w, "root": root, "seg": seg, "enc": enc, "outside": outside, "first": first, "trim": trim,
            "saved": saved}


def test_list_shows_sizes_last_use_slots_segments_takes_and_run(env):
    w, root, seg, enc = env["w"], env["root"], env["seg"], env["enc"]
    got = rows(w)
    s, e = got[seg], got[enc]
    for name, row in ((seg, s), (enc, e)):
        assert row["committed"] and "error" not in row, row
        assert row["bytes"] == usage.tree_size(root / name) > 0
        assert row["last_used"] == pytest.approx(os.lstat(root / name).st_mtime)
        assert row["in_use"] is None
        assert row["manifest_bytes"] == sum(row["files"].values())
    assert list(s["slots"]) and list(e["slots"]) == ["positive"]
    assert s["segments"]["S"] == 3 and s["segments"]["F"] == 5 and s["segments"]["frames"] == 13
    assert [t["take"] for t in s["takes"]] == [2, 1], s["takes"]
    assert s["takes"][0]["seed"] != s["takes"][1]["seed"]
    assert s["result"]["file"] == "result.mp4" and s["result"]["bytes"] == (root / seg / "result.mp4").stat().st_size
    assert e["result"] is None and e["segments"] is None and e["takes"] is None
    manifest = json.loads((root / enc / "manifest.json").read_text())
    assert e["run"] == manifest["run"] and e["run"]["prompt_id"] and e["run"]["host"]
    budget = w.get_json("/seedreuse/budget")
    assert budget["bytes"] == usage.root_size(root) >= s["bytes"] + e["bytes"]
    assert budget["budget"] is None and budget["over_budget"] is False
    assert budget["free"] > 0 and budget["capacity"] >= budget["free"]


def test_every_kept_take_carries_its_seed_frames_and_segments(env):
    """The latest take's record points at the version's segment section (stored once): both
    routes read seed, frames and segments from there, as the older takes' from their records."""
    w, root, seg = env["w"], env["root"], env["seg"]
    m = json.loads((root / seg / "manifest.json").read_text())
    latest = m["sections"]["segments"]
    assert latest["seed"] is not None and latest["frames"] == 13 and latest["spec"]["S"] == 3, latest
    want = [(2, latest["seed"], 13, 3), (1, m["sections"]["takes"]["takes"][1]["segments"]["seed"], 13, 3)]
    assert want[0][1] != want[1][1], want
    listed = rows(w)[seg]["takes"]                         # GET /seedreuse/browser (the cache browser)
    assert [(t["take"], t["seed"], t["frames"], t["segments"]) for t in listed] == want, listed
    assert listed[1]["source_take"] is None and listed[0]["source_take"] == 1, listed
    summary = w.get_json(f"/seedreuse/caches/{seg}")       # GET /seedreuse/caches/{name}
    takes = summary["sections"]["takes"]
    assert [(t["take"], t["seed"], t["frames"], t["segments"]) for t in takes] == want, takes
    assert takes[0]["source_take"] == 1, takes


def test_result_streams_the_exact_bytes(env):
    w, root, seg, enc = env["w"], env["root"], env["seg"], env["enc"]
    want = (root / seg / "result.mp4").read_bytes()
    status, headers, raw = request(w, "GET", f"/seedreuse/caches/{seg}/result")
    assert status == 200 and raw == want
    assert headers["Content-Type"] == "video/mp4" and int(headers["Content-Length"]) == len(want)
    status, headers, raw = request(w, "GET", f"/seedreuse/caches/{seg}/result", headers={"Range": "bytes=10-99"})
    assert status == 206 and raw == want[10:100] and headers["Content-Range"] == f"bytes 10-99/{len(want)}"
    status, _, raw = request(w, "GET", f"/seedreuse/caches/{seg}/result", headers={"Range": "bytes=-16"})
    assert status == 206 and raw == want[-16:]
    status, headers, _ = request(w, "GET", f"/seedreuse/caches/{seg}/result",
                                 headers={"Range": f"bytes={len(want)}-"})
    assert status == 416 and headers["Content-Range"] == f"bytes */{len(want)}"
    # the older kept take's result, by take number; an unknown take and a cache without a result: 404
    old = rows(w)[seg]["takes"][1]
    status, _, raw = request(w, "GET", f"/seedreuse/caches/{seg}/result?take={old['take']}")
    assert status == 200 and raw == (root / seg / old["result"]).read_bytes()
    status, _, raw = request(w, "GET", f"/seedreuse/caches/{seg}/result?take=9")
    assert status == 404 and error_of(raw)["code"] == "no_committed_cache"
    for bad in ("0", "-1", "x", "1.5"):
        status, _, raw = request(w, "GET", f"/seedreuse/caches/{seg}/result?take={bad}")
        assert status == 400 and error_of(raw)["type"] == "InvalidRequestError", bad
    status, _, raw = request(w, "GET", f"/seedreuse/caches/{enc}/result")
    assert status == 404 and "has no result video" in error_of(raw)["message"]
    status, _, raw = request(w, "GET", "/seedreuse/caches/never-made/result")
    assert status == 404 and error_of(raw)["code"] == "no_committed_cache"


def test_the_list_and_the_takes_report_the_saved_output_frames(env):
    """The cache keeps 13 frames per take (resumes chain from them); the user saved 10."""
    w, seg, trim = env["w"], env["seg"], env["trim"]
    got = rows(w)
    t = got[trim]
    assert (t["segments"]["frames"], t["segments"]["output_frames"], t["segments"]["trimmed"]) == (13, 10, 3), t
    assert "3 surplus frame(s) past the audio's end: 10 frames" in t["segments"]["trim"], t["segments"]
    assert [(k["take"], k["frames"], k["output_frames"], k["trimmed"]) for k in t["takes"]] == [(2, 13, 10, 3),
                                                                                            (1, 13, 10, 3)]
    assert all("10 frames" in k["trim"] for k in t["takes"]), t["takes"]
    summary = w.get_json(f"/seedreuse/caches/{trim}")       # GET /seedreuse/caches/{name}
    assert [(k["take"], k["output_frames"], k["trimmed"]) for k in summary["sections"]["takes"]] == [(2, 10, 3),
                                                                                                    (1, 10, 3)]
    # a video that ends with its audio (13 frames of a 13-frame track): saved whole
    s = got[seg]
    assert (s["segments"]["frames"], s["segments"]["output_frames"], s["segments"]["trimmed"]) == (13, 13, 0)
    assert [(k["output_frames"], k["trimmed"]) for k in s["takes"]] == [(13, 0), (13, 0)], s["takes"]


def test_the_result_route_serves_the_saved_output_not_the_cached_result(env, tmp_path):
    w, root, trim = env["w"], env["root"], env["trim"]
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "seedreuse-output-*")))
    for take, saved in ((None, env["saved"][1]), (1, env["saved"][0])):
        path = f"/seedreuse/caches/{trim}/result" + (f"?take={take}" if take else "")
        status, headers, raw = request(w, "GET", path)
        assert status == 200 and int(headers["Content-Length"]) == len(raw), (status, headers)
        served = tmp_path / f"served-{take}.mp4"
        served.write_bytes(raw)
        got, want = decoded(served), decoded(saved)
        assert got.shape[0] == want.shape[0] == 10, (got.shape, want.shape)
        assert np.array_equal(got, want)
        # a byte range of the served video is a range of the same bytes
        status, headers, part = request(w, "GET", path, headers={"Range": "bytes=10-99"})
        assert status == 206 and part == raw[10:100] and headers["Content-Range"] == f"bytes 10-99/{len(raw)}"
    cached = root / trim / "result.mp4"                    # the cache keeps every frame: resumes chain from it
    assert decoded(cached).shape[0] == 13 and np.array_equal(decoded(cached)[:10], decoded(env["saved"][1]))
    # the cut went to temp files that are gone
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "seedreuse-output-*"))) == before


def test_check_reports_ok_then_finds_a_corrupted_file(env):
    w, root, enc = env["w"], env["root"], env["enc"]
    got = w.post_json(f"/seedreuse/caches/{env['seg']}/check")
    assert got == {"name": env["seg"], "ok": True, "problems": []}
    assert w.post_json(f"/seedreuse/caches/{enc}/check")["ok"] is True
    slot = root / enc / rows(w)[enc]["slots"]["positive"]["file"]
    data = bytearray(slot.read_bytes())
    data[-1] ^= 0xFF                       # same size, other content: only the hash can tell
    os.chmod(slot, 0o644)
    slot.write_bytes(bytes(data))
    got = w.post_json(f"/seedreuse/caches/{enc}/check")
    assert got["ok"] is False, got
    hit = [p for p in got["problems"] if p["path"] == f"{enc}/{slot.name}"]
    assert hit and "sha256" in hit[0]["message"] and hit[0]["fix"], got["problems"]
    assert all(not p["path"].startswith("/") for p in got["problems"])
    status, _, raw = request(w, "POST", "/seedreuse/caches/never-made/check", {})
    assert status == 404 and error_of(raw)["code"] == "no_committed_cache"


def test_delete_needs_the_confirmation_and_is_refused_while_in_use(env):
    w, root = env["w"], env["root"]
    name = f"del-{uuid.uuid4().hex[:6]}"
    w.run(t2v_reuse(4, "delete me", cache_name=name, **SMALL)).raise_for_status()
    for body in (None, {}, {"confirm": "other"}, {"confirm": name.upper()}, [name], b"not json"):
        status, _, raw = request(w, "POST", f"/seedreuse/caches/{name}/delete", body)
        err = error_of(raw)
        assert status == 400 and err["type"] == "InvalidRequestError" and "confirmation" in err["message"], body
    assert (root / name / "manifest.json").is_file()
    # a live writer (this process holds the writer lock): refused with the reason, nothing removed
    lock = FolderCache(root, name).writer_lock(f"test-{uuid.uuid4().hex}").acquire()
    try:
        status, _, raw = request(w, "POST", f"/seedreuse/caches/{name}/delete", {"confirm": name})
    finally:
        lock.release()
    err = error_of(raw)
    assert status == 409 and err["code"] == "cache_busy" and "being written by" in err["message"], err
    assert rows(w)[name]["committed"]
    # an open reader (a leased snapshot in this process): refused as well
    snap = FolderCache(root, name).snapshot()
    try:
        assert rows(w)[name]["in_use"].startswith("read by 1 reader")
        status, _, raw = request(w, "POST", f"/seedreuse/caches/{name}/delete", {"confirm": name})
    finally:
        snap.close()
    assert status == 409 and "read by 1 reader" in error_of(raw)["actual"], raw
    # confirmed, nobody using it: gone from the disk and the list
    size = rows(w)[name]["bytes"]
    got = w.post_json(f"/seedreuse/caches/{name}/delete", {"confirm": name})
    assert got == {"deleted": name, "freed_bytes": size}
    assert not (root / name).exists() and name not in rows(w)
    status, _, raw = request(w, "POST", f"/seedreuse/caches/{name}/delete", {"confirm": name})
    assert status == 404 and error_of(raw)["code"] == "no_committed_cache"


@pytest.mark.parametrize("path", [
    "/seedreuse/caches/..%2F..%2Fetc/result", "/seedreuse/caches/a.b/result", "/seedreuse/caches/%2e%2e/check",
    "/seedreuse/caches/..%5Coutside/delete", "/seedreuse/caches/" + "x" * 65 + "/result",
    "/seedreuse/caches/%00x/result", "/seedreuse/caches/.users/result",
])
def test_names_that_are_not_cache_names_are_refused(env, path):
    w = env["w"]
    method = "GET" if path.endswith("/result") else "POST"
    status, _, raw = request(w, method, path, {"confirm": "x"} if method == "POST" else None)
    assert 400 <= status < 500 and "error" in json.loads(raw), (path, status, raw)
    assert MARKER.encode() not in raw


def test_a_symlinked_cache_is_refused_and_nothing_outside_is_read(env):
    w, root, outside = env["w"], env["root"], env["outside"]
    name = f"link-{uuid.uuid4().hex[:6]}"
    os.symlink(outside, root / name)
    try:
        row = rows(w)[name]
        assert not row["committed"] and "symlink" in row["error"]["message"] and row["bytes"] == 0, row
        for method, path, body in (("GET", f"/seedreuse/caches/{name}/result", None),
                                   ("POST", f"/seedreuse/caches/{name}/delete", {"confirm": name})):
            status, _, raw = request(w, method, path, body)
            assert 400 <= status < 500 and MARKER.encode() not in raw, (path, status, raw)
        got = w.post_json(f"/seedreuse/caches/{name}/check")
        assert not got["ok"] and [p["code"] for p in got["problems"]] == ["symlinked_cache_dir"], got
        status, _, raw = request(w, "GET", "/seedreuse/browser")
        assert status == 200 and MARKER.encode() not in raw
        assert (outside / "result.mp4").read_text() == MARKER and (root / name).is_symlink()
    finally:
        os.unlink(root / name)


def test_each_user_sees_and_manages_only_their_own_caches(module_workers):
    """--multi-user: the browser, result, check and delete resolve names under the requesting
    user's namespace only (users.root_of_request)."""
    w = module_workers.one(extra_args=["--multi-user"])
    root = module_workers.cache_root
    alice = w.post_json("/users", {"username": f"alice-{uuid.uuid4().hex[:6]}"})
    bob = w.post_json("/users", {"username": f"bob-{uuid.uuid4().hex[:6]}"})
    name = f"mine-{uuid.uuid4().hex[:6]}"
    w.headers = {"comfy-user": alice}
    w.run(t2v_reuse(5, "alice's cache", cache_name=name, **SMALL)).raise_for_status()
    mine = rows(w)
    assert mine[name]["bytes"] == usage.tree_size(root / ".users" / alice / name)
    assert w.get_json("/seedreuse/budget")["bytes"] == usage.root_size(root / ".users" / alice)
    assert w.post_json(f"/seedreuse/caches/{name}/check")["ok"] is True
    w.headers = {"comfy-user": bob}
    assert name not in rows(w)
    for method, path, body in (("GET", f"/seedreuse/caches/{name}/result", None),
                               ("POST", f"/seedreuse/caches/{name}/check", {}),
                               ("POST", f"/seedreuse/caches/{name}/delete", {"confirm": name})):
        status, _, raw = request(w, method, path, body, headers=w.headers)
        assert status == 404 and error_of(raw)["code"] == "no_committed_cache", (path, status, raw)
    assert (root / ".users" / alice / name / "manifest.json").is_file()
    # issue 27: an unknown user got 403 on the cache list and 400 elsewhere; one status everywhere
    for method, path, body in (("GET", "/seedreuse/browser", None), ("GET", "/seedreuse/caches", None),
                               ("GET", f"/seedreuse/caches/{name}", None), ("GET", "/seedreuse/budget", None),
                               ("GET", f"/seedreuse/caches/{name}/result", None),
                               ("POST", f"/seedreuse/caches/{name}/check", {}),
                               ("POST", f"/seedreuse/caches/{name}/delete", {"confirm": name}),
                               ("POST", "/seedreuse/check", {"prompt": {}})):
        status, _, raw = request(w, method, path, body, headers={"comfy-user": "nobody-here"})
        assert status == 403 and error_of(raw)["code"] == "unknown_user", (path, status, raw)
        assert "unknown ComfyUI user" in error_of(raw)["message"]
    w.headers = {"comfy-user": alice}
    assert w.post_json(f"/seedreuse/caches/{name}/delete", {"confirm": name})["deleted"] == name
    assert not (root / ".users" / alice / name).exists()
