"""A log that restarts or goes back (issue 41, defect 1), on the in-memory double (fast lane) and
on the real RGW (the proof): the prefix wiped (by hand or a lifecycle rule), the bucket deleted
and created again, another store behind the same bucket name (an endpoint or credentials
switch), a replica that is behind, a user's namespace wiped and a new user of the same name.

Each time a host that remembers a record the bucket no longer holds (its local tier) must notice
it: it reads what the bucket holds, never serves what it remembered, and a run that staged on
the vanished record publishes nothing; a run that carries a slot from its base then carries the
bucket's, so a third host reads every object the newest record names.
"""
from __future__ import annotations

import pytest
import torch

from reuse_backend.bucket import client as clients, probe
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.errors import TransactionError
from reuse_backend.store import namespaces

from . import rgw as rgw_mod
from .bucket_help import NAME, commit, current, image_value, read_back, text_value
from .memory_bucket import MemoryS3

pytestmark = pytest.mark.hostfree


def _begin_carrying(url, root, marker):
    """A run that encodes slot text anew and carries slot image from its base."""
    tx = BucketCache(url, NAME, local_root=root).begin()
    tx.stage_slot("text", text_value(marker), key={"digest": f"text-{marker}"})
    tx.carry_slot("image")
    return tx


def _reads_whole(url, root) -> tuple[str, float]:
    """(version, text marker) on a fresh host; every object of the newest record loads."""
    with BucketCache(url, NAME, local_root=root).snapshot() as snap:
        text, image = snap.load_slot("text"), snap.load_slot("image")
        assert image["big"].numel() == image_value(0)["big"].numel()
        return snap.version, float(text["cond"][0, 0])


def _remembering_host(url, root):
    """Host A commits three versions and holds the third in its tier."""
    for marker in (1, 2, 3):
        _, v = commit(url, root, marker)
    assert current(url, root)[0] == 3
    return v


def test_a_wiped_prefix_is_noticed_and_nothing_is_built_on_the_old_version(bucket, tmp_path):
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    old = _remembering_host(bucket.url, a)
    assert bucket.wipe() > 0                              # an operator or a lifecycle rule
    _, vb = commit(bucket.url, b, 7)                       # host B starts the log again: record 1
    with BucketCache(bucket.url, NAME, local_root=a).snapshot() as snap:
        assert snap.version == vb != old and snap.seq == 1   # never A's remembered record 3
        assert torch.equal(snap.load_slot("image")["big"], image_value(7)["big"])
    tx = _begin_carrying(bucket.url, a, 8)                 # carries B's image, not the wiped one
    assert tx.base_head.seq == 1
    va = tx.commit()
    assert tx.seq == 2 and _reads_whole(bucket.url, tmp_path / "host-c") == (va, 8.0)


def test_a_run_whose_base_expired_while_it_staged_publishes_nothing(bucket, tmp_path):
    """A lifecycle rule expires the old objects (the log and the data), not the run's lease,
    which its heartbeat keeps new: the run still holds its lease, and its base is gone."""
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    _remembering_host(bucket.url, a)
    tx = _begin_carrying(bucket.url, a, 9)                 # staged on record 3
    keys = tx.cache.keys
    assert bucket.wipe(keys.log_prefix) and bucket.wipe(keys.data_prefix)
    _, vb = commit(bucket.url, b, 7)
    _, vb2 = commit(bucket.url, b, 8)                      # the new log passes the old number
    _, vb3 = commit(bucket.url, b, 10)
    assert current(bucket.url, b)[0] == 3
    with pytest.raises(TransactionError) as e:
        tx.commit()
    tx.discard()
    assert e.value.details["lost"] == "base record" and "wiped" in e.value.message and e.value.fix, e.value
    assert _reads_whole(bucket.url, tmp_path / "host-c") == (vb3, 10.0)


def test_a_recreated_bucket_is_noticed(bucket, tmp_path):
    url = bucket.fresh_bucket()
    a = tmp_path / "host-a"
    old = _remembering_host(url, a)
    tx = _begin_carrying(url, a, 9)
    bucket.recreate(url)
    _, vb = commit(url, tmp_path / "host-b", 7)
    with BucketCache(url, NAME, local_root=a).snapshot() as snap:
        assert snap.version == vb != old
    with pytest.raises(TransactionError):
        tx.commit()
    tx.discard()
    assert _reads_whole(url, tmp_path / "host-c") == (vb, 7.0)


@pytest.fixture
def other_store(bucket, monkeypatch):
    """``switch()``: from now on this process's bucket name is served by another store with its
    own objects (on RGW: another tenant's bucket of the same name, reached with its keys; on the
    double: another MemoryS3)."""
    if bucket.kind == "memory":
        other = MemoryS3("memory://another-endpoint")
        yield lambda: other.install(bucket.loc.bucket)
        other.uninstall()
        return
    access, secret = "seedreuse-other-access", "seedreuse-other-secret-0123456789"
    bucket.rgw.runner.run("radosgw-admin", "-c", bucket.rgw.conf, "user", "create", "--tenant", "other",
                          "--uid", "seedreuse", "--display-name", "another store", "--access-key", access,
                          "--secret", secret, check=False, timeout=120)

    def switch():
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", access)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        clients.forget_clients()
        probe.forget()
        c = clients.for_bucket(bucket.loc.bucket)
        try:
            c.s3.create_bucket(Bucket=bucket.loc.bucket)
        except c.s3.exceptions.BucketAlreadyOwnedByYou:
            pass
    yield switch
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw_mod.ACCESS)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw_mod.SECRET)
    clients.forget_clients()
    probe.forget()


def test_another_store_behind_the_same_bucket_name_is_noticed(bucket, other_store, tmp_path):
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    old = _remembering_host(bucket.url, a)
    other_store()                                          # same bucket and prefix names, other objects
    for marker in (4, 5, 6):                               # its log reaches the same number
        _, vb = commit(bucket.url, b, marker)
    with BucketCache(bucket.url, NAME, local_root=a).snapshot() as snap:
        assert snap.version == vb != old and snap.seq == 3
    tx = _begin_carrying(bucket.url, a, 8)
    va = tx.commit()
    assert _reads_whole(bucket.url, tmp_path / "host-c") == (va, 8.0)


def test_a_replica_that_is_behind_is_noticed(bucket, tmp_path):
    """The store answers from a replica that has what the prefix held after record 2 of the
    three host A saw (the prefix put back as it was then): host A serves record 2, and a run
    staged on record 3 publishes nothing."""
    a = tmp_path / "host-a"
    commit(bucket.url, a, 1)
    _, v2 = commit(bucket.url, a, 2)
    replica = bucket.copy()
    commit(bucket.url, a, 3)
    tx = _begin_carrying(bucket.url, a, 9)
    bucket.restore(replica)
    with BucketCache(bucket.url, NAME, local_root=a).snapshot() as snap:
        assert snap.version == v2 and snap.seq == 2
    with pytest.raises(TransactionError):
        tx.commit()
    tx.discard()
    assert read_back(bucket.url, tmp_path / "host-c") == (v2, 2.0)


def test_a_new_user_of_a_wiped_users_name_never_gets_the_old_users_results(bucket, tmp_path):
    bob = namespaces.user_root(bucket.url, "bob")
    host = tmp_path / "host"
    commit(bob, host, 1)
    assert read_back(bob, host)[1] == 1.0                  # the host holds old bob's version
    bucket.wipe(f"{bucket.loc.prefix}.users/bob/")         # the account is deleted, its prefix wiped
    assert BucketCache(bob, NAME, local_root=host).snapshot() is None   # the new bob has nothing yet
