"""Per-segment validity (media/segment_validity.py) and the take history layout (store/take_index.py,
media/segment_takes.py) without a ComfyUI worker."""
from __future__ import annotations

import math
import os

import pytest
import torch

from reuse_backend.errors import CorruptCacheError, NoCommittedCacheError, SegmentInvalidError
from reuse_backend.keys.key import ReuseKey
from reuse_backend.media import segment_plan, segment_takes, segment_validity as sv
from reuse_backend.storage import fsops
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
from reuse_backend.folder import check as store_check
from reuse_backend.store import take_index

F, M, FPS, SR = 9, 3, 16.0, 16000


def spec(S: int):
    return segment_plan.make_spec(F, M, FPS, segment_plan.segments.total_frames(S, F, M))


def track(frames: int, freq_after: float = 330.0, split: int | None = None) -> dict:
    n = round(frames / FPS * SR)
    t = torch.arange(n, dtype=torch.float64) / SR
    f = torch.full((n,), 330.0, dtype=torch.float64)
    if split is not None:
        f[round(split / FPS * SR):] = freq_after
    return {"waveform": (0.5 * torch.sin(2 * math.pi * f * t)).float().reshape(1, 1, n), "sample_rate": SR}


STATIC = ReuseKey.build("segment-prefix", {"segments.text": "a talking head", "steps": 2})


def req(S: int, audio, static=STATIC, features=None):
    return sv.request_validity(static, spec(S), audio=audio, audio_features=features)


def test_audio_changed_after_p2_invalidates_segment_2_onwards():
    P2 = segment_plan.segments.prefix_frames(2, F, M)        # 15
    old = sv.record(req(4, track(27)), seed=1)
    new = req(4, track(27, 440.0, split=P2))
    assert sv.first_invalid(old, new, 2, F, M) is None                      # segments 0, 1 heard [0, 15)
    m = sv.first_invalid(old, new, 3, F, M)
    assert m.segment == 2 and m.field == "audio under segment 2 (frames [12, 21))"
    assert sv.longest_valid(old, new, 3, F, M)[0] == 2
    with pytest.raises(SegmentInvalidError) as e:
        sv.ensure_valid(old, new, 3, cache_name="c", take=1, F=F, M=M)
    err = e.value
    assert "segment 2" in err.message and "differ" in err.message and "reuse_prefix_segments=2" in err.fix
    assert err.details["segment"] == 2 and err.expected and err.actual
    # a change one frame earlier (frame 14, heard by segment 1) moves the first invalid segment
    assert sv.first_invalid(old, req(4, track(27, 440.0, split=P2 - 1)), 3, F, M).segment == 1


def test_a_longer_track_keeps_every_old_segment_valid():
    old = sv.record(req(4, track(27)), seed=1)
    longer = req(6, track(39))
    assert sv.first_invalid(old, longer, 4, F, M) is None
    assert sv.longest_valid(old, longer, 4, F, M) == (4, None)
    # a track shorter than P(S): the last segment heard padding; real audio there is a change
    short = sv.record(req(4, track(25)), seed=1)
    m = sv.first_invalid(short, longer, 4, F, M)
    assert m is not None and m.segment == 3


def test_static_change_invalidates_segment_0_naming_the_field():
    old = sv.record(req(4, track(27)), seed=1)
    other = ReuseKey.build("segment-prefix", {"segments.text": "another head", "steps": 2})
    m = sv.first_invalid(old, req(4, track(27), static=other), 1, F, M)
    assert m.segment == 0 and m.field == "segments.text" and m.cached == "a talking head"
    # the seed is recorded but never invalidates
    assert sv.first_invalid(sv.record(req(4, track(27)), seed=99), req(4, track(27)), 3, F, M) is None
    assert old["segments"][0]["seed"] == 1


def test_features_are_compared_per_segment():
    feats = {"encoded_audio": torch.arange(2 * 50 * 4, dtype=torch.float32).reshape(1, 100, 4)}
    changed = {"encoded_audio": feats["encoded_audio"].clone()}
    changed["encoded_audio"][:, 84:] += 1          # after segment 3's cut [56, 84) (50 Hz, 16 fps)
    old = sv.record(req(4, track(27), features=feats), seed=1)
    assert sv.first_invalid(old, req(4, track(27), features=changed), 4, F, M) is None
    changed["encoded_audio"][:, 83] += 1           # the last feature frame segment 3 consumes
    m = sv.first_invalid(old, req(4, track(27), features=changed), 4, F, M)
    assert m.segment == 3 and m.field.startswith("audio features under segment 3")
    changed["encoded_audio"][:, 0] += 1
    m = sv.first_invalid(old, req(4, track(27), features=changed), 4, F, M)
    assert m.segment == 0 and m.field.startswith("audio features under segment 0")


def _version(cache: FolderCache, takes_body: dict | None, files: dict) -> None:
    tx = cache.begin(RunInfo(run_id="t"))
    try:
        for name, data in files.items():
            with open(tx.stage_path(name), "wb") as f:
                f.write(data)
            tx.add_file(name)
        if takes_body is not None:
            tx.set_section(take_index.SECTION, takes_body)
        tx.commit()
    except BaseException:
        tx.discard()
        raise


def test_take_index_problems_and_renaming_carry(tmp_path):
    cache = FolderCache(tmp_path, "c")
    rec = {"take": 1, "result": "result.mp4", "boundaries": {"0": "tail_boundary.safetensors"}, "segments": {}}
    _version(cache, {"schema": 1, "takes": [rec]}, {"result.mp4": b"video-1"})
    with cache.snapshot() as snap:
        assert any("does not list" in p for p in take_index.problems(snap.manifest))
        assert segment_takes.read_takes(snap) == []               # a broken index is no take
    found = store_check.check(tmp_path, "c")
    assert [p.code for p in found] == ["invalid_takes"]
    _version(cache, {"schema": 1, "takes": [dict(rec, boundaries={}), dict(rec, boundaries={})]},
             {"result.mp4": b"video-1"})
    assert any("not a new positive integer" in p.message for p in store_check.check(tmp_path, "c"))
    # carrying under another name is a hard link of the base's file (a take's files cost nothing)
    _version(cache, None, {"result.mp4": b"video-2"})
    tx = cache.begin(RunInfo(run_id="u"))
    try:
        tx.carry_file(take_index.result_file(2), src="result.mp4")
        with pytest.raises(NoCommittedCacheError):
            tx.carry_file("x.mp4", src="missing.mp4")
        tx.commit()
    except BaseException:
        tx.discard()
        raise
    d = tmp_path / "c"
    assert (d / "take-000002.result.mp4").read_bytes() == b"video-2"
    assert store_check.check(tmp_path, "c") == []


def test_old_layout_is_one_take_and_from_take_is_checked(tmp_path):
    cache = FolderCache(tmp_path, "c")
    tx = cache.begin(RunInfo(run_id="old"))
    with open(tx.stage_path("result.mp4"), "wb") as f:
        f.write(b"v")
    tx.add_file("result.mp4")
    tx.stage_boundary(0, {"motion_frames": torch.zeros(3, 4, 4, 3)}, {"index": 0})
    tx.set_section("segments", {"spec": {"S": 2, "F": F, "M": M}, "seed": 5, "key": {}})
    tx.commit()
    with cache.snapshot() as snap:
        takes = segment_takes.read_takes(snap)
    assert [(t.number, t.result, t.boundaries, t.latest) for t in takes] == \
        [(1, "result.mp4", {0: "boundary_00000.safetensors"}, True)]
    assert segment_takes.choose(takes, 0, "c") is takes[0]
    with pytest.raises(Exception) as e:
        segment_takes.choose(takes, 7, "c")
    assert "keeps no take 7" in str(e.value) and e.value.details["kept"] == [1]
    assert os.path.exists(tmp_path / "c" / "boundary_00000.safetensors")


# ---------------------------------------------------------------- crash recovery of the take layout

class _Crash(Exception):
    pass


def _take(cache: FolderCache, number: int, keep: int, hook=None) -> None:
    """One segment take (3 segments: boundaries 0, 1 and the tail) carrying the base's takes."""
    tx = cache.begin(RunInfo(run_id=f"take-{number}"))
    if hook is not None:    # every operation after the lock is taken (a dead pid's lock is broken anyway)
        fsops.set_hook(hook)
    try:
        _stage_take(tx, number, keep)
    except _Crash:      # the process "dies": its staging (and .old) stay, its lock goes
        fsops.clear_hook()
        tx.lease.release()
        raise
    finally:
        fsops.clear_hook()


def _stage_take(tx, number: int, keep: int) -> None:
    from reuse_backend.store import manifest as mf
    takes = segment_takes.read_takes(tx.base)
    with open(tx.stage_path(take_index.RESULT), "wb") as f:
        f.write(f"video of take {number}".encode())
    tx.add_file(take_index.RESULT)
    for i in (0, 1):
        tx.stage_boundary(i, {"motion_frames": torch.full((3, 4, 4, 3), float(number))}, {"index": i})
    segment_takes.stage_tail_boundary(tx, {"motion_frames": torch.full((3, 4, 4, 3), -float(number))})
    kept = segment_takes.carry_history(tx, takes, keep - 1)
    body = {"spec": {"S": 3, "F": F, "M": M}, "seed": number, "take": number}
    tx.set_section("segments", body)
    segment_takes.publish_index(tx, segment_takes.Take(number, take_index.RESULT,
                                                       segment_takes.new_take_boundaries(3, True), body), kept)
    assert mf.boundary_file(1) in tx.staged.files
    tx.commit()


def _state(tmp_path) -> list:
    with FolderCache(tmp_path, "c").snapshot() as snap:
        out = []
        for t in segment_takes.read_takes(snap):
            with snap.open_file(t.result) as f:
                video = f.read().decode()
            tails = snap.load_file_value(t.boundaries[2])["motion_frames"]
            out.append((t.number, video, float(tails[0, 0, 0, 0])))
        return out


def test_a_crash_anywhere_in_a_take_commit_leaves_one_consistent_history(tmp_path):
    ops = []
    _take(FolderCache(tmp_path / "count", "c"), 1, keep=3)
    _take(FolderCache(tmp_path / "count", "c"), 2, keep=3, hook=lambda op, path: ops.append(op))
    total = len(ops)
    assert total > 20
    before = [(1, "video of take 1", -1.0)]
    after = [(2, "video of take 2", -2.0), (1, "video of take 1", -1.0)]
    seen = set()
    for k in range(total):
        root = tmp_path / f"k{k}"
        _take(FolderCache(root, "c"), 1, keep=3)
        count = [0]

        def hook(op, path):
            count[0] += 1
            if count[0] == k + 1:
                raise _Crash(op)
        try:
            _take(FolderCache(root, "c"), 2, keep=3, hook=hook)
        except _Crash:
            pass
        FolderCache(root, "c").recover()
        state = _state(root)
        assert state in (before, after), (k, state)
        seen.add(len(state))
        assert store_check.check(root, "c") == [], k
    assert seen == {1, 2}


def test_the_tail_boundary_is_created_through_the_hook_point(tmp_path):
    """The tail boundary's file is created by the hook point's exclusive create (as every staged
    file is), so the crash enumeration above reaches its creation too, not only its writes."""
    cache = FolderCache(tmp_path, "c")
    tx = cache.begin(RunInfo(run_id="tail"))
    ops = []
    fsops.set_hook(lambda op, path: ops.append((op, os.path.basename(path))))
    try:
        segment_takes.stage_tail_boundary(tx, {"motion_frames": torch.zeros((3, 4, 4, 3))})
    finally:
        fsops.clear_hook()
        tx.discard()
    assert ops[0] == ("open_exclusive", take_index.TAIL_BOUNDARY), ops


def test_a_damaged_old_take_disables_only_that_take(tmp_path):
    """Issue 27: one damaged older take (its result file truncated) made the whole version
    unreadable, so the intact latest take failed too (from_take=0). Now only that take is
    unusable: the latest and the other kept takes read and resume, the next take drops it, and
    check() still reports the file."""
    cache = FolderCache(tmp_path, "c")
    for n in (1, 2, 3):
        _take(cache, n, keep=3)
    bad = tmp_path / "c" / take_index.result_file(1)
    os.truncate(bad, 3)
    with cache.snapshot() as snap:                    # the version still reads
        takes = segment_takes.read_takes(snap)
        assert [t.number for t in takes] == [3, 2, 1]
        assert [t.damaged is not None for t in takes] == [False, False, True]
        assert "wrong size" in takes[2].damaged
        assert segment_takes.choose(takes, 0, "c").number == 3
        assert segment_takes.choose(takes, 2, "c").number == 2
        with pytest.raises(CorruptCacheError, match="take 1 is damaged") as ei:
            segment_takes.choose(takes, 1, "c")
        assert "another kept take" in ei.value.fix
        with snap.open_file(takes[1].result) as f:
            assert f.read() == b"video of take 2"
    assert [p.code for p in store_check.check(tmp_path, "c")] == ["size_mismatch"]
    _take(cache, 4, keep=3)                           # the next take carries 3 and 2, not the damaged 1
    assert [t[0] for t in _state(tmp_path)] == [4, 3, 2]
    assert store_check.check(tmp_path, "c") == []
