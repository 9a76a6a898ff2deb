"""A writer SIGKILLed in every phase of a commit, and a writer stopped past its lease, on the
real RGW. The writer is a subprocess (bucket_writer.py) whose requests pass the fault proxy;
the proxy parks the request of the phase and tells the test, which kills or stops the writer
right there (no timing guesses).

Asserted: a reader on a fresh host sees the last committed version or the writer's complete
one, never a mix (every file loaded, sizes and hashes checked); once the dead writer's lease
has run out, ``check`` reports only what a collection removes, ``check --repair`` leaves
nothing, and the next run on the writer's host commits (sweeping its dead local staging).
"""
from __future__ import annotations

import os
import signal

import pytest

from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket.store import BucketStore

from .bucket_help import NAME, Writer, commit, current, keys_under, read_back, wait_stale

pytestmark = pytest.mark.hostfree
LEASE_S = 2.0
RECORD = r"/log/\d+\.json$"


def _park(proxy, phase: str):
    if phase == "data-upload":              # half of the 1 MiB slot forwarded, then silence
        return proxy.stall("PUT", r"/data/writer-2/", after_bytes=256 << 10)
    if phase == "before-record":            # uploaded; the create of record 2 not yet sent on
        return proxy.hold("PUT", RECORD)
    if phase == "record-created":           # the gateway created record 2; the writer has not heard
        return proxy.hold("PUT", RECORD, when="after")
    if phase == "collection":               # committed; its collection deletes what v1 left (one batch)
        return proxy.hold("POST", r"\?delete")
    raise AssertionError(phase)


def _writer_env(rgw, proxy, root) -> dict:
    return rgw.env() | proxy.env() | {"SEEDREUSE_LEASE_S": str(LEASE_S), "SEEDREUSE_CACHE_ROOT": str(root)}


@pytest.mark.parametrize("phase", ["data-upload", "before-record", "record-created", "collection"])
def test_a_writer_killed_in_any_phase_leaves_one_whole_version(phase, bucket_url, rgw, proxy, tmp_path):
    h0, hw = tmp_path / "h0", tmp_path / "writer-host"
    _, v1 = commit(bucket_url, h0, 1)
    park = _park(proxy, phase)
    with Writer(_writer_env(rgw, proxy, hw), "commit", bucket_url, hw, NAME, 2) as w:
        w.expect("begun")
        park.wait_arrived(120)
        w.kill()
        park.release(forward=False)
    published = phase in ("record-created", "collection")
    seq, rec = current(bucket_url, h0)
    if published:
        assert seq == 2 and rec["writer"] == "writer-2", rec
        assert read_back(bucket_url, tmp_path / "reader") == (rec["manifest"]["version"], 2.0)
    else:
        assert seq == 1, rec
        assert read_back(bucket_url, tmp_path / "reader") == (v1, 1.0)
    cache = BucketCache(bucket_url, NAME, local_root=h0)
    wait_stale(cache, "writer-2")
    store = BucketStore(bucket_url, h0)
    found = store.check(NAME)
    assert all(p.code == "collectable" for p in found), [str(p) for p in found]
    if phase != "collection":                          # its lease at least is left
        assert any(p.path.endswith("/leases/writer-2.json") for p in found), [str(p) for p in found]
    store.check(NAME, repair=True)
    assert store.check(NAME) == []
    left = {k for k in keys_under(cache) if "writer-2" in k[len(cache.keys.base):]}
    named = {cache.keys.data(rel) for rel in rec["objects"].values()}
    assert left == (named if published else set()), left
    tx, v3 = commit(bucket_url, hw, 3)                 # the next run on the writer's host
    if phase != "collection":                          # it died before its staging was removed
        assert any("local staging" in r for r in tx.recovered), tx.recovered
    assert read_back(bucket_url, tmp_path / "reader-2") == (v3, 3.0)


def test_a_writer_stopped_past_its_lease_is_fenced_and_the_other_version_stands(bucket_url, rgw, proxy,
                                                                                 tmp_path):
    """The writer asks for record 2 and is stopped (SIGSTOP) right there; once its lease ran
    out, another run commits record 2 and its collection writes a fence (record 3) naming the
    writer before deleting what it uploaded. The stopped writer's create then reaches the
    gateway (refused: 412) and, after SIGCONT, it fails as fenced: nothing of it is published."""
    h0, hw = tmp_path / "h0", tmp_path / "writer-host"
    commit(bucket_url, h0, 1)
    hold = proxy.hold("PUT", RECORD)
    with Writer(_writer_env(rgw, proxy, hw), "commit", bucket_url, hw, NAME, 2) as w:
        w.expect("begun")
        hold.wait_arrived(120)
        os.kill(w.proc.pid, signal.SIGSTOP)
        cache = BucketCache(bucket_url, NAME, local_root=h0)
        wait_stale(cache, "writer-2")
        other, v3 = commit(bucket_url, tmp_path / "other-host", 3)
        seq, rec = current(bucket_url, h0)
        assert other.seq == 2 and seq == 3 and rec["kind"] == "fence" and rec["fenced"] == ["writer-2"], rec
        assert not any("/data/writer-2/" in k for k in keys_under(cache))     # collected after the fence
        hold.release()                                  # its create arrives late: record 2 is taken
        os.kill(w.proc.pid, signal.SIGCONT)
        out = w.outcome()
    assert out["result"] == "error" and out["type"] == "TransactionError", out
    assert "fenced" in out["message"] and "SEEDREUSE_LEASE_S" in out["fix"], out
    assert current(bucket_url, h0)[0] == 3
    assert read_back(bucket_url, tmp_path / "reader") == (v3, 3.0)
    store = BucketStore(bucket_url, h0)
    store.check(NAME, repair=True)
    assert store.check(NAME) == []
