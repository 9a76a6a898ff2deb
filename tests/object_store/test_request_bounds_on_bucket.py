"""What a commit and the cache browser's list cost does not grow with the caches a namespace ever
had (issue 41, defect 7), on the in-memory double (fast lane) and on the real RGW (the proof):
requests counted by operation (the double's record, botocore's event hook), never timed.

An automatic namespace (it always has a budget) with 3 dead caches (cleared: each keeps its last
record for ever), then with 33: a commit of its live cache and the browser's list (every name,
each one described, the budget line) send the same requests. The scale itself, at 1, 100 and
10,000 caches and records, is the benchmark's (``scripts/bench.sh --only bucket-scale``).
"""
from __future__ import annotations

import pytest

from reuse_backend.bucket import location, records, usage_index
from reuse_backend.bucket.store import BucketStore
from reuse_backend.store import namespaces

from .bucket_help import commit

pytestmark = pytest.mark.hostfree


def _plant_dead(bucket, auto: str, names) -> None:
    """Caches that were cleared: one cleared record each (what clear and eviction leave)."""
    loc = location.parse(auto)
    for n in names:
        keys = loc.cache(n)
        bucket.plant(keys.log(1), records.dumps(records.make(1, "cleared", None, {}, "clear-gone")))


def _browse(auto, root) -> int:
    store = BucketStore(auto, root)
    rows = []
    for n in store.names():
        row, snap = store.describe(n)
        if snap is not None:
            snap.close()
        rows.append(row)
    store.summary()
    return len(rows)


def test_a_commit_and_the_list_cost_the_same_however_many_dead_caches(bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("SEEDREUSE_CACHE_ROOT", str(tmp_path / "default-root"))     # as a worker has one
    auto = namespaces.auto_root(bucket.url, create=False)
    _plant_dead(bucket, auto, [f"gone-{i:03d}" for i in range(3)])
    host = tmp_path / "host"
    for marker in (1, 2):                         # the live cache, committed (the index holds it)
        commit(auto, host, marker, name="live")
    costs = []
    for more in (0, 30):
        _plant_dead(bucket, auto, [f"later-{i:03d}" for i in range(more)])
        with bucket.counting() as on_commit:
            commit(auto, host, 3 + more, name="live")
        with bucket.counting() as on_list:
            assert _browse(auto, tmp_path / "browser") == 1
        costs.append((sorted(on_commit), sorted(on_list)))
    (commit_3, list_3), (commit_33, list_33) = costs
    print(f"[bounds] a commit: {len(commit_3)} requests with 3 dead caches, {len(commit_33)} with 33; "
          f"the list: {len(list_3)} and {len(list_33)}")
    assert commit_33 == commit_3 and list_33 == list_3


def test_a_usage_index_someone_else_wrote_is_rebuilt_or_checked_never_trusted(bucket, tmp_path, monkeypatch):
    """A shard that is not one (nested JSON) is rebuilt from the namespace; a valid one naming a
    huge cache that does not exist makes no commit evict a real cache (each candidate is looked
    at first) and its row is dropped."""
    monkeypatch.setenv("SEEDREUSE_MAX_BYTES", str(8 << 20))
    host = tmp_path / "host"
    for name in ("a", "b"):
        commit(bucket.url, host, 1, name=name)
    loc = location.parse(bucket.url)
    for shard in range(usage_index.SHARDS):
        bucket.plant(usage_index.key(loc, shard), b"[" * 50000)
    assert BucketStore(bucket.url, tmp_path / "browser").names() == ["a", "b"]
    ghost = usage_index.shard_of("ghost")
    bucket.plant(usage_index.key(loc, ghost), usage_index.dumps({"ghost": [7, 1 << 40, 0.0, True]}))
    commit(bucket.url, host, 2, name="a")                 # over budget by the ghost alone
    assert BucketStore(bucket.url, tmp_path / "browser").committed() == ["a", "b"]
    rows, _ = usage_index.read(bucket.client, loc, ghost)
    assert "ghost" not in rows
