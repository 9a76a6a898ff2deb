"""The filesystem probe and the first-use policy for shared filesystems.

The real shared filesystems run in tests/shared_fs (network namespaces, real servers and FUSE
clients); here: the probe on a local folder, and the policy's decisions from what the host
shows (mount table, the FUSE client's command line, its client graph).
"""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from reuse_backend import settings
from reuse_backend.errors import UnsupportedFilesystemError
from reuse_backend.storage import fsops
from reuse_backend.folder.cache import FolderCache
from reuse_backend.folder import filesystems as fsys
from reuse_backend.folder.probe import probe
from tests.backend.storehelp import REPO_ROOT, write_version


@pytest.fixture(autouse=True)
def _fresh_policy():
    fsys.reset_cache()
    yield
    fsys.reset_cache()


def test_probe_local_folder_is_safe_and_leaves_nothing(tmp_path):
    rep = probe(tmp_path)
    assert rep.verdict == "safe", rep.to_dict()
    names = [c.name for c in rep.checks]
    for want in ("O_EXCL create", "hard link", "stable inode numbers", "directory fd pins a renamed version",
                 "fsync of a file", "mtime resolution"):
        assert want in names
    assert list(tmp_path.iterdir()) == []


def test_probe_with_peer_runs_the_cross_mount_checks(tmp_path):
    rep = probe(tmp_path, peer=tmp_path)      # the same folder: every cross-host check must pass
    assert rep.verdict == "safe", rep.to_dict()
    assert {"directory rename seen by the peer at once", "peer fd survives a replace",
            "opens on the peer during replaces", "O_EXCL across mounts"} <= {c.name for c in rep.checks}


def test_probe_command_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "reuse_backend", "probe", str(tmp_path), "--json"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["verdict"] == "safe"
    p = subprocess.run([sys.executable, "-m", "reuse_backend", "probe", str(tmp_path / "missing")],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "not a directory" in p.stderr


def test_probe_reports_a_step_that_fails_instead_of_crashing(tmp_path, monkeypatch):
    """A primitive that errors outright (the peer check's utime here; on GlusterFS's defaults a
    close() once answered ESTALE) is a finding in the report, and the scratch folder goes."""
    real_utime = os.utime

    def utime(path, *a, **k):
        if ".seedreuse-probe-" in os.fspath(path) and os.fspath(path).endswith("/r"):   # the peer mtime step
            raise OSError(errno.EIO, "Input/output error", os.fspath(path))
        return real_utime(path, *a, **k)

    monkeypatch.setattr(os, "utime", utime)
    rep = probe(tmp_path, peer=tmp_path)
    assert rep.verdict == "unsafe"
    failed = [c for c in rep.checks if c.name == "peer checks"]
    assert len(failed) == 1 and "EIO" in failed[0].detail, rep.to_dict()
    assert "peer fd survives a replace" in {c.name for c in rep.checks}    # the steps before it ran
    assert list(tmp_path.iterdir()) == []


def test_close_read_only_returns_the_error_and_raises_ebadf(tmp_path, monkeypatch):
    fd = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT, 0o644)
    real_close = os.close

    def stale_close(n):
        real_close(n)                          # Linux releases the descriptor, then reports
        raise OSError(errno.ESTALE, "Stale file handle")

    monkeypatch.setattr(os, "close", stale_close)
    e = fsops.close_read_only(fd)
    assert e is not None and e.errno == errno.ESTALE
    monkeypatch.setattr(os, "close", real_close)
    with pytest.raises(OSError) as ei:         # closed twice: a bug, never swallowed
        fsops.close_read_only(fd)
    assert ei.value.errno == errno.EBADF


def test_probe_verdict_unsafe_when_a_check_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(fsys, "mount_of", lambda path: ("/mnt/juice", "fuse.juicefs", "redis://x"))
    rep = probe(tmp_path)
    assert rep.verdict == "unsafe"
    assert any(c.name == "filesystem policy" and "JuiceFS" in c.detail for c in rep.checks)


def test_mount_of_finds_the_longest_mount_point(tmp_path):
    mp, fstype, _ = fsys.mount_of(tmp_path)
    assert str(tmp_path).startswith(mp) and fstype != "unknown"
    assert fsys.mount_of("/")[0] == "/"


@pytest.mark.parametrize("fstype,word", [("fuse.sshfs", "sshfs"), ("fuse.juicefs", "JuiceFS")])
def test_refused_filesystems(tmp_path, monkeypatch, fstype, word):
    write_version(FolderCache(tmp_path, "c"), 1)
    monkeypatch.setattr(fsys, "mount_of", lambda path: ("/mnt/x", fstype, "server:/vol"))
    fsys.reset_cache()      # the write above remembered the real mount of tmp_path
    with pytest.raises(UnsupportedFilesystemError, match=word) as ei:
        FolderCache(tmp_path, "c").begin()
    assert ei.value.details["filesystem"] == fstype and ei.value.fix
    with pytest.raises(UnsupportedFilesystemError):
        FolderCache(tmp_path, "c").snapshot()             # readers too: they could be served a stale version
    monkeypatch.setenv(settings.TRUSTED_FILESYSTEM, fstype)   # an operator who probed it with --peer
    fsys.reset_cache()
    FolderCache(tmp_path, "c").begin().discard()


STRICT = ["/usr/sbin/glusterfs", "--entry-timeout=0", "--attribute-timeout=0", "--negative-timeout=0",
          "--fopen-keep-cache=false", "--volfile-server=10.0.0.1", "--volfile-id=gv0"]
GRAPH_STOCK = """[2026-12-01 09:00:00] I [MSGID: 101190] Final graph:
+------------------------------------------------------------------------------+
  1: volume gv0-client-0
  2:     type protocol/client
  9: volume gv0-md-cache
 10:     type performance/md-cache
 14: volume gv0-quick-read
 15:     type performance/quick-read
+------------------------------------------------------------------------------+
"""
GRAPH_STRICT = """[2026-12-01 09:00:00] I [MSGID: 101190] Final graph:
+------------------------------------------------------------------------------+
  1: volume gv0-client-0
  2:     type protocol/client
  5: volume gv0-dht
  6:     type cluster/distribute
+------------------------------------------------------------------------------+
"""


@pytest.mark.parametrize("argv,graph,ok,word", [
    (STRICT, GRAPH_STRICT, True, ""),
    (STRICT, GRAPH_STOCK, False, "caching translators"),
    (["/usr/sbin/glusterfs", "--volfile-server=10.0.0.1"], GRAPH_STRICT, False, "client options"),
    (None, GRAPH_STRICT, False, "cannot see the GlusterFS client"),
])
def test_glusterfs_policy(tmp_path, monkeypatch, argv, graph, ok, word):
    log = tmp_path / "client.log"
    log.write_text("older lines\n" + graph)
    mnt = str(tmp_path / "mnt")
    full = None if argv is None else argv + [f"--log-file={log}", mnt]
    monkeypatch.setattr(fsys, "mount_of", lambda path: (mnt, "fuse.glusterfs", "10.0.0.1:/gv0"))
    monkeypatch.setattr(fsys, "_fuse_client_cmdline", lambda mp, prog: full)
    problem = fsys.policy_problem(tmp_path)
    if ok:
        assert problem is None
        return
    assert problem and word in problem and "performance.stat-prefetch off" in problem
    # the refusal a user sees carries the whole fix: volume and client options (it holds a ';')
    fsys.reset_cache()
    with pytest.raises(UnsupportedFilesystemError) as info:
        fsys.check_root(tmp_path)
    fsys.reset_cache()
    fix = info.value.fix
    assert "performance.stat-prefetch off" in fix and "--entry-timeout=0" in fix, fix


def test_mountinfo_octal_escapes():
    assert fsys._unescape(r"mfs\04310.0.0.1:9421") == "mfs#10.0.0.1:9421"
    assert fsys._unescape(r"/mnt/with\040space") == "/mnt/with space"


PARAMS_STRICT = "mfsmaster: 10.0.0.1\nmfsattrcacheto: 0.000\nmfsxattrcacheto: 30.000\nmfsentrycacheto: 0.000\n" \
                "mfsdirentrycacheto: 0.000\nmfsnegentrycacheto: 0.000\n"
PARAMS_DEFAULT = "mfsmaster: 10.0.0.1\nmfsattrcacheto: 1.000\nmfsentrycacheto: 0.000\n" \
                 "mfsdirentrycacheto: 1.000\nmfsnegentrycacheto: 0.000\n"


@pytest.mark.parametrize("params,ok", [(PARAMS_STRICT, True), (PARAMS_DEFAULT, False), (None, False)],
                         ids=["caches-off", "defaults", "no-params-file"])
def test_moosefs_policy(tmp_path, monkeypatch, params, ok):
    """mfsmount rewrites its command line; the options are read from <mount>/.params."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if params is not None:
        (mnt / ".params").write_text(params)
    monkeypatch.setattr(fsys, "mount_of", lambda path: (str(mnt), "fuse", "mfs#10.0.0.1:9421"))
    problem = fsys.policy_problem(tmp_path)
    assert (problem is None) == ok, problem
    if ok:
        fsys.check_root(tmp_path)       # accepted: no refusal
        return
    assert "mfsdirentrycacheto=0" in problem
    # the refusal a user sees: its fix names the mount options and, for a platform mount whose
    # options cannot be changed (RunPod network volumes), the object-store setting with an example
    with pytest.raises(UnsupportedFilesystemError) as info:
        fsys.check_root(tmp_path)
    fix = info.value.fix
    assert "mfsdirentrycacheto=0" in fix and "SEEDREUSE_CACHE_URL=s3://" in fix, fix


def test_the_probe_reports_a_refused_filesystem_as_json(tmp_path, monkeypatch):
    """`probe --json` on a refused filesystem: the policy check is a plain string in the report
    (a Refusal carrying its fix failed the report's copy: the GlusterFS stock soak's probe died)."""
    import json
    from reuse_backend.folder import probe
    monkeypatch.setattr(fsys, "policy_problem", lambda root: fsys.Refusal("options are not set", "set them; then x"))
    rep = probe.probe(tmp_path)
    got = json.loads(json.dumps(rep.to_dict()))
    policy = [c for c in got["checks"] if c["name"] == "filesystem policy"]
    assert got["verdict"] == "unsafe" and policy[0]["detail"] == "options are not set; set them; then x"
