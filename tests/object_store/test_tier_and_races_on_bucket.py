"""The local tier and the races around a commit (issue 41, defect 6), on the in-memory double (fast
lane) and on the real RGW (the proof): a version this host holds is pinned when it is opened, a
full local disk trims the tier or fails typed, a clear or an eviction never clears a version
committed after its look, a collection never aborts a live run's multipart upload, and runs in
another pid namespace with this host name keep their local staging.
"""
from __future__ import annotations

import os
import subprocess
import threading

import pytest
import torch

from reuse_backend.bucket import budget, client as clients, collect, leases
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.errors import CacheBusyError, StorageFullError
from tests import tier_gate

from .bucket_help import NAME, Writer, commit, image_value, keys_under, read_back, text_value

pytestmark = pytest.mark.hostfree
BIG = (6 << 20) // 4            # float32 values of a 6 MiB slot: over a 5 MiB multipart threshold


def test_a_version_this_host_holds_is_pinned_when_its_snapshot_is_made(bucket, tmp_path, monkeypatch):
    a = tmp_path / "a"
    tx, v1 = commit(bucket.url, a, 1)
    v1_objects = {k for k in keys_under(tx.cache) if "/data/" in k}
    snap = BucketCache(bucket.url, NAME, local_root=a).snapshot()      # held here: no reader lease
    monkeypatch.setenv("SEEDREUSE_LOCAL_TIER_BYTES", "1")
    assert BucketCache(bucket.url, NAME, local_root=a).tier.trim()     # the tier lets the blobs go
    commit(bucket.url, tmp_path / "b", 2)                               # its collection removes v1's objects
    assert not v1_objects & keys_under(tx.cache)
    with snap:
        assert snap.version == v1
        assert torch.equal(snap.load_slot("image")["big"], image_value(1)["big"])
        assert torch.equal(snap.load_slot("text")["cond"], text_value(1)["cond"])


@pytest.fixture
def small_disk(tmp_path):
    """A real 3 MiB filesystem (tmpfs) for a host's local tier."""
    d = tmp_path / "small-disk"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        tier_gate.require("the full-disk test", f"mounting a tmpfs needs root: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_a_full_local_disk_trims_the_tier_then_fails_typed(bucket, tmp_path, small_disk, monkeypatch):
    monkeypatch.setenv("SEEDREUSE_LOCAL_TIER_BYTES", "1G")      # the tier's own budget never trims here
    images = []
    for m in (1, 2, 3):                          # each 1 MiB version fetched; the third does not fit
        _, v = commit(bucket.url, tmp_path / "writer", m)
        assert read_back(bucket.url, small_disk) == (v, float(m))
        with BucketCache(bucket.url, NAME, local_root=small_disk).snapshot() as snap:
            images.append(snap.manifest["files"]["slot_image.safetensors"])
    first = BucketCache(bucket.url, NAME, local_root=small_disk).tier
    assert not first.has(images[0]["sha256"], images[0]["bytes"])      # trimmed to make room
    assert first.has(images[2]["sha256"], images[2]["bytes"])
    for blob in first.blobs.glob("*/*"):
        blob.unlink()                                    # nothing left in the tier to trim
    st = os.statvfs(small_disk)
    with open(small_disk / "ballast", "wb") as f:      # the disk filled by something else
        f.write(b"\0" * (st.f_bavail * st.f_frsize))
    commit(bucket.url, tmp_path / "writer", 4)
    with pytest.raises(StorageFullError) as e:
        read_back(bucket.url, small_disk)
    assert "SEEDREUSE_CACHE_ROOT" in e.value.fix and e.value.details["cache"] == NAME, e.value


def _race_into(monkeypatch, fn_name: str, cache_name: str, during):
    """``budget.<fn_name>`` that runs ``during()`` once, right after it looked at ``cache_name``."""
    real, done = getattr(budget, fn_name), []

    def looked(cache, *a, **kw):
        out = real(cache, *a, **kw)
        if cache.name == cache_name and not done:
            done.append(during())
        return out
    monkeypatch.setattr(budget, fn_name, looked)
    return done


def test_a_clear_never_clears_a_version_committed_after_its_look(bucket, tmp_path, monkeypatch):
    commit(bucket.url, tmp_path / "a", 1)
    raced = _race_into(monkeypatch, "in_use", NAME, lambda: commit(bucket.url, tmp_path / "b", 2)[1])
    with pytest.raises(CacheBusyError):
        BucketCache(bucket.url, NAME, local_root=tmp_path / "a").clear()
    assert raced and read_back(bucket.url, tmp_path / "r") == (raced[0], 2.0)


def test_an_eviction_never_clears_a_version_committed_after_its_look(bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("SEEDREUSE_MAX_BYTES", str(3 << 19))          # 1.5 MiB: one version fits, not two
    monkeypatch.setenv("SEEDREUSE_CACHE_ROOT", str(tmp_path / "default"))
    commit(bucket.url, tmp_path / "a", 1, name="old")
    raced = _race_into(monkeypatch, "in_use", "old", lambda: commit(bucket.url, tmp_path / "b", 2, name="old")[1])
    commit(bucket.url, tmp_path / "a", 3, name="new")                 # over budget: "old" is looked at
    assert raced and read_back(bucket.url, tmp_path / "r", name="old") == (raced[0], 2.0)


@pytest.fixture
def paused_upload(bucket, request, monkeypatch):
    """(arrived, release): the next multipart upload stops after it began, until released."""
    if bucket.kind == "memory":
        bucket.mem.multipart_bytes = 5 << 20
        arrived, go = threading.Event(), threading.Event()

        def on_part(key, offset):
            if offset > 0:
                arrived.set()
                go.wait(60)
        bucket.mem.on_part = on_part
        return arrived, go.set
    monkeypatch.setattr(clients, "MULTIPART_BYTES", 5 << 20)
    proxy = request.getfixturevalue("proxied")()
    hold = proxy.hold("PUT", r"partNumber=2")
    return hold.arrived, hold.release


def test_a_collection_never_aborts_the_multipart_upload_of_a_live_run(bucket, tmp_path, paused_upload, monkeypatch):
    arrived, release = paused_upload
    tx, _ = commit(bucket.url, tmp_path / "a", 1)
    bucket.plant(tx.cache.keys.data(f"data/gone/{'0' * 64}"), b"left by a run that is gone")   # to collect
    out, real_live = {}, leases.live

    def run():
        try:
            tx = BucketCache(bucket.url, NAME, local_root=tmp_path / "b").begin()
            tx.stage_slot("big", {"big": torch.full((BIG,), 5.0)}, key={"digest": "big"})
            out["version"] = tx.commit()
        except Exception as e:  # noqa: BLE001 - handed to the test
            out["error"] = e
    t = threading.Thread(target=run)

    def live_then_a_run_begins(client, prefix, *a, **kw):
        found = real_live(client, prefix, *a, **kw)
        if prefix.endswith("/leases/") and not t.is_alive() and "version" not in out:
            t.start()                            # the run begins after the collection listed leases
            assert arrived.wait(60), "the run's multipart upload never started"
        return found
    monkeypatch.setattr(leases, "live", live_then_a_run_begins)
    collect.collect(BucketCache(bucket.url, NAME, local_root=tmp_path / "a"))
    monkeypatch.setattr(leases, "live", real_live)
    release()
    t.join(120)
    assert "error" not in out, out
    with BucketCache(bucket.url, NAME, local_root=tmp_path / "r").snapshot() as snap:
        assert snap.version == out["version"] and float(snap.load_slot("big")["big"][-1]) == 5.0


def test_a_run_in_another_pid_namespace_with_this_host_name_keeps_its_staging(bucket_url, tmp_path):
    """A writer in its own pid namespace (same host name, same local tier; its pid means nothing
    here) stages; a run of this process sweeps the tier; the writer then commits."""
    root = tmp_path / "shared-tier"
    commit(bucket_url, root, 1)
    ns = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
          'echo 3999000 > /proc/sys/kernel/ns_last_pid && "$0" "$@"; exit $?']
    with Writer({}, "staged", bucket_url, root, NAME, 2, prefix=ns) as w:
        w.expect("begun")
        w.expect("staged")
        tx = BucketCache(bucket_url, NAME, local_root=root).begin()      # sweeps this host's staging
        tx.discard()
        w.say("go")
        got = w.outcome()
    assert got["result"] == "committed", got
    assert read_back(bucket_url, tmp_path / "r") == (got["version"], 2.0)
