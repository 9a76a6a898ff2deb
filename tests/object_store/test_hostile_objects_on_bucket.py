"""Objects someone else wrote into a cache's prefix, on the real RGW: each is refused with a
typed error that names the object and the fix, nothing from it is executed or written, and
``check`` reports it.

A valid version 1 is committed first; then one hostile object is planted with the test's own
client (``check --repair`` then publishes version 1 again over a hostile record: what a stranger
writes never makes repair discard an intact version): the next commit record (naming keys outside the prefix or in another user's namespace,
objects of other content, oversized, malformed), or a data object of version 1 replaced in
place, or a complete, valid record whose slot file is a pickle that would run a command when
unpickled.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import uuid

import pytest

from reuse_backend.bucket import records
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.bucket.store import BucketStore
from reuse_backend.errors import CorruptCacheError

from .bucket_help import NAME, commit, current, keys_under

pytestmark = pytest.mark.hostfree
TEXT = "slot_text.safetensors"


class _RunsACommand:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _next_record(rec: dict, **changes) -> dict:
    out = json.loads(json.dumps(rec))
    out["seq"] = 2
    out["manifest"]["version"] = uuid.uuid4().hex
    for k, v in changes.items():
        out[k] = v
    return out


def _plant_record(cache, body: bytes) -> str:
    key = cache.keys.log(2)
    cache.client.s3.put_object(Bucket=cache.loc.bucket, Key=key, Body=body)
    return key


def _with_object(rec: dict, rel: str) -> bytes:
    return records.dumps(_next_record(rec, objects={**rec["objects"], TEXT: rel}))


RECORDS = {
    "outside the prefix": (lambda rec, sha: _with_object(rec, f"../elsewhere/data/evil/{sha}"),
                           "outside this cache's data"),
    "another user's namespace": (lambda rec, sha: _with_object(rec, f"../.users/bob/{NAME}/data/evil/{sha}"),
                                 "outside this cache's data"),
    "an object of other content": (lambda rec, sha: _with_object(rec, f"data/evil/{'0' * 64}"),
                                   "names an object of other content"),
    "oversized": (lambda rec, sha: b" " * (records.MAX_RECORD_BYTES + 1), "too large"),
    "malformed": (lambda rec, sha: b'{"schema": "seedreuse-bucket/1", "seq": 2, ', "not valid JSON"),
}


@pytest.fixture
def planted(bucket_url, tmp_path):
    """(cache of a fresh host, the record of version 1, its keys) after committing version 1."""
    commit(bucket_url, tmp_path / "h0", 1)
    cache = BucketCache(bucket_url, NAME, local_root=tmp_path / "fresh")
    return cache, current(bucket_url, tmp_path / "h0")[1]


def _refused_and_reported(bucket_url, tmp_path, cache, key: str, code: str, load: bool) -> CorruptCacheError:
    before = keys_under(cache)
    with pytest.raises(CorruptCacheError) as e:
        snap = cache.snapshot()
        with snap:
            if load:
                snap.load_slot("text")
    err = e.value
    assert key in err.message and err.fix, err
    assert keys_under(cache) == before                   # nothing written (a reader lease came and went)
    found = BucketStore(bucket_url, tmp_path / "checker").check(NAME)
    assert any(p.code == code and p.path.endswith(key) for p in found), [str(p) for p in found]
    return err


@pytest.mark.parametrize("kind", list(RECORDS))
def test_a_hostile_commit_record_is_refused_and_reported(kind, planted, bucket_url, tmp_path):
    cache, rec = planted
    make, why = RECORDS[kind]
    key = _plant_record(cache, make(rec, rec["manifest"]["files"][TEXT]["sha256"]))
    err = _refused_and_reported(bucket_url, tmp_path, cache, key, "invalid_record", load=False)
    assert why in err.message and "--repair" in err.fix, err
    store = BucketStore(bucket_url, tmp_path / "checker")
    store.check(NAME, repair=True)                       # the intact version 1 again over it; nothing of it used
    assert store.check(NAME) == []
    with cache.snapshot() as snap:
        assert snap.version == rec["manifest"]["version"] and snap.seq == 3


@pytest.mark.parametrize("how", ["same size, other bytes", "shorter"])
def test_a_data_object_replaced_in_place_is_refused_and_reported(how, planted, bucket_url, tmp_path):
    cache, rec = planted
    entry = rec["manifest"]["files"][TEXT]
    key = cache.keys.data(rec["objects"][TEXT])
    body = b"\0" * entry["bytes"] if how.startswith("same") else b"\0" * (entry["bytes"] // 2)
    cache.client.s3.put_object(Bucket=cache.loc.bucket, Key=key, Body=body)
    err = _refused_and_reported(bucket_url, tmp_path, cache, key, "bad_object", load=True)
    assert "clear" in err.fix and not cache.tier.has(hashlib.sha256(body).hexdigest(), len(body))
    assert not cache.tier.has(entry["sha256"], entry["bytes"])


def test_a_valid_record_naming_a_pickle_runs_nothing(planted, bucket_url, tmp_path):
    cache, rec = planted
    marker = tmp_path / "pickle-ran"
    body = pickle.dumps(_RunsACommand(str(marker)))
    sha = hashlib.sha256(body).hexdigest()
    rel = f"data/evil/{sha}"
    cache.client.s3.put_object(Bucket=cache.loc.bucket, Key=cache.keys.data(rel), Body=body)
    hostile = _next_record(rec, objects={**rec["objects"], TEXT: rel})
    hostile["manifest"]["files"][TEXT] = {"bytes": len(body), "sha256": sha}
    records.parse(records.dumps(hostile), cache.keys, cache.keys.log(2), 2)        # a valid record
    _plant_record(cache, records.dumps(hostile))
    err = _refused_and_reported(bucket_url, tmp_path, cache, cache.keys.data(rel), "unreadable_tensor", load=True)
    assert "clear" in err.fix, err
    assert not marker.exists()                            # nothing was unpickled
