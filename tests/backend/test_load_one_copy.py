"""A hit holds one copy of each slot (issue 35 item 4), measured in a fresh process.

A slot of about 96 MB (an umT5-XXL-shaped context 1x512x4096 fp32 = 8 MB, a 64 MB tensor and
a list of smaller ones, as a conditioning value nests them) is committed, then loaded by a
fresh Python process through the reader a hit uses (``Snapshot.load_slot``). The process's
peak RSS (VmHWM, reset right before the load through /proc/self/clear_refs) must grow by the
slot's bytes and not by two copies of them (a load through an intermediate buffer, or a file
mapping kept beside the tensors, would add a second copy); the tensors must own exactly their
bytes (no view into a larger buffer such as the whole file); and what stays resident after the
load is the slot itself (so the test cannot pass by loading nothing).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from reuse_backend.folder.cache import FolderCache
from tests.backend.storehelp import REPO_ROOT

_CHILD = textwrap.dedent(r"""
    import json, sys
    from reuse_backend.folder.cache import FolderCache

    def status():
        out = {}
        for line in open("/proc/self/status"):
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) * 1024
        return out

    root, name = sys.argv[1], sys.argv[2]
    with FolderCache(root, name).snapshot() as s:      # imports, fds and manifest before the baseline
        s.manifest
    with FolderCache(root, name).snapshot() as s:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                          # VmHWM := current RSS
        before = status()
        value = s.load_slot("context")
        after = status()
    tensors = [value["cond"], value["big"], *value["pooled"]]
    owned = all(t.untyped_storage().nbytes() == t.numel() * t.element_size() for t in tensors)
    data = sum(t.numel() * t.element_size() for t in tensors)
    sums = [float(t.double().sum()) for t in tensors]
    print(json.dumps({"before": before, "after": after, "owned": owned, "data": data, "sums": sums}))
""")


def _value() -> dict:
    g = torch.Generator().manual_seed(35)
    return {"cond": torch.randn((1, 512, 4096), generator=g),
            "big": torch.randn((16, 1024, 1024), generator=g),
            "pooled": [torch.randn((4096,), generator=g), torch.randn((257, 1280), generator=g).half()],
            "note": "one copy"}


def test_a_loaded_slot_is_one_copy_of_its_bytes(tmp_path):
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError as e:
        pytest.skip(f"/proc/self/clear_refs not writable here ({e}): the peak cannot be reset")
    value = _value()
    with FolderCache(tmp_path, "one-copy").begin() as tx:
        tx.stage_slot("context", value, key={"slot": "context"})
        tx.commit()
    slot_bytes = (tmp_path / "one-copy" / "slot_context.safetensors").stat().st_size
    data = sum(t.numel() * t.element_size() for t in (value["cond"], value["big"], *value["pooled"]))
    assert data <= slot_bytes < data + (1 << 20)          # the file is the tensors plus a small header

    p = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path), "one-copy"], capture_output=True, text=True,
                       cwd=str(REPO_ROOT), env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    before, after = r["before"], r["after"]
    peak_growth = after["VmHWM"] - before["VmRSS"]
    resident_growth = after["RssAnon"] - before["RssAnon"]
    assert r["data"] == data
    assert r["sums"] == pytest.approx([float(t.double().sum()) for t in (value["cond"], value["big"], *value["pooled"])])
    assert r["owned"], "a loaded tensor is a view into a larger buffer (the file, or a read buffer)"
    assert resident_growth >= 0.9 * data, (resident_growth, data)      # the slot really is in memory
    assert peak_growth <= 1.2 * data, (                                   # and only once, also at the peak
        f"loading a {data / 1e6:.0f} MB slot raised the peak RSS by {peak_growth / 1e6:.0f} MB: more than one copy")
    assert after["RssFile"] - before["RssFile"] < 0.1 * data, "the slot file stays mapped beside its tensors"
