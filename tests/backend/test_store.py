"""reuse_backend.store: stage / commit / discard lifecycle, latest-success, carry, snapshots."""
import errno
import json
import multiprocessing
import os

import pytest
import torch
from tests.backend.storehelp import (
    BOUNDARIES,
    SLOTS,
    boundary_value,
    cache_marker,
    entries,
    slot_value,
    snapshot_marker,
    write_version,
)

from reuse_backend import settings
from reuse_backend.store import manifest as mf
from reuse_backend.store import roots
from reuse_backend.folder.layout import cache_paths
from reuse_backend.cli import main as cli
from reuse_backend.errors import (
    CacheBusyError,
    InvalidCacheNameError,
    InvalidRequestError,
    NoCommittedCacheError,
    TransactionError,
)
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
from reuse_backend.folder.layout import list_caches


def test_empty_cache_has_no_snapshot(tmp_path):
    assert FolderCache(tmp_path, "a").snapshot() is None


def test_commit_then_read(tmp_path):
    cache = FolderCache(tmp_path, "a")
    version = write_version(cache, 1)
    assert entries(tmp_path) == ["a"]                      # no .tmp, .old, .lock left
    with cache.snapshot() as snap:
        assert snap.version == version and snap.source == "current"
        assert snapshot_marker(snap) == 1
        assert snap.slot_entry("text") == {"file": "slot_text.safetensors", "key": {"slot": "text"},
                                           "meta": {"m": 1}}
        assert snap.slot_entry("nope") is None
        assert snap.manifest["run"]["run_id"] == "run-1"
        with pytest.raises(NoCommittedCacheError, match="no slot 'nope'"):
            snap.load_slot("nope")
        with pytest.raises(NoCommittedCacheError, match="no boundary 7"):
            snap.load_boundary(7)
    names = set(os.listdir(tmp_path / "a"))
    assert names == {"manifest.json", "STAGING.json", "result.mp4", "slot_text.safetensors",
                     "slot_image.safetensors"} | {mf.boundary_file(i) for i in BOUNDARIES}


def test_snapshot_close_closes_every_descriptor_when_the_filesystem_reports_errors(tmp_path, monkeypatch):
    """A network filesystem may answer close() of a read-only file with an error (GlusterFS:
    ESTALE after another host replaced it): the snapshot still closes all of its descriptors,
    and the finished read does not fail."""
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    snap = cache.snapshot()
    assert snapshot_marker(snap) == 1
    fds = list(snap._fds.values()) + [snap._dfd]
    real_close, seen = os.close, []

    def stale_close(fd):
        real_close(fd)                          # Linux releases the descriptor, then reports
        seen.append(fd)
        raise OSError(errno.ESTALE, "Stale file handle")

    monkeypatch.setattr(os, "close", stale_close)
    snap.close()
    monkeypatch.setattr(os, "close", real_close)
    assert sorted(seen) == sorted(fds)
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_discard_keeps_previous_and_cleans_up(tmp_path):
    cache = FolderCache(tmp_path, "a")
    v1 = write_version(cache, 1)
    tx = cache.begin(RunInfo(run_id="b"))
    assert tx.base.version == v1
    tx.stage_slot("text", slot_value(2, "text"), key={}, meta={})
    assert tx.staging.parent == tmp_path / "a.tmp"          # <name>.tmp/<staging id>/
    assert (tx.staging / "slot_text.safetensors").exists()
    assert json.loads((tx.staging / "STAGING.json").read_text())["run_id"] == "b"
    tx.discard()
    assert entries(tmp_path) == ["a"]
    assert cache_marker(cache) == 1
    assert tx.discard() is True                            # idempotent
    with pytest.raises(TransactionError, match="discarded"):
        tx.stage_slot("text", slot_value(2, "text"), key={}, meta={})
    with pytest.raises(TransactionError):
        tx.commit()


def test_latest_success(tmp_path):
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)                                # A succeeds
    with pytest.raises(RuntimeError), cache.begin(RunInfo(run_id="B")) as tx:   # B fails mid-run
        tx.stage_slot("text", slot_value(2, "text"), key={}, meta={})
        raise RuntimeError("DiT failed")
    assert cache_marker(cache) == 1                        # A is still the baseline
    write_version(cache, 3)                                # C succeeds -> new baseline
    assert cache_marker(cache) == 3
    assert entries(tmp_path) == ["a"]


def test_transaction_single_use(tmp_path):
    cache = FolderCache(tmp_path, "a")
    tx = cache.begin()
    tx.set_section("s", {"x": 1})
    tx.commit()
    with pytest.raises(TransactionError, match="committed"):
        tx.commit()
    with pytest.raises(TransactionError):
        tx.set_section("s", {})
    assert tx.discard() is True                            # no-op after commit
    assert cache.snapshot().manifest["sections"] == {"s": {"x": 1}}


def test_overlapping_writers_both_commit(tmp_path):
    """Issue 27: runs stage side by side (each under its own lease) and take the writer lock only
    to commit; both succeed, the later commit is current and says its base changed."""
    cache = FolderCache(tmp_path, "a")
    first = cache.begin(RunInfo(run_id="first"))
    second = cache.begin(RunInfo(run_id="second"))               # never busy
    assert sorted(os.listdir(tmp_path / "a.tmp")) == sorted(
        [first.staging_id, first.staging_id + ".lease", second.staging_id, second.staging_id + ".lease"])
    first.stage_slot("text", slot_value(1, "text"), key={"k": 1})
    second.stage_slot("text", slot_value(2, "text"), key={"k": 2})
    second.stage_slot("neg", slot_value(2, "neg"), key={"k": 2})
    v1 = first.commit()
    assert first.rebased is None
    v2 = second.commit()
    assert "base changed" in second.rebased and v1 in second.rebased and "['text']" in second.rebased
    with cache.snapshot() as snap:
        assert snap.version == v2 and snap.manifest["run"]["run_id"] == "second"
        assert sorted(snap.manifest["slots"]) == ["neg", "text"]
    assert entries(tmp_path) == ["a"]


def test_commit_waits_for_the_writer_lock(tmp_path):
    """A commit waits (bounded by SEEDREUSE_COMMIT_WAIT_S) while another run holds the lock."""
    cache = FolderCache(tmp_path, "a")
    tx = cache.begin(RunInfo(run_id="waiter"))
    tx.stage_slot("text", slot_value(1, "text"), key={"k": 1})
    holder = cache.writer_lock("holder").acquire()
    os.environ["SEEDREUSE_COMMIT_WAIT_S"] = "0.3"
    try:
        with pytest.raises(CacheBusyError, match="waited 0.3 s to commit") as ei:
            tx.commit()
    finally:
        del os.environ["SEEDREUSE_COMMIT_WAIT_S"]
    assert ei.value.details["owner"]["run_id"] == "holder" and "SEEDREUSE_COMMIT_WAIT_S" in ei.value.fix
    assert tx.state == "failed" and cache.snapshot() is None      # nothing published
    tx.discard()
    holder.release()
    assert entries(tmp_path) == []


def test_carry_hard_links(tmp_path):
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    before = {f: os.stat(tmp_path / "a" / f).st_ino for f in os.listdir(tmp_path / "a")}
    tx = cache.begin(RunInfo(run_id="carry", extra={"marker": 1}))
    for slot in SLOTS:
        tx.carry_slot(slot)
    for i in BOUNDARIES:
        tx.carry_boundary(i)
    tx.carry_file("result.mp4")
    tx.set_section("segments", {"marker": 1})
    staged = tx.staging / "slot_text.safetensors"
    assert os.stat(staged).st_ino == before["slot_text.safetensors"]
    assert os.stat(staged).st_nlink == 2
    v2 = tx.commit()
    with cache.snapshot() as snap:
        assert snap.version == v2 and snapshot_marker(snap) == 1
        assert snap.slot_entry("text")["meta"] == {"m": 1}
    for f in ("slot_text.safetensors", mf.boundary_file(2), "result.mp4"):
        assert os.stat(tmp_path / "a" / f).st_ino == before[f]


@pytest.mark.parametrize("gone", ["ENOENT", "ESTALE"])
def test_carry_from_a_base_replaced_meanwhile_copies_from_the_pinned_file(tmp_path, gone):
    """A run carries a slot of its base after another run's commit replaced (and removed) that
    base: the link fails (ENOENT here; ESTALE where another client of a network filesystem
    removed it, as GlusterFS answered in the two-host soak's burst) and the file is copied from
    the run's pinned descriptor, so its version is complete."""
    from reuse_backend.storage import fsops
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    tx = cache.begin(RunInfo(run_id="late"))                 # base: version 1, pinned
    write_version(cache, 2)                                   # version 1 removed
    if gone == "ESTALE":
        def hook(op, path):
            if op == "link_or_copy":
                raise OSError(errno.ESTALE, os.strerror(errno.ESTALE), path)
        fsops.set_hook(hook)
    try:
        tx.carry_slot("text")
    finally:
        fsops.clear_hook()
    staged = tx.staging / "slot_text.safetensors"
    assert os.stat(staged).st_nlink == 1                      # a copy, not a link
    tx.commit()
    with cache.snapshot() as snap:
        assert torch.equal(snap.load_slot("text")["cond"], slot_value(1, "text")["cond"])


def test_restage_after_carry_does_not_touch_base(tmp_path):
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    tx = cache.begin()
    tx.carry_boundary(0)
    tx.stage_boundary(0, boundary_value(9, 0))            # replaces the link, not the inode
    path = tx.stage_path("result.mp4")
    with open(path, "wb") as f:
        f.write(b"new")
    assert cache_marker(cache) == 1                       # base untouched while staging
    tx.discard()


def test_carry_errors(tmp_path):
    cache = FolderCache(tmp_path, "a")
    tx = cache.begin()
    with pytest.raises(NoCommittedCacheError, match="no committed version"):
        tx.carry_slot("text")
    tx.discard()
    write_version(cache, 1)
    with cache.begin() as tx:
        with pytest.raises(NoCommittedCacheError, match="no boundary 5"):
            tx.carry_boundary(5)
        with pytest.raises(NoCommittedCacheError, match="no slot 'x'"):
            tx.carry_slot("x")


def test_stage_path_rules(tmp_path):
    cache = FolderCache(tmp_path, "a")
    with cache.begin() as tx:
        for bad in ("../x", "manifest.json", "STAGING.json", ".hidden", "a/b"):
            with pytest.raises((InvalidCacheNameError, TransactionError)):
                tx.stage_path(bad)
        with pytest.raises(TransactionError, match="without stage_path"):
            tx.add_file("result.mp4")
        tx.stage_path("result.mp4")
        with pytest.raises(TransactionError, match="cannot be opened"):
            tx.add_file("result.mp4")                      # never written
        with pytest.raises(TransactionError, match="never added"):
            tx.commit()
    with cache.begin() as tx:
        with pytest.raises(TransactionError, match="plain JSON"):
            tx.set_section("s", {"x": object()})
        with pytest.raises(TransactionError, match="boundary index"):
            tx.stage_boundary(-1, torch.zeros(1))
        os.symlink("/etc/hostname", tx.stage_path("link.txt"))
        with pytest.raises(TransactionError):
            tx.add_file("link.txt")
    assert cache.snapshot() is None


def _commit_in_child(root, marker):
    write_version(FolderCache(root, "a"), marker)


def test_snapshot_stable_across_concurrent_commit(tmp_path):
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    snap = cache.snapshot()
    ctx = multiprocessing.get_context("fork")
    for marker in (2, 3):                                   # two commits remove version 1's dir
        p = ctx.Process(target=_commit_in_child, args=(tmp_path, marker))
        p.start()
        p.join(30)
        assert p.exitcode == 0
    assert cache_marker(cache) == 3
    assert not (tmp_path / "a.old").exists()
    assert snapshot_marker(snap) == 1                       # the pinned snapshot still reads v1
    snap.close()


def test_reader_falls_back_to_old_during_commit_window(tmp_path):
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    os.rename(tmp_path / "a", tmp_path / "a.old")          # as after current -> .old
    with cache.snapshot() as snap:
        assert snap.source == "old" and snapshot_marker(snap) == 1
    assert cache.recover() == ["restored previous version from a.old"]
    assert cache_marker(cache) == 1


def test_recover_and_clear(tmp_path):
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    (tmp_path / "a.old").mkdir()
    (tmp_path / "a.tmp").mkdir()
    done = cache.recover()
    assert done == ["removed leftover a.old", "removed unfinished staging a.tmp"]
    assert cache_marker(cache) == 1
    assert cache.clear() == ["removed committed version of 'a'"]
    assert entries(tmp_path) == [] and cache.snapshot() is None


def test_names_and_roots(tmp_path, monkeypatch):
    for bad in ("", ".", "..", "../x", "/etc/passwd", "a/b", "a\\b", ".a", "a%2fb", "a\0b",
                "a" * 65, "a.b", " a", "a\n"):
        with pytest.raises(InvalidCacheNameError) as ei:
            FolderCache(tmp_path, bad)
        assert ei.value.expected and ei.value.fix
    assert roots.validate_cache_name("A-b_9") == "A-b_9"
    assert roots.validate_file_name("result.mp4") == "result.mp4"
    with pytest.raises(InvalidCacheNameError):
        roots.validate_file_name("a..b")
    p = cache_paths(tmp_path, "x")
    assert [q.name for q in (p.current, p.tmp, p.old, p.lock)] == ["x", "x.tmp", "x.old", "x.lock"]
    monkeypatch.setenv("SEEDREUSE_CACHE_ROOT", str(tmp_path / "env"))
    assert roots.resolve_root(str(tmp_path / "explicit")) == tmp_path / "explicit"
    assert roots.resolve_root(None, str(tmp_path / "d")) == tmp_path / "env"
    assert (tmp_path / "env").is_dir()
    monkeypatch.delenv("SEEDREUSE_CACHE_ROOT")
    assert roots.resolve_root(None, str(tmp_path / "d")) == tmp_path / "d"
    with pytest.raises(InvalidRequestError):
        roots.resolve_root(None, None)


@pytest.mark.parametrize("value", ["gs://bucket/x", "S3://bucket/x", "bucket/x", "/data/cache"])
def test_cache_url_other_than_s3_is_refused(tmp_path, monkeypatch, value):
    """SEEDREUSE_CACHE_URL names an object store; any other value is refused, never taken for a
    folder (a relative "gs:/bucket/x" in the working directory)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEEDREUSE_CACHE_URL", value)
    with pytest.raises(InvalidRequestError) as ei:
        settings.cache_url()
    assert "s3://" in ei.value.fix and "SEEDREUSE_CACHE_ROOT" in ei.value.fix
    assert cli(["list"]) == 2 and os.listdir(tmp_path) == []
    monkeypatch.setenv("SEEDREUSE_CACHE_URL", " s3://bucket/prefix ")
    assert settings.cache_url() == "s3://bucket/prefix"
    monkeypatch.setenv("SEEDREUSE_CACHE_URL", "")
    assert settings.cache_url() is None


def test_cli(tmp_path, capsys):
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    assert cli(["--root", str(tmp_path), "list"]) == 0
    assert "a " in capsys.readouterr().out
    assert list_caches(tmp_path) == ["a"]
    assert cli(["--root", str(tmp_path), "inspect", "a"]) == 0
    out = capsys.readouterr().out
    assert "slot_text.safetensors" in out and "run run-1" in out
    assert cli(["--root", str(tmp_path), "check", "a"]) == 0
    (tmp_path / "a.tmp").mkdir()
    assert cli(["--root", str(tmp_path), "check", "a"]) == 1
    assert "stale_tmp" in capsys.readouterr().out
    assert cli(["--root", str(tmp_path), "check", "a", "--repair"]) == 0
    assert "repaired" in capsys.readouterr().out
    assert cli(["--root", str(tmp_path), "clear", "a"]) == 2
    assert cli(["--root", str(tmp_path), "clear", "a", "--yes"]) == 0
    assert cli(["--root", str(tmp_path), "inspect", "../a"]) == 2
    assert cache.snapshot() is None


def test_cli_clear_respects_a_live_reader(tmp_path, capsys):
    """Issue 27: ``clear NAME --yes`` removed a cache under a live reader (the delete route and gc
    refuse); it refuses like them, with the reason, and clears once the reader is done."""
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    snap = cache.snapshot()                      # an open snapshot: a live reader lease
    try:
        assert cli(["--root", str(tmp_path), "clear", "a", "--yes"]) == 2
        err = capsys.readouterr().err
        assert "cache 'a' was not cleared: it is read by 1 reader(s)" in err, err
        assert snapshot_marker(snap) == 1
    finally:
        snap.close()
    assert cache_marker(cache) == 1
    assert cli(["--root", str(tmp_path), "clear", "a", "--yes"]) == 0
    assert "cache 'a' cleared" in capsys.readouterr().out
    assert cache.snapshot() is None


def test_group_writable_setting_applies_to_what_a_run_creates(tmp_path, monkeypatch):
    """SEEDREUSE_GROUP_WRITABLE=1: directories and files a run creates are group-writable (under
    a umask that allows it), so another user of the group can recover or replace them."""
    import stat as stat_mod
    monkeypatch.setenv("SEEDREUSE_GROUP_WRITABLE", "1")
    old = os.umask(0o002)
    try:
        cache = FolderCache(tmp_path, "g")
        write_version(cache, 1)
    finally:
        os.umask(old)
    d = tmp_path / "g"
    assert os.stat(d).st_mode & stat_mod.S_IWGRP
    for f in os.listdir(d):
        assert os.stat(d / f).st_mode & stat_mod.S_IWGRP, f
    monkeypatch.delenv("SEEDREUSE_GROUP_WRITABLE")
    old = os.umask(0o002)
    try:
        write_version(FolderCache(tmp_path, "p"), 1)
    finally:
        os.umask(old)
    assert not os.stat(tmp_path / "p").st_mode & stat_mod.S_IWGRP      # default: 0o755 / 0o644
