"""Workers of two different users on one shared cache folder (one group).

With SEEDREUSE_GROUP_WRITABLE=1 (and a umask that keeps group write, e.g. 002) everything a run
creates is group-writable, so a worker of another user in the group can recover a crashed
writer's leftovers (its dead lock, its staging) and replace old versions. Without it (0o755 /
0o644 before the umask) the other user's recovery is refused by the filesystem: the setting is
what makes a multi-user deployment work. Needs root (to run the two workers as two uids).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.backend.storehelp import REPO_ROOT

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run workers as two uids"),
              pytest.mark.exhaustive]
GID, UID_A, UID_B = 42420, 42421, 42422

# The interpreter and its libraries live under /root here (not readable by other uids), so each
# child starts as root, imports everything it needs, then drops to the user's uid/gid before it
# touches the cache: every filesystem access below runs with that user's permissions.
_DROP = r"""
import json, os, signal, sys, torch
import reuse_backend.storage.serialize, reuse_backend.store.check
from reuse_backend.folder.cache import FolderCache
from reuse_backend.store.run_info import RunInfo
gid, uid = int(os.environ["TEST_GID"]), int(os.environ["TEST_UID"])
os.setgroups([gid]); os.setgid(gid); os.setuid(uid); os.umask(0o002)
"""

_CRASHING_WRITER = _DROP + r"""
c = FolderCache(sys.argv[1], "shared")
tx = c.begin(RunInfo(run_id="user-a-run"))
tx.stage_slot("text", torch.ones(4), key={}, meta={})
os.kill(os.getpid(), signal.SIGKILL)          # crash mid-run: run lease, staging left behind
"""

_COMMIT = _DROP + r"""
c = FolderCache(sys.argv[1], "shared")
out = {}
try:
    tx = c.begin(RunInfo(run_id=sys.argv[2]))
    out["recovered"] = tx.recovered
    tx.stage_slot("text", torch.full((4,), float(sys.argv[3])), key={}, meta={})
    tx.commit()
    out["ok"] = True
except Exception as e:
    out["ok"], out["error"] = False, f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def _as(uid: int, code: str, *args, group_writable: bool):
    env = {k: v for k, v in os.environ.items() if k != "SEEDREUSE_GROUP_WRITABLE"}
    env.update(PYTHONPATH=str(REPO_ROOT), TEST_GID=str(GID), TEST_UID=str(uid))
    if group_writable:
        env["SEEDREUSE_GROUP_WRITABLE"] = "1"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120, cwd="/")


def _shared_root(tmp_path):
    root = tmp_path / "shared-root"
    root.mkdir()
    os.chown(root, 0, GID)
    os.chmod(root, 0o2775)                     # group-writable, new entries inherit the group
    for p in [tmp_path, *tmp_path.parents]:    # let the two uids reach it (pytest's dirs are 0o700)
        if str(p).startswith("/tmp/pytest-of-"):
            os.chmod(p, os.stat(p).st_mode | 0o055)
    return root


@pytest.mark.parametrize("group_writable", [True, False], ids=["group-writable", "default-modes"])
def test_other_user_recovers_a_crashed_writer(tmp_path, group_writable):
    root = _shared_root(tmp_path)
    ok = _as(UID_A, _COMMIT, root, "user-a-first", 1, group_writable=group_writable)
    assert json.loads(ok.stdout.strip().splitlines()[-1])["ok"], ok.stderr
    crash = _as(UID_A, _CRASHING_WRITER, root, group_writable=group_writable)
    assert crash.returncode == -9, crash.stderr
    # mid-run: its staging and run lease are left behind (runs stage without the writer lock)
    assert any(p.name.endswith(".lease") for p in (root / "shared.tmp").iterdir())
    b = _as(UID_B, _COMMIT, root, "user-b-run", 2, group_writable=group_writable)
    out = json.loads(b.stdout.strip().splitlines()[-1])
    if group_writable:
        assert out["ok"], out
        assert any("stale run lease" in r for r in out["recovered"])
        assert any("unfinished staging" in r for r in out["recovered"])
        assert not (root / "shared.old").exists() and not (root / "shared.tmp").exists()
    else:
        assert not out["ok"] and "Permission" in out["error"], out
