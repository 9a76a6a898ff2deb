"""examples/api_client.py against a real worker: first run, seed change, segment resume.

The client runs as a subprocess (python examples/api_client.py ...) on the Wan 2.1 segment
example with the tiny models and stand-in encoders substituted (pre-written by the test) plus a
--set override, and its --json summary is checked against what the worker did.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from seedreuse_lab import graphs, host
from test_examples import API_DIR, for_test_host

pytestmark = pytest.mark.comfy

CLIENT = host.REPO_ROOT / "examples" / "api_client.py"


@pytest.fixture(scope="module")
def worker(module_workers):
    w = module_workers.one()
    graphs.write_test_image(w.input_dir / "example_ref.png", 64, 64, seed=5)
    return w


@pytest.fixture(scope="module")
def workflow(worker, tmp_path_factory) -> Path:
    api = json.loads((API_DIR / "wan21_i2v_segment_reuse.json").read_text())
    p = for_test_host(api, worker.object_info(), execute=True)
    for n in p.values():          # --set brings it back to 1 step (exercises the override)
        if n["class_type"] == "KSampler":
            n["inputs"]["steps"] = 3
    path = tmp_path_factory.mktemp("api-client") / "segments_tiny.json"
    path.write_text(json.dumps(p, indent=1))
    return path


def run_client(worker, workflow, *args, timeout=240):
    cmd = [sys.executable, str(CLIENT), "--server", worker.url, "--workflow", str(workflow), "--json", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("SEEDREUSE_SUMMARY ")]
    summary = json.loads(lines[-1].split(" ", 1)[1]) if lines else None
    return proc, summary


def test_serial_contract_first_reuse_resume(worker, workflow):
    proc, s = run_client(worker, workflow, "--cache-name", "client-serial", "--seed", "11",
                         "--set", "KSampler.steps=1")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    first, reuse, resume = s["steps"]["first"], s["steps"]["reuse"], s["steps"]["resume"]
    # 1. reuse off: the dry run says every slot encodes, and they did
    assert {a["will"] for a in first["check"]["nodes"].values()} == {"encode"}
    assert first["ok"] and set(first["slots"].values()) == {"encoded"}
    assert set(first["slots"]) == {"positive", "negative", "clip_vision"}
    # 2. seed change with reuse=require: predicted and done as reuse
    assert {a["will"] for a in reuse["check"]["nodes"].values()} == {"reuse"}
    assert reuse["ok"] and set(reuse["slots"].values()) <= {"reused"}
    seg = next(iter(reuse["check"]["segments"].values()))
    assert seg["valid"] and seg["S"] == 3 and seg["valid_n"] == [0, 1, 2]
    assert seg["prefix_frames_by_n"] == [0, 5, 9]
    # 3. resume: the client picked the largest valid N and the worker kept that prefix
    seg = next(iter(resume["check"]["segments"].values()))
    assert seg["valid"] and seg["N"] == 2 and seg["will"] == "resume", seg
    assert resume["ok"] and resume["files"], resume
    hist = worker.get_json(f"/history/{resume['prompt_id']}")[resume["prompt_id"]]
    statuses = [m for m in hist["status"]["messages"] if m[0] == "execution_success"]
    assert statuses, hist["status"]
    section = worker.get_json("/seedreuse/caches/client-serial")["sections"]["segments"]
    assert section["reused_prefix_segments"] == 2 and section["prefix_frames"] == 9 and section["frames"] == 13
    assert section["seed"] == 13
    # the human-readable account
    assert "will encode" in out and "will reuse" in out and "valid N: [0, 1, 2]" in out
    assert "keeping segments 0..1 (9 frames)" in out


def test_client_stops_when_the_dry_run_predicts_failure(worker, workflow):
    before = set(worker.get_json("/history"))
    proc, s = run_client(worker, workflow, "--cache-name", "client-empty", "--steps", "reuse")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no successful run in cache 'client-empty'" in proc.stdout
    assert s["steps"]["reuse"]["queued"] is False
    proc, s = run_client(worker, workflow, "--cache-name", "client-empty", "--steps", "resume",
                         "--prefix-segments", "1")
    assert proc.returncode == 2 and "needs a previous successful run" in proc.stdout, proc.stdout
    assert set(worker.get_json("/history")) == before, "a prompt was queued although the check said fail"


def test_client_reports_an_unreachable_server(workflow):
    from seedreuse_lab.worker import free_port
    proc = subprocess.run([sys.executable, str(CLIENT), "--server", f"http://127.0.0.1:{free_port()}",
                           "--workflow", str(workflow)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and "cannot reach" in proc.stdout
