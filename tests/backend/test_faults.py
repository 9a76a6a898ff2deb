"""FAULTS: OSError (ENOSPC, EIO, ESTALE) injected at the k-th fs operation of a full run.

One-shot (only op k fails) and persistent (op k and every later one fail, including the
cleanup in discard), for every k until the run completes without reaching the fault.
Afterwards, with the fault cleared: the run either raised or succeeded, the cache is
exactly the previous version (run raised) or exactly the new one (run succeeded), never
torn, and the next begin works (it also breaks the lock the failed run could not remove).
"""
import errno
import os
import shutil

import pytest
from tests.backend.storehelp import (
    OpHook,
    cache_marker,
    cache_state,
    copy_root,
    entries,
    normalized,
    write_version,
)

from reuse_backend.folder.check import check
from reuse_backend.errors import ReuseError
from reuse_backend.folder.cache import FolderCache

ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO, "ESTALE": errno.ESTALE}


@pytest.mark.exhaustive
@pytest.mark.parametrize("persistent", [False, True], ids=["one-shot", "persistent"])
@pytest.mark.parametrize("err", sorted(ERRNOS))
def test_fault_at_every_fs_operation(tmp_path, err, persistent):
    template = tmp_path / "template"
    template.mkdir()
    write_version(FolderCache(template, "a"), 1)
    prev_manifest = cache_state(FolderCache(template, "a"))[1]
    clean = tmp_path / "clean"
    clean.mkdir()
    copy_root(template, clean, dirs_exist_ok=True)
    write_version(FolderCache(clean, "a"), 2)
    new_manifest = normalized(cache_state(FolderCache(clean, "a"))[1])
    code = ERRNOS[err]

    def fail(op, path):
        raise OSError(code, f"injected {err} before {op}", path)

    k, raised, succeeded = 0, 0, 0
    while True:
        k += 1
        root = tmp_path / f"k{k}"
        copy_root(template, root)
        cache = FolderCache(root, "a")
        ok = False
        with OpHook(k, fail, persistent) as hook:
            try:
                write_version(cache, 2)
                ok = True
            except (OSError, ReuseError) as e:
                assert hook.fired, f"{err} point {k}: unexpected failure {e!r}"
        marker, m = cache_state(cache)
        assert marker == (2 if ok else 1), f"{err} point {k} ok={ok}: cache holds {marker}"
        assert (normalized(m) == new_manifest) if ok else (m == prev_manifest), f"{err} point {k}"
        with cache.begin() as tx:                          # the next begin works
            assert tx.base.version == cache.snapshot().version
        assert cache_marker(cache) == marker
        assert entries(root) == ["a"], f"{err} point {k}: {entries(root)}"
        assert check(root, "a") == []
        shutil.rmtree(root)
        if not hook.fired:
            break
        raised += not ok
        succeeded += ok
    assert raised > 30
    print(f"\nfault {err} {'persistent' if persistent else 'one-shot'}: {k - 1} fault points "
          f"(run raised at {raised}, committed anyway at {succeeded}), +1 clean run")


def test_commit_failure_between_renames_restores_previous(tmp_path):
    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)

    def fail_second_rename(op, path):
        if op == "rename" and os.path.basename(os.path.dirname(path)) == "a.tmp" \
                and "." not in os.path.basename(path):                        # staging -> current
            raise OSError(errno.EIO, "injected", path)

    with OpHook(1, fail_second_rename, persistent=True), pytest.raises(OSError):
        write_version(cache, 2)
    assert entries(tmp_path) == ["a"]
    assert cache_marker(cache) == 1


def test_enospc_is_a_typed_error_naming_the_root_and_the_fix(tmp_path):
    """A full disk surfaces as StorageFullError (root, free space, fix), not a bare OSError,
    wherever the run writes: a slot, a boundary, a staged file, the manifest."""
    from reuse_backend.errors import StorageFullError
    from tests.backend.storehelp import slot_value

    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)

    def full(op, path):
        if op in ("open_exclusive", "write", "fsync_file"):
            raise OSError(errno.ENOSPC, "No space left on device", path)

    tx = cache.begin()
    try:
        with OpHook(1, full, persistent=True):
            with pytest.raises(StorageFullError) as ei:
                tx.stage_slot("text", slot_value(2, "text"), key={}, meta={})
            with pytest.raises(StorageFullError):
                tx.stage_boundary(0, slot_value(2, "b")["cond"])
    finally:
        tx.discard()
    e = ei.value
    assert str(tmp_path) in e.message and "last good version" in e.message
    assert "bytes free" in str(e.actual) and "SEEDREUSE_CACHE_ROOT" in e.fix
    assert e.to_dict()["code"] == "storage_full" and e.details["root"] == str(tmp_path)
    assert cache_marker(cache) == 1


@pytest.mark.parametrize("what", ["claim", "run lease", "writer lock"])
def test_a_full_disk_while_a_lease_is_taken_is_storage_full_and_leaves_nothing(tmp_path, what):
    """ENOSPC while the lease file of a claim, a run's run lease or the writer lock (a commit, a
    recovery) is created is the documented StorageFullError (the root, the fix), not a raw OSError,
    and nothing is left behind: no temp file, no empty ``<name>.tmp`` for check() to report, the
    last good version as it was. A disk freed afterwards: everything works again."""
    from reuse_backend.errors import StorageFullError

    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)

    def full(op, path):
        if op in ("open_exclusive", "write", "fsync_file", "mkdir"):
            raise OSError(errno.ENOSPC, "No space left on device", path)

    with OpHook(1, full, persistent=True), pytest.raises(StorageFullError) as ei:
        if what == "claim":
            cache.claim("text", "d1", "run-claims", wait=0)
        elif what == "run lease":
            cache.begin()
        else:
            cache.recover("recovering-run")
    assert str(tmp_path) in ei.value.message and ei.value.fix
    assert f"take the {what}" in ei.value.message or "single-flight claim" in ei.value.message, ei.value.message
    assert entries(tmp_path) == ["a"] and check(tmp_path, "a") == []
    assert cache_marker(cache) == 1
    got = cache.claim("text", "d1", "run-claims", wait=0)          # room again: it works
    assert got.held
    got.release()
    assert entries(tmp_path) == ["a"]


def test_a_run_lease_whose_folder_vanished_and_came_back_is_taken(tmp_path):
    """Racing runs: one run's release removes the empty ``<name>.tmp`` just as another run creates
    its run lease in it, and a third makes the folder again before the second one looks. The
    second run's create failed with ENOENT while the folder is there again: it makes the folder
    (if needed) and creates again, never a raw FileNotFoundError (seen under load in
    test_racing_writers_all_commit_one_at_a_time)."""
    from reuse_backend.storage import fsops

    cache = FolderCache(tmp_path, "a")
    write_version(cache, 1)
    failed = []

    def vanished_once(op, path):
        if op == "open_exclusive" and ".lease.new-" in str(path) and not failed:
            failed.append(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)     # made again by a third run
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))

    fsops.set_hook(vanished_once)
    try:
        tx = cache.begin()
    finally:
        fsops.clear_hook()
    assert failed, "the hook never saw the run lease's create"
    tx.discard()
    assert cache_marker(cache) == 1 and check(tmp_path, "a") == []
