"""CRASH: SIGKILL the writer before EVERY filesystem operation of a full run.

For k = 1..K (K counted by a dry run in a real subprocess) a writer process runs
begin -> stage 2 slots + 3 boundaries + a result file -> commit and SIGKILLs itself
(from the fsops hook) just before its k-th fs operation.  A fresh process then recovers
(alternately ``recover()`` and ``begin()+discard()``, both breaking the dead owner's lock)
and the cache must be exactly the previous version or exactly the new one: same manifest
version, same tensors, valid hashes, no leftovers, ``check()`` clean.  Every crash point
is run; none is sampled.

Writers are forked from the test process (torch already imported) so each point costs
milliseconds; the dry run uses a fresh interpreter and must count the same K.
"""
import multiprocessing
import os
import shutil
import signal
import subprocess

import pytest
from tests.backend.storehelp import (REPO_ROOT, OpHook, cache_state, copy_root, entries, normalized, write_version,
                                     writer_proc)

from reuse_backend.folder.check import check
from reuse_backend.folder.cache import FolderCache

HERE = os.path.dirname(os.path.abspath(__file__))
CTX = multiprocessing.get_context("fork")


def _kill_self(op, path):
    os.kill(os.getpid(), signal.SIGKILL)


def _writer(root, marker, k):
    with OpHook(k, _kill_self):
        write_version(FolderCache(root, "a"), marker)


def _count(root, marker, q):
    with OpHook() as hook:
        write_version(FolderCache(root, "a"), marker)
    q.put(hook.count)


def _recover(root, how):
    cache = FolderCache(root, "a")
    if how == "recover":
        cache.recover()
    else:
        cache.begin().discard()


def _run(target, *args) -> int:
    p = CTX.Process(target=target, args=args)
    p.start()
    p.join(60)
    if p.exitcode is None:
        p.kill()
        p.join()
    return p.exitcode


def _dry_run_count(tmp_path, template, marker) -> int:
    root = tmp_path / "dry"
    if template is not None:
        copy_root(template, root)
    else:
        root.mkdir()
    out = subprocess.run(writer_proc("count", root, "a", marker), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    k = int(out.stdout.split()[-1])
    # the forked writers must see the same operation sequence as a fresh interpreter
    root2 = tmp_path / "dry2"
    copy_root(template, root2) if template is not None else root2.mkdir()
    q = CTX.Queue()
    assert _run(_count, root2, marker, q) == 0
    assert q.get(timeout=5) == k
    return k


@pytest.mark.exhaustive
@pytest.mark.parametrize("with_base", [True, False], ids=["over-previous", "first-commit"])
def test_sigkill_at_every_fs_operation(tmp_path, with_base):
    template = None
    prev = None
    if with_base:
        template = tmp_path / "template"
        template.mkdir()
        write_version(FolderCache(template, "a"), 1)
        prev = 1
    new = 2
    K = _dry_run_count(tmp_path, template, new)
    assert K >= 40
    prev_manifest = cache_state(FolderCache(template, "a"))[1] if template is not None else None
    new_manifest = normalized(cache_state(FolderCache(tmp_path / "dry", "a"))[1])
    outcomes, passed = [], 0
    for k in range(1, K + 2):                    # K + 1: the run completes without a kill
        root = tmp_path / f"k{k}"
        copy_root(template, root) if template is not None else root.mkdir()
        code = _run(_writer, root, new, k)
        if k <= K:
            assert code == -signal.SIGKILL, f"crash point {k}: writer exit {code}"
        else:
            assert code == 0
        assert _run(_recover, root, "recover" if k % 2 else "begin+discard") == 0, f"point {k}"
        marker, m = cache_state(FolderCache(root, "a"))
        assert marker in (prev, new), f"crash point {k}: cache holds {marker}"
        if marker == prev:                       # exactly the previous version, byte for byte
            assert m == prev_manifest, f"crash point {k}"
        else:                                    # exactly the new version (same files/hashes)
            assert normalized(m) == new_manifest and m["version"] != (prev_manifest or {}).get("version")
        assert entries(root) == ([] if marker is None else ["a"]), f"point {k}: {entries(root)}"
        assert check(root, "a") == [], f"crash point {k}"
        outcomes.append("new" if marker == new else "prev")
        passed += 1
        shutil.rmtree(root)
    # once the new version is published (rename .tmp -> current) every later crash keeps it
    first_new = outcomes.index("new")
    assert outcomes == ["prev"] * first_new + ["new"] * (len(outcomes) - first_new)
    assert passed == K + 1
    print(f"\ncrash points ({'over previous' if with_base else 'first commit'}): {K} of {K} "
          f"passed (+1 uninterrupted); previous kept at {first_new}, new version at "
          f"{K + 1 - first_new}")
