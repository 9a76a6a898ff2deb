"""Everything the pack offers on a folder, on a bucket (issue 34 item 6): real ComfyUI workers whose
cache is a prefix of a bucket on a real Ceph RGW (``SEEDREUSE_CACHE_URL=s3://...``).

Workers, started once for the module: ``A`` (``--multi-user``) and ``B`` share the prefix ``U``,
each with its own local tier (two hosts), both with automatic mode on (``SEEDREUSE_AUTO=1``: a
prompt with the pack's nodes is left as it is). ``C`` commits to its own prefix under a size
budget (``SEEDREUSE_MAX_BYTES``: two and a half caches of one text slot). ``D`` is a folder
worker: the reference for "as on a folder", the same prompts on A and D give answers of the same
shape, and the same values wherever they do not name a run, a time or an allocation.

Asserted: the cache routes (list, one cache with its segments and takes, the browser, the budget,
the result file with a byte range, check, delete) on the bucket; check finds an object replaced in
the bucket also on the worker that uploaded it; the budget evicts the least recently used caches
and never one that a reader or a writer holds; each user's caches live under their own prefix and
no other user reaches them; automatic mode reuses across workers; the dry run answers from the
bucket; the CLI's list, inspect, check [--repair], clear and gc. Not repeated here: Encoder and
Segment Reuse through the bucket, a failed run, probe (test_workers_on_bucket.py, on both hosts).

Runs once per scripts/test.sh run, on ComfyUI 0.33.0 (marker ``one_host``, tests/conftest.py): the
routes and the CLI read the store through reuse_backend, and the host-facing part of the routes
is the same on both hosts (tests/test_cache_browser_routes.py runs it on each folder worker).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from reuse_backend.bucket.client import NotFound
from reuse_backend.bucket.store import BucketStore
from reuse_backend.store import take_index
from seedreuse_lab import graphs
from seedreuse_lab.reuse_graphs import SEG, segment_graph, t2v_reuse

pytestmark = [pytest.mark.comfy, pytest.mark.one_host("0.33.0")]
REPO = Path(__file__).resolve().parents[2]
SMALL = dict(width=32, height=32, length=5, steps=1)


def seg_prompt(seed: int, name: str, n: int = 0) -> dict:
    p = segment_graph("seg.png", seed, prefix_segments=n, cache_name=name, F=5, M=1, total_frames=13, steps=1)
    p[SEG.WAN_I2V]["inputs"].update(width=32, height=32)
    return p


def text(seed: int, words: str, name: str, **kw) -> dict:
    return t2v_reuse(seed, words, cache_name=name, **SMALL, **kw)


def plain(words: str, seed: int) -> dict:
    """A workflow without any of the pack's nodes (automatic mode instruments it on arrival)."""
    return graphs.wan_t2v_graph(seed=seed, prompt_text=words, negative_text=f"blurry {words}", length=5, steps=1)


def error_of(raw: bytes) -> dict:
    return json.loads(raw)["error"]


def shape(v):
    """The structure of a JSON answer: keys and value types (an int and a float are both numbers)."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x) for x in v]
    return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__


# what names a run or a time (it differs between any two runs, also on one store)
RUN_OR_TIME = {"version", "created_at", "run", "run_id", "prompt_id", "pid", "host", "last_used"}


def differences(x, y, path: str = "") -> list[str]:
    """The paths where two JSON answers differ (``a.b.0.c``), but for RUN_OR_TIME and timings."""
    last = path.rsplit(".", 1)[-1]
    if last in RUN_OR_TIME or last.endswith("seconds"):
        return []
    if isinstance(x, dict) and isinstance(y, dict):
        return [d for k in sorted(set(x) | set(y), key=str)
                for d in (differences(x.get(k), y.get(k), f"{path}.{k}") if k in x and k in y else [f"{path}.{k}"])]
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        return [d for i, (p, q) in enumerate(zip(x, y)) for d in differences(p, q, f"{path}.{i}")]
    return [] if x == y else [path or "."]


def rows(w) -> dict:
    return {c["name"]: c for c in w.get_json("/seedreuse/browser")["caches"]}


def slot_actions(res) -> dict:
    return {e["data"]["slot"]: e["data"]["action"] for e in res.events_of("seedreuse.slot")}


def read_all(snap, fname: str) -> bytes:
    with snap.open_file(fname) as f:
        return f.read()


def as_user(w, user):
    w.headers = {"comfy-user": user} if user else {}
    return w


def tool(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reuse_backend", *args], cwd=REPO, env=os.environ | env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def fleet(rgw, module_workers, tmp_path_factory):
    base = rgw.bucket("seedreuse-features")
    run_id = uuid.uuid4().hex[:8]
    url, budget_url = f"{base}/{run_id}", f"{base}/{run_id}-budget"
    d = module_workers.one(name_prefix="folder-d")
    graphs.write_test_image(d.input_dir / "seg.png", seed=7)
    d.run(text(3, "browser prompt", "enc")).raise_for_status()
    m = json.loads((module_workers.cache_root / "enc" / "manifest.json").read_text())
    one = sum(f["bytes"] for f in m["files"].values())     # the bytes of one text-slot cache
    env = rgw.env() | {"SEEDREUSE_CACHE_URL": url, "SEEDREUSE_AUTO": "1"}
    tier = tmp_path_factory.mktemp
    a = module_workers.one(env=env, extra_args=["--multi-user"], cache_root=tier("tier-a"), name_prefix="bucket-a")
    b = module_workers.one(env=env, cache_root=tier("tier-b"), name_prefix="bucket-b")
    c = module_workers.one(env=rgw.env() | {"SEEDREUSE_CACHE_URL": budget_url, "SEEDREUSE_MAX_BYTES": str(one * 5 // 2)},
                           cache_root=tier("tier-c"), name_prefix="bucket-c")
    for w in (a, b, c):
        graphs.write_test_image(w.input_dir / "seg.png", seed=7)
    return SimpleNamespace(a=a, b=b, c=c, d=d, url=url, budget_url=budget_url, one=one, env=rgw.env(),
                           folder=module_workers.cache_root)


@pytest.fixture
def view(fleet, tmp_path, monkeypatch):
    """This process's own view of the bucket (a local tier of its own: it holds nothing yet)."""
    for k, v in fleet.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SEEDREUSE_CACHE_ROOT", str(tmp_path / "tier-test"))
    return lambda url=None: BucketStore(url or fleet.url)


@pytest.fixture(scope="module")
def made(fleet):
    """The same caches on the bucket (by A) and in the folder (by D): a segment cache with two
    takes and a result video, and a text-slot cache."""
    for w in (fleet.a, fleet.d):
        as_user(w, None)
        w.run(seg_prompt(1, "seg")).raise_for_status()
        w.run(seg_prompt(2, "seg", n=1)).raise_for_status()      # a second take, resumed at 1
    fleet.a.run(text(3, "browser prompt", "enc")).raise_for_status()
    return fleet


def test_cache_routes_answer_as_on_a_folder(made, view):
    a, d = made.a, made.d
    for name in ("seg", "enc"):
        assert name in a.get_json("/seedreuse/caches")["caches"], name
        bucket, folder = a.get_json(f"/seedreuse/caches/{name}"), d.get_json(f"/seedreuse/caches/{name}")
        assert bucket["committed"] is True and shape(bucket) == shape(folder), (bucket, folder)
        diff = differences(bucket, folder)
        assert not diff, " ".join(diff)
        rb, rf = rows(a)[name], rows(d)[name]
        assert shape(rb) == shape(rf) and rb["in_use"] is None and "error" not in rb, (rb, rf)
        diff = differences(rb | {"bytes": None}, rf | {"bytes": None})   # bytes: below
        assert not diff, " ".join(diff)
        # a bucket's size: the objects its record names (a folder's: the blocks it allocates)
        assert 0 < rb["bytes"] <= rb["manifest_bytes"] and rb["last_used"] >= rb["created_at"]
    takes = a.get_json("/seedreuse/caches/seg")["sections"]["takes"]
    assert [t["take"] for t in takes] == [2, 1] and takes[0]["source_take"] == 1, takes
    assert a.get_json("/seedreuse/caches/never-made") == {"name": "never-made", "committed": False}
    budget = a.get_json("/seedreuse/budget")
    assert set(budget) == set(d.get_json("/seedreuse/budget")) and budget["store"] == "object store"
    assert budget["root"] == made.url and budget["bytes"] >= rows(a)["seg"]["bytes"] + rows(a)["enc"]["bytes"]
    assert a.post_json("/seedreuse/caches/seg/check") == {"name": "seg", "ok": True, "problems": []}
    status, _, raw = a.request("POST", "/seedreuse/caches/never-made/check", {})
    assert status == 404 and error_of(raw)["code"] == "no_committed_cache"


def test_the_result_streams_the_committed_object(made, view):
    with view().cache("seg").snapshot() as snap:
        older = take_index.records(snap.manifest)[1]["result"]         # the first take's result
        want, old = read_all(snap, "result.mp4"), read_all(snap, older)
    for w in (made.a, made.b):          # B holds nothing of it: it downloads the object
        status, headers, raw = w.request("GET", "/seedreuse/caches/seg/result")
        assert status == 200 and raw == want and headers["Content-Type"] == "video/mp4"
    status, headers, raw = made.b.request("GET", "/seedreuse/caches/seg/result", headers={"Range": "bytes=10-99"})
    assert status == 206 and raw == want[10:100] and headers["Content-Range"] == f"bytes 10-99/{len(want)}"
    status, _, raw = made.b.request("GET", "/seedreuse/caches/seg/result?take=1")
    assert status == 200 and raw == old != want
    status, _, raw = made.a.request("GET", "/seedreuse/caches/enc/result")
    assert status == 404 and "has no result video" in error_of(raw)["message"]


def test_check_finds_an_object_replaced_in_the_bucket_on_the_worker_that_uploaded_it(made, view):
    a = made.a
    a.run(text(4, "damaged later", "bad")).raise_for_status()
    assert a.post_json("/seedreuse/caches/bad/check")["ok"] is True
    cache = view().cache("bad")
    with cache.snapshot(lease=False) as snap:
        fname = snap.manifest["slots"]["positive"]["file"]
        key = cache.keys.data(snap.objects[fname])
    data = bytearray(cache.client.get(key, 1 << 30).body)
    data[-1] ^= 0xFF                            # same size, other content: only the hash can tell
    cache.client.put(key, bytes(data))
    got = a.post_json("/seedreuse/caches/bad/check")
    assert got["ok"] is False, got
    hit = [p for p in got["problems"] if p["code"] == "bad_object"]
    assert hit and hit[0]["path"] == key.split("/", 1)[1] and "does not match" in hit[0]["message"], got
    assert "clear bad --yes" in hit[0]["fix"] and not any(p["path"].startswith("s3://") for p in got["problems"])


def test_delete_needs_the_confirmation_and_is_refused_while_in_use(made, view):
    a = made.a
    a.run(text(5, "delete me", "del")).raise_for_status()
    status, _, raw = a.request("POST", "/seedreuse/caches/del/delete", {"confirm": "other"})
    assert status == 400 and "confirmation" in error_of(raw)["message"]
    cache = view().cache("del")
    tx = cache.begin()                          # a live writer: its run lease
    try:
        status, _, raw = a.request("POST", "/seedreuse/caches/del/delete", {"confirm": "del"})
    finally:
        tx.discard()
    err = error_of(raw)
    assert status == 409 and err["code"] == "cache_busy" and "being written by" in err["message"], err
    with cache.snapshot():                      # an open reader (this process holds nothing: it leases)
        assert rows(a)["del"]["in_use"].startswith("read by 1 reader")
        status, _, raw = a.request("POST", "/seedreuse/caches/del/delete", {"confirm": "del"})
    assert status == 409 and "read by 1 reader" in error_of(raw)["actual"], raw
    size = rows(a)["del"]["bytes"]
    assert a.post_json("/seedreuse/caches/del/delete", {"confirm": "del"}) == {"deleted": "del", "freed_bytes": size}
    assert "del" not in a.get_json("/seedreuse/caches")["caches"] and view().cache("del").snapshot() is None
    assert "del" not in rows(a)                 # gone from the browser, as on a folder
    for what in ("delete", "check"):
        status, _, raw = a.request("POST", f"/seedreuse/caches/del/{what}", {"confirm": "del"})
        assert status == 404 and error_of(raw)["code"] == "no_committed_cache", (what, raw)


def test_the_budget_evicts_the_least_recently_used_and_never_one_in_use(fleet, view):
    c, store = fleet.c, view(fleet.budget_url)
    for i in (1, 2):
        c.run(text(i, f"budget {i}", f"b{i}")).raise_for_status()
    time.sleep(1.5)          # S3 times are whole seconds: b1's next use must be later than b2's commit
    assert slot_actions(c.run(text(9, "budget 1", "b1")).raise_for_status()) == {"positive": "reused"}
    c.run(text(3, "budget 3", "b3")).raise_for_status()
    assert store.committed() == ["b1", "b3"]                     # b2 was the least recently used
    assert c.get_json("/seedreuse/caches/b2") == {"name": "b2", "committed": False}
    reader, writer = store.cache("b1").snapshot(), store.cache("b3").begin()
    try:                                                          # both candidates are in use
        c.run(text(4, "budget 4", "b4")).raise_for_status()
        assert store.committed() == ["b1", "b3", "b4"]
        assert c.get_json("/seedreuse/budget")["over_budget"] is True
    finally:
        reader.close()
        writer.discard()
    c.run(text(5, "budget 5", "b5")).raise_for_status()
    assert store.committed() == ["b4", "b5"]
    budget = c.get_json("/seedreuse/budget")
    assert budget["budget"] == fleet.one * 5 // 2 and budget["bytes"] == 2 * fleet.one and not budget["over_budget"]
    assert "over its budget" in c.log_text() and "evicted ['b2']" in c.log_text()


def test_each_user_has_their_own_prefix_and_reaches_no_other(fleet, view):
    a = fleet.a
    alice, bob = (as_user(a, None).post_json("/users", {"username": f"{n}-{uuid.uuid4().hex[:6]}"})
                  for n in ("alice", "bob"))
    try:
        assert slot_actions(as_user(a, alice).run(text(1, "alice's prompt", "talk")).raise_for_status()) == \
            {"positive": "encoded"}
        store = view()
        prefix = store.loc.prefix
        keys = [o.key for o in store.client.list(prefix)[0]]
        assert any(k.startswith(f"{prefix}.users/{alice}/talk/log/") for k in keys)
        assert not any(k.startswith(f"{prefix}talk/") for k in keys)
        assert a.get_json("/seedreuse/caches")["caches"] == ["talk"]
        v_alice = a.get_json("/seedreuse/caches/talk")["version"]
        as_user(a, bob)             # the same name, the same text: nothing of alice's is reachable
        assert a.get_json("/seedreuse/caches")["caches"] == [] and "talk" not in rows(a)
        assert a.get_json("/seedreuse/caches/talk") == {"name": "talk", "committed": False}
        for method, path in (("GET", "result"), ("POST", "check"), ("POST", "delete")):
            status, _, _ = a.request(method, f"/seedreuse/caches/talk/{path}",
                                   {"confirm": "talk"} if method == "POST" else None)
            assert status == 404, path
        answer = a.post_json("/seedreuse/check", {"prompt": text(2, "alice's prompt", "talk", reuse="require")})
        assert answer["nodes"]["101"]["will"] == "fail", answer
        res = a.run(text(2, "alice's prompt", "talk", reuse="require"))
        assert res.status == "error" and "no successful run" in res.error["exception_message"], res.error
        # bob's own cache (a body claiming alice changes nothing: the header decides)
        res = a.run(text(3, "alice's prompt", "talk"), extra_data={"seedreuse_user": alice}).raise_for_status()
        assert slot_actions(res) == {"positive": "encoded"}
        assert view(f"{fleet.url}/.users/{bob}").committed() == ["talk"]
        assert as_user(a, alice).get_json("/seedreuse/caches/talk")["version"] == v_alice
        res = a.run(text(4, "alice's prompt", "talk", reuse="require")).raise_for_status()
        assert slot_actions(res) == {"positive": "reused"}
        assert "talk" not in as_user(a, None).get_json("/seedreuse/caches")["caches"]
    finally:
        as_user(a, None)


def test_automatic_mode_reuses_across_workers_through_the_bucket(fleet, view, tmp_path):
    a, b = fleet.a, fleet.b
    words = f"auto {uuid.uuid4().hex[:6]}"
    for w in (a, b):
        as_user(w, None).free(settle=0.3)
        w.reset_counts()
    ra = a.run(plain(words, 1)).raise_for_status()
    rep_a = ra.history["prompt"][3]["seedreuse_auto_report"]
    assert rep_a["applied"] and {o["action"] for o in rep_a["outputs"]} == {"encoded"}, rep_a
    name = rep_a["cache"]
    assert view(f"{fleet.url}/.auto").committed() == [name]
    answer = b.post_json("/seedreuse/check", {"prompt": plain(words, 2)})     # the dry run, before B's run
    assert answer["auto"]["cache"] == name and {n["will"] for n in answer["nodes"].values()} == {"reuse"}, answer
    rb = b.run(plain(words, 2)).raise_for_status()
    rep_b = rb.history["prompt"][3]["seedreuse_auto_report"]
    assert rep_b["cache"] == name and {o["action"] for o in rep_b["outputs"]} == {"reused"}, rep_b
    assert b.counts().get("text_encode", 0) == 0 and b.counts().get("text_loader", 0) == 0, b.counts()
    assert a.counts()["text_encode"] > 0
    # gc visits the automatic caches too, budgeted on their own (as on a folder)
    out = tool(fleet.env | {"SEEDREUSE_CACHE_ROOT": str(tmp_path / "tier-gc")}, "--root", fleet.url,
               "gc", "--dry-run", "--json")
    assert out.returncode in (0, 1), out.stderr
    assert name in [c["name"] for c in json.loads(out.stdout)["automatic"]["caches"]], out.stdout


def test_the_dry_run_answers_from_the_bucket_as_from_a_folder(made):
    b, d = made.b, made.d          # B ran none of these caches' prompts
    for p in (seg_prompt(3, "seg", n=1), text(9, "browser prompt", "enc", reuse="require"),
              text(9, "never encoded", "enc", reuse="require"), text(9, "x", "never-made", reuse="require")):
        bucket, folder = (w.post_json("/seedreuse/check", {"prompt": p}) for w in (b, d))
        assert bucket.pop("auto")["applied"] is False       # B has automatic mode on: a Session stays as it is
        diff = differences(bucket, folder)
        assert not diff, " ".join(diff)
    seg = b.post_json("/seedreuse/check", {"prompt": seg_prompt(3, "seg", n=1)})["segments"][SEG.START]
    assert seg["previous"]["segments"] == 3 and seg["previous"]["frames"] == 13, seg
    enc = b.post_json("/seedreuse/check", {"prompt": text(9, "browser prompt", "enc", reuse="require")})
    assert enc["nodes"]["101"]["will"] == "reuse", enc


def test_the_cli_on_the_bucket(fleet, view, tmp_path):
    a = fleet.a
    user = as_user(a, None).post_json("/users", {"username": f"carol-{uuid.uuid4().hex[:6]}"})
    try:
        for i in (1, 2, 3):
            as_user(a, user).run(text(i, f"cli {i}", f"g{i}")).raise_for_status()
    finally:
        as_user(a, None)
    env = fleet.env | {"SEEDREUSE_CACHE_ROOT": str(tmp_path / "tier-cli")}
    cli = lambda *args: tool(env, "--root", fleet.url, "--user", user, *args)      # noqa: E731
    store = view(f"{fleet.url}/.users/{user}")
    versions = {}
    for n in ("g1", "g2", "g3"):
        with store.cache(n).snapshot(lease=False) as snap:
            versions[n] = snap.manifest["version"]
    out = cli("list")
    assert out.returncode == 0, out.stderr
    for n, v in versions.items():
        assert f"{n} " in out.stdout and v[:12] in out.stdout, out.stdout
    out = cli("inspect", "g2")
    assert out.returncode == 0 and f"version {versions['g2']}" in out.stdout and "positive" in out.stdout, out.stdout
    assert "no committed version" in cli("inspect", "never-made").stdout
    # a dead run's upload (no lease, no record names it): check finds it, --repair collects it
    blob = b"left by a run that was killed"
    dead = f"{store.loc.prefix}g2/data/deadrun/{hashlib.sha256(blob).hexdigest()}"
    store.client.put(dead, blob)
    out = cli("check", "g2")
    assert out.returncode == 1 and "collectable" in out.stdout and dead in out.stdout, out.stdout
    out = cli("check", "g2", "--repair")
    assert out.returncode == 0 and "repaired, OK" in out.stdout, out.stdout + out.stderr
    with pytest.raises(NotFound):
        store.client.head(dead)
    out = cli("check")
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout
    # clear: needs --yes, refused while read, then the cache is gone for the workers too
    assert cli("clear", "g3").returncode == 2
    with store.cache("g3").snapshot():
        out = cli("clear", "g3", "--yes")
    assert out.returncode == 2 and "was not cleared" in out.stderr, out.stdout + out.stderr
    out = cli("clear", "g3", "--yes")
    assert out.returncode == 0 and "cache 'g3' cleared" in out.stdout, out.stdout + out.stderr
    assert "g3" not in as_user(a, user).get_json("/seedreuse/caches")["caches"]
    as_user(a, None)
    # gc: the least recently used goes first; --dry-run changes nothing; the report as on a folder
    limit = str(fleet.one * 3 // 2)
    out = cli("gc", "--max-bytes", limit, "--dry-run", "--json")
    rep = json.loads(out.stdout)
    assert out.returncode == 0 and [(c["name"], c["action"]) for c in rep["caches"]] == \
        [("g1", "would_evict"), ("g2", "keep")] and rep["evicted"] == ["g1"], rep
    assert store.committed() == ["g1", "g2"]
    folder = json.loads(tool({}, "--root", str(fleet.folder), "gc", "--max-bytes", "1", "--dry-run", "--json").stdout)
    assert set(rep) - {"automatic"} == set(folder) - {"automatic"} and set(rep["caches"][0]) == set(folder["caches"][0])
    out = cli("gc", "--max-bytes", limit)
    lines = [ln.split()[:2] for ln in out.stdout.splitlines()]
    assert out.returncode == 0 and ["evicted", "g1"] in lines and ["kept", "g2"] in lines, out.stdout
    assert store.committed() == ["g2"]
