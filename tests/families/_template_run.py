"""An official 0.33.0 template of the image/audio families, made reusable and run across workers.

``cross_worker(a, b, root, name, object_info)``: the template's UI file instrumented by the pack
(subgraphs included; idempotent), converted to API form as the frontend does, pointed at the
generated models and stand-in encoders (seedreuse_lab/image_templates.py), with a
SeedReuseTestInspect after every Encode-or-Reuse node and decoder. Worker A runs it cold (every
slot encoded), worker B (another process, same cache root) with a new sampler seed: every slot
reused, no text loader, no encode node and no stand-in network ran there, the samplers did, the
restored values are byte-identical to A's (structure, dtypes, every tensor's sha256) and the
decoded output differs. Returns what the family test asserts on next.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from reuse_backend.workflow import instrument
from reuse_backend.workflow.ui_to_api import convert
from seedreuse_lab import family_models, graphs, host
from seedreuse_lab import image_templates as it
from seedreuse_lab.official_templates import layouts, load_template
from tests import tier_gate

from ._common import slot_events


def require_image_families() -> None:
    """Skip where the host lacks the families' classes (0.3.75), saying so; on a host that should
    have them (0.33 and later) under CI a skip is a failure."""
    if family_models.image_families_on_host():
        return
    version = host.comfyui_version()
    why = f"ComfyUI {version} has no Z-Image / Flux.2 / ACE-Step 1.5 model classes (ComfyUI 0.33 has them)"
    if tier_gate.in_ci() and tuple(int(x) for x in version.split(".")[:2] if x.isdigit()) >= (0, 33):
        pytest.fail(f"CI=true: {why}", pytrace=False)
    pytest.skip(why)


@dataclass
class CrossRun:
    name: str
    report: dict        # the instrumenter's report
    api: dict           # the converted (unshrunk) API form
    pa: dict
    pb: dict
    ra: object
    rb: object
    slots: dict         # slot -> wrapper node id
    inspects: dict      # label -> inspect node id

    def value(self, res, slot: str) -> dict:
        return res.inspected(self.inspects[slot])


def _shapes(d):
    """A describe() value without its data: structure, shapes, dtypes."""
    if isinstance(d, dict):
        return {k: _shapes(v) for k, v in d.items() if k not in ("sha256", "mean", "std", "min", "max")}
    if isinstance(d, list):
        return [_shapes(v) for v in d]
    return d


def prepare(name: str, object_info: dict) -> tuple[dict, dict]:
    ui = load_template(name)
    new_ui, report = instrument(ui, name_hint=name)
    again, report2 = instrument(new_ui, name_hint=name)
    assert again == new_ui and not report2["changed"], "instrumenting twice changed the workflow"
    api, problems = convert(new_ui, object_info, overrides=layouts(object_info))
    assert not [x for x in problems if "not a class of this host" in x], problems
    return report, api


def run_prompt(worker, api: dict, name: str, *, seed: int, tag: str, **kw) -> tuple[dict, dict, object]:
    p = it.for_test_host(api, name, seed=seed, prefix=f"fam_{name}_{tag}", **kw)
    inspects = it.add_inspects(p)
    return p, inspects, worker.run(p, timeout=600).raise_for_status()


def cross_worker(a, b, root, name: str, object_info: dict, *, seeds=(1, 2), **kw) -> CrossRun:
    for w in (a, b):
        for i, image in enumerate(it.IMAGES):
            graphs.write_test_image(w.input_dir / image, 64, 64, seed=7 + i)
        w.reset_counts()
    report, api = prepare(name, object_info)
    assert report["changed"] and report["wrapped"], report
    pa, inspects, ra = run_prompt(a, api, name, seed=seeds[0], tag="a", **kw)
    slots = it.wrappers(pa)
    assert set(slots) == {w["slot"] for w in report["wrapped"]}
    ev = slot_events(ra)
    assert set(ev) == set(slots) and all(e["action"] == "encoded" for e in ev.values()), ev
    assert a.counts()["text_encode"] >= 1
    manifest = json.loads((root / report["cache_name"] / "manifest.json").read_text())
    assert set(manifest["slots"]) == set(slots)

    pb, _, rb = run_prompt(b, api, name, seed=seeds[1], tag="b", **kw)
    ev = slot_events(rb)
    assert set(ev) == set(slots) and all(e["action"] == "reused" for e in ev.values()), ev
    work = it.encoder_work(pb, rb, b.counts())
    assert not any(work.values()), f"worker B did encode-side work or did not sample: {work}"
    producers = {w["producer"]["node"] for w in report["wrapped"]}
    assert not producers & set(rb.executed), f"wrapped producers ran on B: {producers & set(rb.executed)}"
    run = CrossRun(name, report, api, pa, pb, ra, rb, slots, inspects)
    for slot in slots:
        assert run.value(rb, slot) == run.value(ra, slot), f"slot {slot}: B's restored value differs from A's"
    decoded = [k for k in inspects if k.startswith("decoded:")]
    assert decoded
    for k in decoded:
        va, vb = ra.inspected(inspects[k]), rb.inspected(inspects[k])
        assert _shapes(va) == _shapes(vb) and va != vb, f"{k}: B's output must differ from A's in its values only"
    return run
