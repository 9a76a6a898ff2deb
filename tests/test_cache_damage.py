"""Damaged caches in real ComfyUI workers: slots that do not load, values that load but are wrong,
boundaries of another frame size and a previous result that is not a video.

Every cache here is made by a real run; the damage is written into the committed version the way
a bad disk, a crashed copy or another tool would leave it. Under ``auto`` a broken slot is rebuilt
(the encoder runs, the commit replaces it) and the next run reuses again; under ``require`` the run
fails before any sampling saying what is broken and how to fix it; the dry run predicts both.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import pytest
import torch

from seedreuse_lab import graphs
from seedreuse_lab.graphs import T2V
from seedreuse_lab.reuse_graphs import SEG, segment_graph, t2v_reuse
from reuse_backend.storage import serialize
from reuse_backend.folder.check import check as check_cache

pytestmark = pytest.mark.comfy
SMALL = dict(width=32, height=32, length=5, steps=1)
SLOT_FILE = "slot_positive.safetensors"


# ------------------------------------------------------------------ helpers

@pytest.fixture(scope="module")
def root(module_workers) -> Path:
    return module_workers.cache_root


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def dry(worker, prompt) -> dict:
    return worker.post_json("/seedreuse/check", {"prompt": prompt})


def first_line(s) -> str:
    return str(s or "").split("\n", 1)[0]


def slot_event(res, slot="positive") -> dict:
    return {e["data"]["slot"]: e["data"] for e in res.events_of("seedreuse.slot")}[slot]


def sampled(res, sampler=SEG.SAMPLER) -> int:
    return sum(1 for e in res.events if e.get("type") == "executing"
               and (e.get("data") or {}).get("display_node") == sampler)


def manifest(root: Path, name: str) -> dict:
    return json.loads((root / name / "manifest.json").read_text())


def write_member(root: Path, name: str, fname: str, data: bytes, *, keep_size: bool | None) -> None:
    """Replace one file of the committed version (as a foreign tool would). keep_size=True: the
    same size (the manifest still matches); False: the manifest's size and sha256 are updated too,
    so the version still opens and only the file's content is wrong; None: the manifest is left as
    it is whatever the size."""
    d = root / name
    path = d / fname
    if keep_size:
        assert len(data) == path.stat().st_size
    tmp = d / f".{fname}.damage"
    tmp.write_bytes(data)
    os.replace(tmp, path)
    if keep_size is False:
        m = manifest(root, name)
        m["files"][fname] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        tmp = d / ".manifest.damage"
        tmp.write_text(json.dumps(m, indent=1, sort_keys=True))
        os.replace(tmp, d / "manifest.json")


def value_bytes(value) -> bytes:
    import io
    f = io.BytesIO()
    serialize.dump_value(f, value)
    return f.getvalue()


def load_member(root: Path, name: str, fname: str):
    with open(root / name / fname, "rb") as f:
        return serialize.load_value(f)


def damage(kind: str, data: bytes) -> bytes:
    if kind == "header_length_2_63":             # right size, header length 2^63
        return (2 ** 63).to_bytes(8, "little") + data[8:]
    if kind == "truncated_content":              # right size: cut inside the header, rest zeroed
        return data[:40] + bytes(len(data) - 40)
    raise AssertionError(kind)


def t2v(name: str, text: str, reuse: str, seed: int = 1) -> dict:
    return t2v_reuse(seed=seed, prompt_text=text, cache_name=name, reuse=reuse, **SMALL)


def assert_fails_before_sampling(worker, prompt, *must) -> str:
    answer = dry(worker, prompt)["nodes"]["101"]
    assert answer["will"] == "fail", answer
    res = worker.run(prompt)
    assert res.status == "error", res.status
    msg = res.error["exception_message"]
    for m in must:
        assert m in msg, (m, msg)
    assert "no successful run" not in msg
    assert T2V.SAMPLER not in res.executed and T2V.DECODE not in res.executed
    assert str(res.error["node_id"]) == "101"
    assert first_line(msg) == first_line(answer["reason"])      # the dry run said exactly this
    return msg


def assert_rebuilds_then_reuses(worker, root, name, text, reason_part, *, dry_encode=True):
    """auto: the encoder runs, the commit replaces the broken slot; the next runs reuse it."""
    before = manifest(root, name)["version"] if (root / name / "manifest.json").exists() else None
    p = t2v(name, text, "auto", seed=2)
    answer = dry(worker, p)["nodes"]["101"]
    if dry_encode:
        assert answer["will"] == "encode" and reason_part in answer["reason"], answer
    worker.free()                                 # no in-memory copy of the encoder output
    res = worker.run(p).raise_for_status()
    ev = slot_event(res)
    assert ev["action"] == "encoded" and reason_part in ev["reason"], ev
    if dry_encode:
        assert ev["reason"] == answer["reason"]
    assert T2V.POS in res.executed and T2V.SAMPLER in res.executed       # the encoder ran
    assert manifest(root, name)["version"] != before
    assert check_cache(root, name) == []
    for mode, seed in (("auto", 3), ("require", 4)):
        p = t2v(name, text, mode, seed=seed)
        assert dry(worker, p)["nodes"]["101"]["will"] == "reuse"
        res = worker.run(p).raise_for_status()
        assert slot_event(res)["action"] == "reused" and T2V.POS not in res.executed


# ------------------------------------------------------------------ 5: slots that do not load

@pytest.mark.parametrize("kind", ["header_length_2_63", "truncated_content"])
def test_unreadable_slot_of_the_right_size(comfy_worker, root, kind):
    name, text = unique("unreadable"), f"unreadable slot {kind}"
    comfy_worker.run(t2v(name, text, "auto")).raise_for_status()
    path = root / name / SLOT_FILE
    write_member(root, name, SLOT_FILE, damage(kind, path.read_bytes()), keep_size=True)
    msg = assert_fails_before_sampling(
        comfy_worker, t2v(name, text, "require"),
        f"cache '{name}' is unreadable: slot 'positive' ({SLOT_FILE}) cannot be loaded",
        "reuse 'auto'", f"python -m reuse_backend clear {name} --yes")
    assert ("header length over the cap" in msg) if kind == "header_length_2_63" else ("not valid JSON" in msg)
    assert_rebuilds_then_reuses(comfy_worker, root, name, text, f"cache slot unreadable: {SLOT_FILE}: ")


def test_unreadable_cache_version(comfy_worker, root):
    """A slot file cut short: the committed version no longer opens at all."""
    name, text = unique("truncated"), "truncated slot file"
    comfy_worker.run(t2v(name, text, "auto")).raise_for_status()
    path = root / name / SLOT_FILE
    data = path.read_bytes()
    write_member(root, name, SLOT_FILE, data[: len(data) // 2], keep_size=None)   # the manifest says more
    assert_fails_before_sampling(comfy_worker, t2v(name, text, "require"),
                                 f"cache '{name}' is unreadable: {SLOT_FILE} has the wrong size",
                                 "reuse 'auto'", f"python -m reuse_backend clear {name} --yes")
    assert_rebuilds_then_reuses(comfy_worker, root, name, text, f"cache unreadable: {SLOT_FILE} has the wrong size")


# ------------------------------------------------------------------ 8: values that load but are wrong

def _nan(v):
    v[0][0][0, 1, 2] = float("nan")
    return v


def _i64(v):
    v[0][0] = (v[0][0] * 100).to(torch.int64)
    return v


def _two_d(v):
    v[0][0] = v[0][0][0].contiguous()
    return v


@pytest.mark.parametrize("bad,change,actual", [
    ("nan", _nan, "holding 1 NaN"),
    ("i64", _i64, "int64 tensor [1, "),
    ("misshaped", _two_d, "float32 tensor ["),
])
def test_unusable_slot_value(comfy_worker, root, bad, change, actual):
    name, text = unique(bad), f"unusable slot {bad}"
    comfy_worker.run(t2v(name, text, "auto")).raise_for_status()
    value = change(load_member(root, name, SLOT_FILE))
    write_member(root, name, SLOT_FILE, value_bytes(value), keep_size=False)
    p = t2v(name, text, "require")
    if bad == "nan":            # the dry run's check reads headers only: NaN needs the data
        assert dry(comfy_worker, p)["nodes"]["101"]["will"] == "reuse"
        res = comfy_worker.run(p)
        assert res.status == "error" and T2V.SAMPLER not in res.executed
        msg = res.error["exception_message"]
    else:
        msg = assert_fails_before_sampling(comfy_worker, p)
    assert msg.startswith(f"cache '{name}' holds an unusable value in slot 'positive' ({SLOT_FILE}): value[0][0] is ")
    assert actual in msg and f"python -m reuse_backend clear {name} --yes" in msg
    assert ("expected: CONDITIONING: finite numbers" if bad == "nan"
            else "expected: CONDITIONING: float tensor [B, L, D]") in msg
    assert_rebuilds_then_reuses(comfy_worker, root, name, text, "cache slot unusable: value[0][0] is ",
                                dry_encode=bad != "nan")


# ------------------------------------------------------------------ 7, 8: segment resume

def seg(name: str, seed: int, n: int = 0) -> dict:
    p = segment_graph("damage.png", seed, prefix_segments=n, cache_name=name, F=5, M=1, total_frames=13,
                      steps=1, prompt_text="a damaged test head")
    p[SEG.WAN_I2V]["inputs"].update(width=32, height=32)
    return p


def assert_resume_fails(worker, prompt, *must) -> str:
    answer = dry(worker, prompt)["segments"][SEG.START]
    assert answer["will"] == "fail", answer
    res = worker.run(prompt)
    assert res.status == "error" and sampled(res) == 0, (res.status, sampled(res))
    msg = res.error["exception_message"]
    for m in must:
        assert m in msg, (m, msg)
    assert first_line(msg) == first_line(answer["reason"])
    return msg


@pytest.fixture(scope="module")
def seg_cache(comfy_worker, root):
    """One committed segment run (S=3, F=5, M=1, 32x32) whose files the tests below damage and restore."""
    graphs.write_test_image(comfy_worker.input_dir / "damage.png", seed=11)
    name = unique("segdamage")
    comfy_worker.run(seg(name, 1)).raise_for_status()
    good = {f: (root / name / f).read_bytes() for f in ("result.mp4", "boundary_00001.safetensors")}
    mf = load_member(root, name, "boundary_00001.safetensors")["motion_frames"]
    assert tuple(mf.shape) == (1, 32, 32, 3) and mf.dtype == torch.float32   # what the body produces
    return name, good, mf


def restore(root, name, good) -> None:
    for f, data in good.items():
        write_member(root, name, f, data, keep_size=False)


def test_garbage_previous_result_says_it_is_unreadable(comfy_worker, root, seg_cache):
    name, good, _ = seg_cache
    data = good["result.mp4"]
    try:   # not a video, same size (so the version still opens)
        write_member(root, name, "result.mp4", (b"this is not a video " * len(data))[:len(data)], keep_size=True)
        msg = assert_resume_fails(comfy_worker, seg(name, 2, n=2),
                                  f"the previous result in cache '{name}' (result.mp4) is unreadable",
                                  "run with reuse_prefix_segments=0 to rebuild the cache")
        assert "check that the" not in msg and "input video" not in msg
    finally:
        restore(root, name, good)


def test_damaged_boundary_fails_the_resume_before_sampling(comfy_worker, root, seg_cache):
    name, good, mf = seg_cache
    fname = "boundary_00001.safetensors"
    try:
        # 8: a boundary of another frame size (2048x2048 where the body makes 32x32)
        write_member(root, name, fname, value_bytes({"motion_frames": torch.rand(1, 2048, 2048, 3)}), keep_size=False)
        assert_resume_fails(comfy_worker, seg(name, 2, n=2),
                            f"boundary 1 in cache '{name}' ({fname}) holds an unusable value",
                            "[1, 32, 32, 3]", "[1, 2048, 2048, 3]", "reuse_prefix_segments=0")
        # 8: NaN motion frames of the right size
        nan = mf.clone()
        nan[0, 0, 0, 0] = float("nan")
        write_member(root, name, fname, value_bytes({"motion_frames": nan}), keep_size=False)
        assert_resume_fails(comfy_worker, seg(name, 2, n=2), "holds an unusable value", "NaN")
        # 5: a boundary that does not load (header length 2^63, right size)
        restore(root, name, good)
        write_member(root, name, fname, damage("header_length_2_63", good[fname]), keep_size=True)
        assert_resume_fails(comfy_worker, seg(name, 2, n=2), f"boundary 1 in cache '{name}' ({fname}) is unreadable",
                            "header length over the cap", "reuse_prefix_segments=0")
    finally:
        restore(root, name, good)
    # restored, the same resume works (the checks accept what the real body produced)
    res = comfy_worker.run(seg(name, 2, n=2)).raise_for_status()
    assert sampled(res) == 1
