"""An external cache provider on ComfyUI 0.33 (comfy_api.latest.Caching): two real workers over
one cache root, both with the stand-in pack's FolderCacheProvider on one folder
(seedreuse_lab/stand_in_nodes/folder_provider.py), which serves each worker's local misses
from the other's stores, as a Redis- or disk-backed provider would.

What must hold (docs/ARCHITECTURE.md, "External cache providers"): no SeedReuse node, and no
node downstream of one, is ever looked up in or stored through the provider; a hit on the
second worker runs no encoder and its outputs are right; a reuse node never yields an output
of a version other than the one its run read; a failed run publishes nothing, neither in the
pack's cache nor through the provider for the pack's nodes. Nodes upstream of the pack (the
loaders and encoders) may be served by the provider: then the pack reuses or stages the value
it served, and no encoder runs.

Epochs: the pack's change token holds a per-process counter bumped by every transaction that
staged new content, so two workers give a node the same ComfyUI key only at the same count.
Each test stages new content as often on one worker as on the other, so that every test
starts (in file order or alone) with both workers at the same count: a provider that the pack
did not keep its nodes from would then really be asked for them, and serve them.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from reuse_backend.media import video
from seedreuse_lab import graphs, host
from seedreuse_lab.graphs import T2V
from seedreuse_lab.reuse_graphs import SESSION, t2v_reuse

pytestmark = [
    pytest.mark.comfy,
    pytest.mark.skipif(not host.has_cache_provider_api(),
                       reason="this ComfyUI has no external cache-provider API (comfy_api.latest.Caching."
                              "register_provider: ComfyUI 0.33+); run with COMFYUI_PATH on the 0.33.0 host"),
]
REUSE = "101"          # the positive Encode-or-Reuse node of t2v_reuse
FAIL = "130"
ENCODERS = ("text_encode", "text_loader")


@pytest.fixture(scope="module")
def pair(module_workers, tmp_path_factory):
    """(a, b, cache root, provider folder): two workers sharing both."""
    folder = tmp_path_factory.mktemp("folder-provider")
    a, b = module_workers(2, env={"SEEDREUSE_TEST_PROVIDER_DIR": str(folder)})
    return a, b, module_workers.cache_root, folder


def _pack_node(class_type: str) -> bool:
    return class_type.startswith("SeedReuse") and not class_type.startswith("SeedReuseTest")


def _is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)


def local_only_ids(prompt: dict) -> set[str]:
    """The pack's nodes and every node downstream of one."""
    out = {nid for nid, n in prompt.items() if _pack_node(n["class_type"])}
    grew = True
    while grew:
        grew = False
        for nid, n in prompt.items():
            if nid not in out and any(_is_link(v) and v[0] in out for v in n["inputs"].values()):
                out.add(nid)
                grew = True
    return out


def journal(folder: Path, worker) -> list[dict]:
    pid = worker.get_json("/seedreuse_test/info")["pid"]
    path = folder / f"journal.{pid}.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


def provider_touched(folder: Path, ids: set[str]) -> list[dict]:
    """Every provider operation (any worker) on a node id in ``ids`` or a pack class."""
    ops = [json.loads(ln) for p in folder.glob("journal.*.jsonl") for ln in p.read_text().splitlines()]
    stored = [json.loads(p.read_text()) for p in (folder / "entries").glob("*.json")]
    return [o for o in ops + stored if o["node_id"] in ids or _pack_node(o["class_type"])]


def manifest(root: Path, name: str) -> dict | None:
    p = root / name / "manifest.json"
    return json.loads(p.read_text()) if p.exists() else None


def slot_event(res) -> dict:
    return {e["data"]["slot"]: e["data"] for e in res.events_of("seedreuse.slot")}["positive"]


def ran(worker) -> dict:
    c = worker.counts()
    return {k: c.get(k, 0) for k in ENCODERS}


def frames_digest(worker, res) -> str:
    f = res.output_files(T2V.SAVE)[0]
    path = Path(worker.output_dir) / f.get("subfolder", "") / f["filename"]
    return hashlib.sha256(video.decode_frames(str(path)).tobytes()).hexdigest()


def test_hit_runs_no_encoder_and_the_pack_stays_local(pair):
    a, b, root, folder = pair
    text, ids = "provider hit", local_only_ids(t2v_reuse(seed=1))
    for w in (a, b):
        w.reset_counts()
    a.run(t2v_reuse(seed=1, prompt_text=text, cache_name="hit")).raise_for_status()        # a: +1
    assert all(v == 1 for v in ran(a).values()), ran(a)
    version = manifest(root, "hit")["version"]
    # the second worker: a hit in the pack's cache; its Encode-or-Reuse node ran (read the
    # committed version), no encoder or loader ran, sampling did
    rb = b.run(t2v_reuse(seed=2, prompt_text=text, cache_name="hit", reuse="require")).raise_for_status()
    assert slot_event(rb)["action"] == "reused"
    assert {SESSION, REUSE, T2V.SAMPLER} <= set(rb.executed)
    assert ran(b) == dict.fromkeys(ENCODERS, 0), ran(b)
    assert manifest(root, "hit")["version"] == version
    # the provider is live: b looked up a's upstream text encoding and was served it
    assert any(o["op"] == "hit" and o["node_id"] == T2V.POS for o in journal(folder, b))
    # its outputs are right: the same as a computing that seed itself (also a pack hit)
    ra2 = a.run(t2v_reuse(seed=2, prompt_text=text, cache_name="hit", reuse="require")).raise_for_status()
    assert T2V.SAMPLER in ra2.executed and frames_digest(a, ra2) == frames_digest(b, rb)
    # a same-process re-queue is still served from ComfyUI's memory: the pack's nodes and the
    # sampler do not run again (keeping them from the provider did not turn the local cache off)
    rq = b.run(t2v_reuse(seed=2, prompt_text=text, cache_name="hit", reuse="require")).raise_for_status()
    assert not ({SESSION, REUSE, T2V.SAMPLER} & set(rq.executed)), rq.executed
    # an upstream encoder served by the provider: a miss in another cache of the pack takes the
    # served value and commits it, and no encoder runs on b
    ro = b.run(t2v_reuse(seed=2, prompt_text=text, cache_name="other")).raise_for_status()  # b: +1
    assert slot_event(ro)["action"] == "encoded" and manifest(root, "other") is not None
    assert ran(b) == dict.fromkeys(ENCODERS, 0), ran(b)
    assert frames_digest(b, ro) == frames_digest(a, ra2)
    # never a SeedReuse node or anything downstream of one through the provider
    assert provider_touched(folder, ids) == []


def test_failed_run_publishes_nothing(pair):
    a, b, root, folder = pair
    text = "provider failure"

    def failing(fail: bool) -> dict:
        p = t2v_reuse(seed=4, prompt_text=text, cache_name="failed")
        graphs.insert_between(p, REUSE, 0, T2V.SAMPLER, "positive", "SeedReuseTestFail",
                              {"fail": fail, "message": "failing after the reuse node"},
                              input_name="value", node_id=FAIL)
        return p

    res = a.run(failing(True))                                                                # a: +1
    assert res.status == "error" and REUSE in res.executed
    assert manifest(root, "failed") is None and not (root / "failed.tmp").exists()
    # upstream of the pack the provider may keep what the failed run computed (ComfyUI's key of
    # an encoder is its inputs, not the run): the text encoding is there
    entries = [json.loads(p.read_text()) for p in (folder / "entries").glob("*.json")]
    assert any(e["class_type"] == "SeedReuseTestTextEncode" for e in entries)
    # the other worker, same graph without the failure: its Encode-or-Reuse node runs (nothing
    # of the failed run reaches it), stages the provider-served encoding, and commits
    b.reset_counts()
    rb = b.run(failing(False)).raise_for_status()                                             # b: +1
    assert REUSE in rb.executed and slot_event(rb)["action"] == "encoded"
    assert ran(b)["text_encode"] == 0
    assert manifest(root, "failed") is not None
    assert provider_touched(folder, local_only_ids(failing(True))) == []


def test_reuse_never_yields_another_version(pair):
    a, b, root, folder = pair
    first, second = "provider version one", "provider version two"
    a.run(t2v_reuse(seed=1, prompt_text=first, cache_name="versions")).raise_for_status()      # a: +1, v1
    v1 = manifest(root, "versions")["version"]
    # a reuses v1: the prompt whose outputs the provider would hold for this epoch
    a.run(t2v_reuse(seed=2, prompt_text=first, cache_name="versions", reuse="require")).raise_for_status()
    # b commits v2 (the slot now holds the second text), then queues a's prompt exactly: its
    # reuse node must read v2 and refuse (require), never yield v1's slot from the provider
    b.run(t2v_reuse(seed=3, prompt_text=second, cache_name="versions")).raise_for_status()     # b: +1, v2
    v2 = manifest(root, "versions")["version"]
    assert v2 != v1
    res = b.run(t2v_reuse(seed=2, prompt_text=first, cache_name="versions", reuse="require"))
    assert res.status == "error", "served an output of a version the run did not read"
    assert REUSE in res.executed and "value:text" in res.error["exception_message"]
    assert T2V.SAMPLER not in res.executed
    assert manifest(root, "versions")["version"] == v2
    assert provider_touched(folder, local_only_ids(t2v_reuse(seed=2))) == []


def test_refuses_where_providers_would_see_the_pack(comfy_workers, tmp_path):
    """A host whose providers do not skip NaN keys (the test provider switches 0.33's rule off):
    the pack cannot keep its nodes from the provider, so every reuse node refuses, naming the
    provider and the fix, and nothing is committed or stored for the pack's nodes."""
    folder = tmp_path / "provider"
    w = comfy_workers.one(env={"SEEDREUSE_TEST_PROVIDER_DIR": str(folder),
                               "SEEDREUSE_TEST_PROVIDER_WITHOUT_NAN_RULE": "1"})
    p = t2v_reuse(seed=1, prompt_text="provider refusal", cache_name="refused")
    res = w.run(p)
    assert res.status == "error"
    msg = res.error["exception_message"]
    assert "FolderCacheProvider" in msg and "NaN" in msg
    assert "unregister the external cache provider" in (res.error.get("seedreuse") or {}).get("fix", "")
    assert T2V.SAMPLER not in res.executed
    assert manifest(comfy_workers.cache_root, "refused") is None
    assert not [o for o in provider_touched(folder, local_only_ids(p)) if o.get("op") != "miss"]
    log = w.log_text()
    assert "FolderCacheProvider" in log and "every SeedReuse node refuses to run" in log
