"""The pack under ComfyUI-Distributed 1.4.4 (issue 35): a master and two local workers (real
ComfyUI processes on CPU, one SeedReuse cache root, ComfyUI-Distributed's own config file), jobs
queued as its users queue them, ``POST /distributed/queue`` on the master. The orchestrator gives
each participant its own seed (``DistributedSeed``) and queues every part at about the same
moment (the master's own internally, the workers' over its worker websocket), so every
participant reaches the encoders: single flight is what keeps the fleet at one encode.

- the pack's own example (Session + Encode-or-Reuse) and a plain workflow under automatic mode:
  every participant succeeds, the collector gathers every image; cold, each encoder runs once for
  the whole fleet; warm with a new master seed, zero times (counts per participant printed);
- master first (the workers busy when the job arrives): the master encodes, the workers use its
  encoding (the single-flight entry) without waiting for the rest of its prompt, which cannot end
  before their images arrive; an interrupted master publishes no version and no entry;
- automatic mode under the orchestrator: every participant's history shows the report with what
  was reused and what encoded, although the orchestrator drops ``extra_data``;
- a worker killed mid-run: the others finish, ``python -m reuse_backend check`` finds the cache valid.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from seedreuse_lab import distributed, graphs, host
from seedreuse_lab import tiny_models as tm
from seedreuse_lab.distributed import collected_images, distributed_graph, part_succeeded, slot_payloads

from .conftest import record

pytestmark = pytest.mark.comfy

SINGLE_FLIGHT_S = 120          # a stalled waiter would wait this long, then encode (its report says so)
WORKER_TIMEOUT_S = 10          # the master's collector gives up on a silent, idle worker after this
EXAMPLE = host.REPO_ROOT / "example_workflows" / "api" / "wan21_t2v_encoder_reuse.json"
REPORT = "seedreuse_auto_report"


@pytest.fixture(scope="module")
def fleet(fleet_factory):
    return fleet_factory(env={"SEEDREUSE_AUTO": "1", "SEEDREUSE_SINGLE_FLIGHT_S": str(SINGLE_FLIGHT_S)},
                         worker_timeout_s=WORKER_TIMEOUT_S)


# ---------------------------------------------------------------------- graphs

def tiny_example(cache_name: str) -> dict:
    """The pack's Wan 2.1 T2V example (API twin) on the tiny models: the stand-in text encoder
    for umT5-XXL, 32x32, 5 frames, 1 step."""
    p = json.loads(EXAMPLE.read_text())
    for n in p.values():
        ct, ins = n["class_type"], n["inputs"]
        if ct == "UNETLoader":
            ins["unet_name"] = tm.T2V
        elif ct == "VAELoader":
            ins["vae_name"] = tm.VAE
        elif ct == "CLIPLoader":
            n.update(class_type="SeedReuseTestTextEncoderLoader", inputs={"clip_name": tm.TEXT_ENCODER, "work_ms": 0})
        elif ct == "CLIPTextEncode":
            n.update(class_type="SeedReuseTestTextEncode", inputs={"clip": ins["clip"], "text": ins["text"],
                                                                   "work_ms": 0})
        elif ct == "SeedReuseSession":
            ins["cache_name"] = cache_name
        for k, v in (("width", 32), ("height", 32), ("length", 5), ("steps", 1)):
            if k in n["inputs"] and not isinstance(n["inputs"][k], list):
                n["inputs"][k] = v
    return p


def node_of(p: dict, class_type: str) -> str:
    return next(nid for nid, n in p.items() if n["class_type"] == class_type)


def example_job(cache_name: str, seed: int, *, slow_s: float = 0.0) -> dict:
    p = tiny_example(cache_name)
    images = [node_of(p, "VAEDecode"), 0]
    if slow_s:
        images = [graphs.add_node(p, "SeedReuseTestSlow", {"value": images, "seconds": slow_s}), 0]
    return distributed_graph(p, sampler=node_of(p, "KSampler"), images=images, seed=seed)


def plain_job(text: str, seed: int) -> dict:
    """A workflow without SeedReuse nodes (automatic mode makes it reusable on every participant)."""
    p = graphs.wan_t2v_graph(seed=0, prompt_text=text, negative_text=f"blurry {text}", length=5, steps=1)
    return distributed_graph(p, sampler=graphs.T2V.SAMPLER, images=[graphs.T2V.DECODE, 0], seed=seed)


# ---------------------------------------------------------------------- helpers

def actions(entry: dict) -> dict:
    """slot -> (action, reason) of one participant's part."""
    return {p["slot"]: (p["action"], p["reason"]) for p in slot_payloads(entry)}


def part_images(entry: dict) -> int:
    return sum(len(ui.get("images") or []) for ui in (entry.get("outputs") or {}).values())


def encoder_counts(fleet) -> dict:
    return {name: {"text_encode": c["text_encode"], "text_loader": c["text_loader"]}
            for name, c in fleet.counts().items()}


def record_counts(what: str, fleet, run) -> dict:
    c = encoder_counts(fleet)
    per = ", ".join(f"{n}: encode {v['text_encode']} load {v['text_loader']}" for n, v in c.items())
    record(f"[{host.comfyui_version()}] {what}: {per}; job {run.seconds:.2f} s; "
           f"{collected_images(run)} images collected")
    return c


def all_parts_succeeded(fleet, run, participants=None) -> None:
    run.master.raise_for_status()
    for name in participants or fleet.participants:
        entry = run.part(name)
        assert part_succeeded(entry), f"{name}: {entry.get('status')}"


def cold_then_warm(fleet, job_of) -> tuple:
    """(cold run, its counts, warm run, its counts): the same job cold, then with a new master seed;
    every participant's in-memory cache emptied before each (what does not run again did not run
    because of the pack)."""
    fleet.free()
    fleet.reset_counts()
    cold = fleet.run(job_of(11))
    c_cold = record_counts("cold", fleet, cold)
    fleet.free()
    fleet.reset_counts()
    warm = fleet.run(job_of(12345))
    c_warm = record_counts("warm, new master seed", fleet, warm)
    return cold, c_cold, warm, c_warm


def assert_once_then_never(fleet, cold, c_cold, warm, c_warm, slots: set) -> None:
    for run in (cold, warm):
        all_parts_succeeded(fleet, run)
        worker_images = [part_images(run.part(w.name)) for w in fleet.workers.values()]
        assert worker_images[0] > 0 and len(set(worker_images)) == 1, worker_images
        assert collected_images(run) == 3 * worker_images[0], (collected_images(run), worker_images)
    # cold: every slot encoded by exactly one participant, every other one used that encoding
    encoded = {s: [n for n in fleet.participants if actions(cold.part(n)).get(s, ("",))[0] == "encoded"]
               for s in slots}
    assert all(len(v) == 1 for v in encoded.values()), encoded
    assert sum(v["text_encode"] for v in c_cold.values()) == len(slots), c_cold
    for n in fleet.participants:
        assert set(actions(cold.part(n))) == slots, (n, actions(cold.part(n)))
        got = actions(warm.part(n))
        assert set(got) == slots and {a for a, _ in got.values()} == {"reused"}, (n, got)
    assert sum(v["text_encode"] + v["text_loader"] for v in c_warm.values()) == 0, c_warm


def root_problems(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reuse_backend", "--root", str(root), "check"],
                          cwd=str(host.REPO_ROOT), capture_output=True, text=True, timeout=120)


def busy_workers(fleet, seconds: float) -> list[str]:
    """A slow prompt queued and running on every worker (the job's worker parts queue behind it)."""
    pids = []
    for w in fleet.workers.values():
        p = {"1": {"class_type": "SeedReuseTestSineAudio",
                   "inputs": {"seconds": 0.1, "sample_rate": 16000, "frequency": 100.0 + time.time() % 1}},
             "2": {"class_type": "SeedReuseTestSlow", "inputs": {"value": ["1", 0], "seconds": seconds}},
             "3": {"class_type": "SeedReuseTestSink", "inputs": {"value": ["2", 0]}}}
        pids.append((w, w.queue(p)))
    for w, pid in pids:
        deadline = time.monotonic() + 30
        while not any(item[1] == pid for item in w.get_json("/queue").get("queue_running") or []):
            assert time.monotonic() < deadline, f"{w.name}: the slow prompt did not start"
            time.sleep(0.05)
    return [pid for _, pid in pids]


def idle(fleet) -> None:
    for w in fleet.participants.values():
        deadline = time.monotonic() + 120
        while w.alive():
            q = w.get_json("/queue")
            if not q.get("queue_running") and not q.get("queue_pending"):
                break
            assert time.monotonic() < deadline, f"{w.name} stays busy"
            time.sleep(0.1)


# ---------------------------------------------------------------------- tests

def test_the_pack_example_encodes_once_for_the_fleet_then_never(fleet):
    cache = f"dist-example-{uuid.uuid4().hex[:8]}"
    cold, c_cold, warm, c_warm = cold_then_warm(fleet, lambda seed: example_job(cache, seed))
    assert_once_then_never(fleet, cold, c_cold, warm, c_warm, {"positive", "negative"})


@pytest.fixture(scope="module")
def auto_runs(fleet):
    text = f"a plain workflow {uuid.uuid4().hex[:6]}"
    return cold_then_warm(fleet, lambda seed: plain_job(text, seed))


def test_a_plain_workflow_under_automatic_mode_encodes_once_then_never(fleet, auto_runs):
    cold, c_cold, warm, c_warm = auto_runs
    slots = set(actions(cold.part(distributed.MASTER)))
    assert len(slots) == 2, slots        # the positive and the negative text encodings were wrapped
    assert_once_then_never(fleet, cold, c_cold, warm, c_warm, slots)


def test_automatic_mode_reports_in_every_participants_history(fleet, auto_runs):
    cold, _, warm, _ = auto_runs
    for run, want in ((cold, None), (warm, "reused")):
        caches = set()
        for n in fleet.participants:
            entry = run.part(n)
            extra = entry["prompt"][3]
            rep = extra.get(REPORT)
            assert rep and rep["applied"], (n, extra)
            # the orchestrator queued every part internally and dropped extra_data: the pack kept it
            assert rep.get("extra_data_dropped"), (n, rep)
            outs = {o["slot"]: o["action"] for o in rep["outputs"]}
            assert outs == {s: a for s, (a, _) in actions(entry).items()}, (n, outs, actions(entry))
            if want:
                assert set(outs.values()) == {want}, (n, outs)
            assert rep["reused"] + rep["encoded"] == len(outs), rep
            session = [ui[REPORT][0] for ui in entry["outputs"].values() if REPORT in ui]
            assert len(session) == 1 and session[0]["cache"] == rep["cache"], (n, entry["outputs"].keys())
            caches.add(rep["cache"])
        assert len(caches) == 1, caches            # one automatic cache for the whole fleet
    encoded = [n for n in fleet.participants if cold.part(n)["prompt"][3][REPORT]["encoded"]]
    record(f"[{host.comfyui_version()}] automatic mode, cold: encoded on {encoded}, reused elsewhere; "
           f"warm: reused on all {len(fleet.participants)}")


def test_master_first_the_workers_use_its_encoding_without_waiting_for_its_prompt(fleet):
    cache = f"dist-master-first-{uuid.uuid4().hex[:8]}"
    fleet.free()
    fleet.reset_counts()
    busy_workers(fleet, 6.0)
    run = fleet.run(example_job(cache, 21))
    c = record_counts("master first (workers busy 6 s when the job came)", fleet, run)
    all_parts_succeeded(fleet, run)
    master = actions(run.part(distributed.MASTER))
    assert {a for a, _ in master.values()} == {"encoded"}, master
    assert c["master"]["text_encode"] == 2 and all(c[w.name]["text_encode"] == 0 for w in fleet.workers.values()), c
    for w in fleet.workers.values():
        for slot, (action, reason) in actions(run.part(w.name)).items():
            # the pack's own account: the master's entry ended the wait, not its commit and not the bound
            assert action == "reused" and "single flight" in reason and "encoded by run" in reason, (w.name, slot, reason)
            assert "did not commit" not in reason, reason
        assert "gave up waiting" not in w.log_text(), w.log_tail()


def test_an_interrupted_master_publishes_no_version_and_no_entry(fleet):
    cache = f"dist-interrupted-{uuid.uuid4().hex[:8]}"
    fleet.free()
    busy_workers(fleet, 60.0)
    job = fleet.start_job(example_job(cache, 31))
    collector = node_of(example_job(cache, 31), distributed.COLLECTOR)
    job.handle.wait_executing(collector, timeout=60)     # encoded, published, now waiting for the workers
    assert (fleet.cache_root / f"{cache}.tmp").is_dir()
    assert [p.name for p in (fleet.cache_root / f"{cache}.tmp").iterdir() if p.name.endswith(".entry")]
    fleet.master.interrupt()
    res = job.handle.wait(60)
    # 0.3.75 ends it "interrupted"; 0.33.0 "error": after the interrupt ComfyUI-Distributed's
    # collector returns nothing and 0.33.0's executor fails on that (TypeError in merge_result_data,
    # the host's and the orchestrator's, not the pack's): the prompt failed either way
    assert res.status in ("interrupted", "error"), res.status
    record(f"[{host.comfyui_version()}] master interrupted while collecting: ended {res.status}"
           + (f" ({(res.error or {}).get('exception_type')}: {(res.error or {}).get('exception_message')})"
              if res.status == "error" else ""))
    assert not (fleet.cache_root / cache).exists(), "an interrupted prompt published a version"
    tmp = fleet.cache_root / f"{cache}.tmp"
    assert not tmp.exists() or not [p for p in tmp.iterdir() if p.name.endswith(".entry")], list(tmp.iterdir())
    for w in fleet.workers.values():                    # their parts were still queued: drop them
        w.post_json("/queue", {"clear": True})
        w.interrupt()
    idle(fleet)
    assert not (fleet.cache_root / cache).exists()
    checked = root_problems(fleet.cache_root)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_worker_killed_mid_run_the_others_finish_and_the_cache_stays_valid(fleet):
    cache = f"dist-kill-{uuid.uuid4().hex[:8]}"
    fleet.free()
    fleet.reset_counts()
    victim = fleet.workers["2"]
    job = fleet.start_job(example_job(cache, 41, slow_s=3.0))
    deadline = time.monotonic() + 120
    while victim.counts()["slow"] == 0:                 # it encoded or reused, staged, now samples on
        assert time.monotonic() < deadline, victim.log_tail()
        time.sleep(0.05)
    victim.kill()
    run = job.wait(300)
    record(f"[{host.comfyui_version()}] worker2 killed mid-run: master {run.master.status}, "
           f"worker1 {run.part('worker1')['status']['status_str']}, {collected_images(run)} images, "
           f"job {run.seconds:.2f} s")
    all_parts_succeeded(fleet, run, participants=[distributed.MASTER, "worker1"])
    assert collected_images(run) == 2 * part_images(run.part("worker1")), collected_images(run)
    assert (fleet.cache_root / cache).is_dir()          # master and worker1 committed
    checked = root_problems(fleet.cache_root)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    victim.start()                                       # a fresh process: recovery on first use
    fleet.reset_counts()
    fleet.free()
    again = fleet.run(example_job(cache, 42))
    all_parts_succeeded(fleet, again)
    assert sum(v["text_encode"] for v in encoder_counts(fleet).values()) == 0
