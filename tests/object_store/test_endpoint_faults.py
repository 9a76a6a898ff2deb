"""The endpoint misbehaving, on the real RGW behind the fault proxy (fault_proxy.py): throttling,
a stalled upload, a lost race and a lost answer, a conflict, the gateway restarted or gone
mid-commit, and an endpoint that ignores If-None-Match (refused at first use).

What is asserted each time: bounded retries, then either the commit or a typed error that names
the endpoint and the fix; the last good version stays current and whole (read back on a fresh
host: every file loaded, sizes and hashes checked); a record is published once or not at all.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from reuse_backend.bucket import log as commit_log
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket.client import NotFound
from reuse_backend.bucket.store import BucketStore
from reuse_backend.errors import ObjectStoreError, ReuseError, UnsupportedEndpointError

from .bucket_help import NAME, REPO, commit, current, prefix_keys, read_back, stage, wait_stale

pytestmark = pytest.mark.hostfree
RECORD = r"/log/\d+\.json$"
RECORD_2 = r"/log/0+2\.json$"


def _begin(url, root, marker, **kw):
    tx = BucketCache(url, NAME, local_root=root, **kw).begin()
    stage(tx, marker)
    return tx


def _commit_in_thread(tx) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def go():
        try:
            out["version"] = tx.commit()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e
    t = threading.Thread(target=go)
    t.start()
    return t, out


def _data_key(tx, fname: str) -> str:
    keys = tx.cache.keys
    return keys.data(keys.data_rel(tx.run.run_id, tx.staged.files[fname]["sha256"]))


def _clean_after_repair(url, root) -> None:
    store = BucketStore(url, root)
    store.check(NAME, repair=True)
    assert store.check(NAME) == []


def test_a_few_slowdowns_are_retried_and_the_commit_succeeds(bucket_url, proxied, tmp_path):
    proxy = proxied()
    commit(bucket_url, tmp_path / "h0", 1)
    rule = proxy.fail("PUT", r"/(log|data)/", 503, "SlowDown", times=3)
    tx, v2 = commit(bucket_url, tmp_path / "h1", 2)
    assert rule.hits == 3 and tx.seq == 2
    assert read_back(bucket_url, tmp_path / "reader") == (v2, 2.0)


def test_persistent_slowdown_fails_clearly_after_bounded_retries(bucket_url, proxied, tmp_path):
    _, v1 = commit(bucket_url, tmp_path / "h0", 1)
    proxy = proxied(AWS_MAX_ATTEMPTS=3)
    proxy.fail("PUT", RECORD, 503, "SlowDown", times=None)
    tx = _begin(bucket_url, tmp_path / "h1", 2)
    with pytest.raises(ObjectStoreError) as e:
        tx.commit()
    tx.discard()
    err = e.value
    assert proxy.endpoint in err.message and "SlowDown" in err.message and "3 attempt" in err.message, err.message
    assert err.details["endpoint"] == proxy.endpoint and "AWS_MAX_ATTEMPTS" in err.fix, err.fix
    assert err.details["published"] is False and "record 2 was not created" in err.fix, err.fix   # read back
    assert proxy.count("PUT", RECORD_2) == 3                    # bounded: AWS_MAX_ATTEMPTS
    assert current(bucket_url, tmp_path / "h0")[0] == 1
    assert read_back(bucket_url, tmp_path / "reader") == (v1, 1.0)


def test_an_upload_stalled_past_the_timeout_is_retried(bucket_url, proxied, tmp_path):
    commit(bucket_url, tmp_path / "h0", 1)
    proxy = proxied(SEEDREUSE_S3_TIMEOUT_S=3)
    stalled = proxy.stall("PUT", r"/data/", after_bytes=256 << 10)     # in the middle of the 1 MiB slot
    tx, v2 = commit(bucket_url, tmp_path / "h1", 2)
    assert stalled.arrived.is_set() and proxy.count("PUT", _data_key(tx, "slot_image.safetensors")) == 2
    assert read_back(bucket_url, tmp_path / "reader") == (v2, 2.0)


def test_an_upload_that_always_stalls_fails_clearly_and_publishes_nothing(bucket_url, proxied, tmp_path):
    _, v1 = commit(bucket_url, tmp_path / "h0", 1)
    proxy = proxied(SEEDREUSE_S3_TIMEOUT_S=3, AWS_MAX_ATTEMPTS=2)
    proxy.stall("PUT", r"/data/", after_bytes=256 << 10, times=None)
    tx = _begin(bucket_url, tmp_path / "h1", 2)
    with pytest.raises(ObjectStoreError) as e:
        tx.commit()
    err = e.value
    assert proxy.endpoint in err.message and "SEEDREUSE_S3_TIMEOUT_S" in err.fix, (err.message, err.fix)
    assert err.details["published"] is False and "nothing of this run was published" in err.fix.lower(), err.fix
    image = _data_key(tx, "slot_image.safetensors")
    assert proxy.count("PUT", image) == 2
    with pytest.raises(NotFound):                 # half an upload is never an object
        tx.cache.client.head(image)
    tx.discard()
    assert proxy.count("PUT", RECORD_2) == 0
    assert read_back(bucket_url, tmp_path / "reader") == (v1, 1.0)


def test_a_lost_race_for_the_next_record_rebases_onto_the_winner(bucket_url, proxied, tmp_path):
    """Two writers, one number: A's create of record 2 is held at the proxy while B creates it;
    then A's request reaches the gateway, which refuses it (412); A rebases and takes 3."""
    proxy = proxied()
    commit(bucket_url, tmp_path / "h0", 1)
    a, b = _begin(bucket_url, tmp_path / "ha", 2), _begin(bucket_url, tmp_path / "hb", 3)
    hold = proxy.hold("PUT", RECORD)
    t, out = _commit_in_thread(a)
    hold.wait_arrived(60)
    vb = b.commit()
    hold.release()
    t.join(120)
    assert "error" not in out, out
    assert (b.seq, a.seq) == (2, 3) and "base changed" in a.rebased, a.rebased
    assert proxy.count("PUT", RECORD_2) == 2            # A's refused create, B's
    seq, rec = current(bucket_url, tmp_path / "h0")
    assert seq == 3 and rec["writer"] == a.run.run_id and vb != out["version"]
    assert read_back(bucket_url, tmp_path / "reader") == (out["version"], 2.0)


def test_a_create_whose_answer_was_lost_is_recognised_as_its_own(bucket_url, proxied, tmp_path):
    """The gateway created record 2, the answer never came; botocore sends the PUT again, which
    now answers 412: the record is read back, found to be this run's, and the commit stands
    (no second record, no rebase onto itself)."""
    proxy = proxied()
    commit(bucket_url, tmp_path / "h0", 1)
    proxy.drop("PUT", RECORD, when="after")
    tx, v2 = commit(bucket_url, tmp_path / "h1", 2)
    assert tx.seq == 2 and tx.rebased is None
    assert proxy.count("PUT", RECORD_2) == 2 and proxy.count("PUT", r"/log/0+3\.json$") == 0
    assert commit_log.numbers(tx.cache.client, tx.cache.keys)[-1] == 2
    assert read_back(bucket_url, tmp_path / "reader") == (v2, 2.0)


def test_an_injected_409_conflict_is_retried(bucket_url, proxied, tmp_path):
    proxy = proxied()
    commit(bucket_url, tmp_path / "h0", 1)
    rule = proxy.fail("PUT", RECORD, 409, "ConditionalRequestConflict", times=2)
    tx, v2 = commit(bucket_url, tmp_path / "h1", 2)
    assert rule.hits == 2 and proxy.count("PUT", RECORD_2) == 3 and tx.seq == 2
    assert read_back(bucket_url, tmp_path / "reader") == (v2, 2.0)


def test_the_gateway_restarted_while_a_run_stages(bucket_url, gateway, tmp_path):
    """A run stages; the gateway is killed and started again (its heartbeats fail meanwhile and
    are retried within the lease); the run then commits, or fails with a typed error when the
    restart outlasted its lease. Either way nothing is lost."""
    _, v1 = commit(bucket_url, tmp_path / "h0", 1)
    tx = _begin(bucket_url, tmp_path / "h1", 2, lease_s=10, heartbeat_s=0.5)
    gateway.restart_gateway()
    try:
        version, outcome = tx.commit(), "committed"
    except ReuseError as e:
        version, outcome = v1, f"{type(e).__name__}: {e.message}"
    finally:
        tx.discard()
    print(f"[rgw] after the restart: {outcome}")
    assert read_back(bucket_url, tmp_path / "reader")[0] == version
    if outcome != "committed":
        wait_stale(tx.cache, tx.run.run_id)
    _clean_after_repair(bucket_url, tmp_path / "h0")


def test_the_gateway_gone_during_the_commit_fails_clearly_and_loses_nothing(bucket_url, gateway, proxied,
                                                                           tmp_path):
    _, v1 = commit(bucket_url, tmp_path / "h0", 1)
    proxy = proxied(AWS_MAX_ATTEMPTS=3)
    tx = _begin(bucket_url, tmp_path / "h1", 2, lease_s=3, heartbeat_s=0.5)
    hold = proxy.hold("PUT", RECORD)
    t, out = _commit_in_thread(tx)
    hold.wait_arrived(60)
    gateway.kill_gateway()
    hold.release()                       # forwarded to a gateway that is gone
    t.join(120)
    err = out.get("error")
    assert isinstance(err, ObjectStoreError) and proxy.endpoint in err.message, out
    assert "reachable" in err.fix and err.details["published"] is None, err.fix   # unknown: never half
    assert "record 2" in err.fix and "never a mix" in err.fix, err.fix
    tx.discard()                         # with the gateway still down: no exception, the lease turns stale
    gateway.start_gateway()
    assert current(bucket_url, tmp_path / "h0")[0] == 1
    assert read_back(bucket_url, tmp_path / "reader") == (v1, 1.0)
    wait_stale(tx.cache, tx.run.run_id)
    _clean_after_repair(bucket_url, tmp_path / "h0")


def test_an_endpoint_that_ignores_if_none_match_is_refused_at_first_use(bucket_url, proxied, tmp_path):
    proxy = proxied()
    rule = proxy.strip("PUT", r"\.seedreuse-probe/", "If-None-Match")
    out = subprocess.run([sys.executable, "-m", "reuse_backend", "probe", bucket_url], cwd=REPO,
                         env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "UNSAFE" in out.stdout and "create race: 8 of 8" in out.stdout and "verdict: unsafe" in out.stdout, out.stdout
    assert rule.hits >= 8                                     # the creates reached the gateway unconditioned
    with pytest.raises(UnsupportedEndpointError) as e:
        BucketCache(bucket_url, NAME, local_root=tmp_path / "h0")
    assert e.value.actual == ["create race"] and proxy.endpoint in e.value.message, e.value
    assert "probe" in e.value.fix
    assert prefix_keys(bucket_url) == set()                   # nothing was written (the probe cleaned up)
