"""BAD CACHES: every kind of damage is refused with a clear CorruptCacheError and reported by check()."""
import hashlib
import json
import os
import time

import pytest
from tests.backend.storehelp import cache_marker, entries, write_version

from reuse_backend.store import file_checks
from reuse_backend.store import manifest as mf
from reuse_backend.folder.check import check
from reuse_backend.errors import CorruptCacheError
from reuse_backend.store.owner import pid_namespace
from reuse_backend.folder.cache import FolderCache

SLOT = "slot_text.safetensors"


@pytest.fixture
def cache(tmp_path):
    c = FolderCache(tmp_path, "a")
    write_version(c, 1)
    return c


def _manifest(cache):
    return json.loads((cache.paths.current / mf.MANIFEST).read_bytes())


def _save_manifest(cache, m):
    (cache.paths.current / mf.MANIFEST).write_bytes(json.dumps(m).encode())


def _rewrite(cache, fname, data, *, consistent=True):
    """Replace a file; with consistent=True the manifest records its new size and hash."""
    (cache.paths.current / fname).write_bytes(data)
    if consistent:
        m = _manifest(cache)
        m["files"][fname] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        _save_manifest(cache, m)


def _edit_header(data, fn):
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    fn(header)
    raw = json.dumps(header).encode()
    raw += b" " * (-(8 + len(raw)) % 8)
    return len(raw).to_bytes(8, "little") + raw + data[8 + n:]


def _first_tensor(header):
    return next(k for k in header if k != "__metadata__")


def _codes(cache):
    return {p.code for p in check(cache.root, cache.name)}


def _refused_on_load(cache, match):
    with cache.snapshot() as snap, pytest.raises(CorruptCacheError, match=match) as ei:
        snap.load_slot("text", verify=False)
    assert ei.value.fix and "unreadable_tensor" in _codes(cache)


def _refused_on_snapshot(cache, match, code):
    t0 = time.monotonic()
    with pytest.raises(CorruptCacheError, match=match) as ei:
        cache.snapshot()
    assert time.monotonic() - t0 < 0.5                   # refused at once, not after retries
    assert ei.value.fix and "clear a --yes" in ei.value.fix
    assert code in _codes(cache), check(cache.root, cache.name)


def test_good_cache_is_clean(cache):
    assert check(cache.root, "a") == []


def test_truncated_tensor_file(cache):
    data = (cache.paths.current / SLOT).read_bytes()
    _rewrite(cache, SLOT, data[:-3], consistent=False)
    _refused_on_snapshot(cache, "wrong size", "size_mismatch")
    _rewrite(cache, SLOT, data[:-3])                     # manifest agrees: the format check refuses
    _refused_on_load(cache, "truncated")


def test_oversized_tensor_file(cache):
    data = (cache.paths.current / SLOT).read_bytes()
    _rewrite(cache, SLOT, data + b"\0" * 16)
    _refused_on_load(cache, "trailing bytes")


@pytest.mark.parametrize("dtype", ["NOPE", "F64"])
def test_wrong_dtype(cache, dtype):
    data = (cache.paths.current / SLOT).read_bytes()
    _rewrite(cache, SLOT, _edit_header(data, lambda h: h[_first_tensor(h)].update(dtype=dtype)))
    _refused_on_load(cache, "dtype|data_offsets|size|bytes")


def test_mismatched_shape(cache):
    data = (cache.paths.current / SLOT).read_bytes()
    _rewrite(cache, SLOT, _edit_header(data, lambda h: h[_first_tensor(h)].update(shape=[7, 7])))
    _refused_on_load(cache, "shape|data_offsets|size|bytes")


def test_same_size_content_change_fails_hash(cache):
    path = cache.paths.current / SLOT
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with cache.snapshot() as snap:
        assert snap.verify_hashes() == [f"{SLOT}: sha256 mismatch"]
        with pytest.raises(CorruptCacheError, match="sha256"):
            snap.load_slot("text", verify=True)
    assert "hash_mismatch" in _codes(cache)


def test_verify_on_load_env_switch(cache, monkeypatch):
    path = cache.paths.current / SLOT
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF          # inside tensor data: structurally valid, content changed
    path.write_bytes(bytes(data))
    monkeypatch.setenv("SEEDREUSE_VERIFY_ON_LOAD", "1")
    with cache.snapshot() as snap, pytest.raises(CorruptCacheError, match="sha256"):
        snap.load_slot("text")


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/b", "..", ".hidden", "a\\b"])
def test_path_traversal_in_manifest(cache, bad):
    m = _manifest(cache)
    m["files"][bad] = m["files"].pop("result.mp4")
    _save_manifest(cache, m)
    _refused_on_snapshot(cache, "unsafe|file name|invalid", "invalid_manifest")


def test_slot_pointing_outside(cache):
    m = _manifest(cache)
    m["slots"]["text"]["file"] = "../b/slot_text.safetensors"
    _save_manifest(cache, m)
    _refused_on_snapshot(cache, "invalid manifest", "invalid_manifest")


def test_symlinked_file(cache, tmp_path):
    target = tmp_path / "outside.mp4"
    os.rename(cache.paths.current / "result.mp4", target)
    os.symlink(target, cache.paths.current / "result.mp4")
    _refused_on_snapshot(cache, "not a regular file", "symlinked_file")


def test_symlinked_manifest(cache, tmp_path):
    os.rename(cache.paths.current / mf.MANIFEST, tmp_path / "m.json")
    os.symlink(tmp_path / "m.json", cache.paths.current / mf.MANIFEST)
    _refused_on_snapshot(cache, "manifest.json is not a regular file", "invalid_manifest")


def test_directory_in_place_of_a_file(cache):
    os.unlink(cache.paths.current / "result.mp4")
    os.mkdir(cache.paths.current / "result.mp4")
    _refused_on_snapshot(cache, "not a regular file", "not_regular")


def test_symlinked_cache_dir(cache, tmp_path):
    os.rename(cache.paths.current, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", cache.paths.current)
    _refused_on_snapshot(cache, "symlink", "symlinked_cache_dir")


def test_wrong_schema_version(cache):
    m = _manifest(cache)
    m["schema"] = "seedreuse-cache/2"
    _save_manifest(cache, m)
    _refused_on_snapshot(cache, "unsupported schema", "invalid_manifest")


@pytest.mark.parametrize("edit", ["extra_key", "missing_key", "run_extra_key", "bad_version",
                                  "slot_not_in_files", "bad_boundary_index", "bad_sha"])
def test_manifest_shape(cache, edit):
    m = _manifest(cache)
    if edit == "extra_key":
        m["pickle"] = "no"
    elif edit == "missing_key":
        del m["sections"]
    elif edit == "run_extra_key":
        m["run"]["user"] = "x"
    elif edit == "bad_version":
        m["version"] = "../../etc"
    elif edit == "slot_not_in_files":
        del m["files"][SLOT]
    elif edit == "bad_boundary_index":
        m["boundaries"]["01"] = m["boundaries"].pop("1")
    elif edit == "bad_sha":
        m["files"][SLOT]["sha256"] = "abc"
    _save_manifest(cache, m)
    _refused_on_snapshot(cache, "invalid manifest", "invalid_manifest")


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe", b'{"schema": NaN}', b"[]",
                                 b'{"a": 1, "a": 2}', b" " * (mf.MAX_MANIFEST_BYTES + 1)])
def test_unparseable_manifest(cache, raw):
    (cache.paths.current / mf.MANIFEST).write_bytes(raw)
    _refused_on_snapshot(cache, "manifest", "invalid_manifest")


def test_manifest_of_another_cache(cache):
    m = _manifest(cache)
    m["name"] = "b"
    _save_manifest(cache, m)
    _refused_on_snapshot(cache, "another cache", "invalid_manifest")


def test_missing_file(cache):
    os.unlink(cache.paths.current / mf.boundary_file(1))
    _refused_on_snapshot(cache, "boundary_00001.safetensors is missing", "missing_file")


def test_a_version_over_the_load_bound_is_refused(cache, monkeypatch):
    monkeypatch.setattr(file_checks, "MAX_VERSION_BYTES", 100)
    with pytest.raises(CorruptCacheError, match="load bound"):
        FolderCache(cache.root, "a").snapshot()
    assert "too_large" in {p.code for p in check(cache.root, "a")}


def test_extra_file_reported(cache):
    (cache.paths.current / "junk.bin").write_bytes(b"x")
    assert cache_marker(cache) == 1                      # harmless for readers
    assert _codes(cache) == {"extra_file"}


def test_invalid_name(tmp_path):
    for bad in ("../x", "/etc/passwd", "a/b", ""):
        assert [p.code for p in check(tmp_path, bad)] == ["invalid_name"]


def test_corrupt_version_is_replaced_by_next_run(cache):
    os.unlink(cache.paths.current / "result.mp4")
    tx = cache.begin()
    assert tx.base is None and isinstance(tx.base_error, CorruptCacheError)
    tx.discard()
    write_version(cache, 2)
    assert cache_marker(cache) == 2 and check(cache.root, "a") == []


def _dead_lock(path):
    path.write_text(json.dumps({"host": os.uname().nodename, "pid": 2 ** 22 + 12345,
                                "pid_start": None, "pid_ns": pid_namespace(), "run_id": "gone",
                                "started_at": 0,
                                "lease_s": 120.0}))


def test_stale_leftovers_reported_and_repaired(cache):
    root = cache.root
    os.mkdir(cache.paths.tmp)
    os.mkdir(cache.paths.old)
    _dead_lock(cache.paths.lock)
    (root / "a.lock.new-0123").write_bytes(b"")
    problems = check(root, "a")
    assert {p.code for p in problems} == {"stale_tmp", "stale_old", "dead_lock", "stray_lock_file"}
    assert all(p.message and p.fix and p.path for p in problems)
    repaired = check(root, "a", repair=True)
    assert {p.code for p in repaired} == {"stale_tmp", "stale_old", "dead_lock", "stray_lock_file"}
    assert all(p.repaired for p in repaired)
    assert entries(root) == ["a"] and check(root, "a") == [] and cache_marker(cache) == 1


def test_repair_restores_previous_from_old(cache):
    os.rename(cache.paths.current, cache.paths.old)
    assert _codes(cache) == {"current_missing"}
    assert [p.repaired for p in check(cache.root, "a", repair=True)] == [True]
    assert cache_marker(cache) == 1


def test_repair_never_deletes_a_committed_version(cache):
    os.unlink(cache.paths.current / mf.boundary_file(0))
    os.mkdir(cache.paths.tmp)
    result = check(cache.root, "a", repair=True)
    assert {(p.code, p.repaired) for p in result} == {("stale_tmp", True), ("missing_file", False)}
    assert "clear a --yes" in next(p for p in result if p.code == "missing_file").fix
    assert (cache.paths.current / mf.MANIFEST).exists()


def test_repair_refused_while_a_writer_is_live(cache):
    lock = cache.writer_lock("committer").acquire()      # a commit's critical section
    try:
        result = check(cache.root, "a", repair=True)
        assert [p.code for p in result] == ["writer_active"]
    finally:
        lock.release()


def test_repair_keeps_a_live_runs_staging_and_removes_a_dead_ones(cache):
    """Runs stage without the writer lock, each under its lease (run_lease.py): check and repair
    never touch a live run's staging; a dead run's (lease gone) is reported and removed."""
    live, dead = cache.begin(), cache.begin()
    dead.lease.release()                                   # as if its process had died
    try:
        found = check(cache.root, "a")
        assert [(p.code, os.path.basename(p.path)) for p in found] == [("stale_tmp", dead.staging_id)]
        result = check(cache.root, "a", repair=True)
        assert [(p.code, p.repaired) for p in result] == [("stale_tmp", True)]
        assert live.staging.is_dir() and not dead.staging.exists()
        live.stage_slot("text", {"x": 1}, key={"k": 1})
        live.commit()
    finally:
        live.discard()
        dead.discard()
    assert check(cache.root, "a") == [] and not cache.paths.tmp.exists()
