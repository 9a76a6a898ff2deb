"""The key mutation checker on every official template of this host and every shipped example.

Per workflow: make it reusable with the pack's own instrumenter (UI form, subgraphs included),
convert it to API format as the frontend does (the worker's /object_info), then, inside a real
worker, change one thing at a time -- each literal input of each node (combos to another allowed
option, seeds, dynamic-combo inputs such as ``sampling_mode.seed``), each optional literal
removed, each node's change token, each node's id, the workflow metadata -- and compare every
wrapped value's reuse key, computed by the pack's own key function, with what the oracle of
seedreuse_lab/key_mutations.py says must happen: a change exactly where the value depends on what
changed. A *stale* key (no change where one was required) would serve a wrong hit; an *over*
change a needless miss. Each template's line and the totals are printed; a stale or over key
fails its template's test naming the slot, node, class and input.

On the primary host the same run also writes the per-template support table
(docs/SUPPORT_MATRIX.md, "Official templates"): see test_support_table_is_current.
"""
from __future__ import annotations

import os

import pytest

from reuse_backend.workflow import auto, instrument
from reuse_backend.workflow.ui_to_api import convert
from seedreuse_lab import host, key_case_graphs as kc, template_catalog, template_table
from seedreuse_lab.official_templates import layouts

pytestmark = pytest.mark.comfy

TEMPLATES = template_catalog.host_templates()
EXAMPLES = template_catalog.shipped_examples()
RESULTS: dict = {}


@pytest.fixture(scope="module")
def worker(module_workers):
    return module_workers.one()


@pytest.fixture(scope="module")
def object_info(worker) -> dict:
    return worker.object_info()


def schemas_for(prompt: dict, object_info: dict) -> dict:
    return {n["class_type"]: object_info[n["class_type"]] for n in prompt.values()
            if isinstance(n, dict) and n.get("class_type") in object_info}


def mutations(worker, prompt: dict, object_info: dict) -> dict:
    return worker.post_json("/seedreuse_test/key_mutations",
                            {"prompt": prompt, "schemas": schemas_for(prompt, object_info),
                             "extra_pnginfo": {"workflow": {"seedreuse": "base"}}}, timeout=600)


def explain(rep: dict, name: str) -> str:
    def line(x):
        return (f"{name}: slot {x['slot']}: {x['kind']} of node {x['node']} ({x['class_type']}) input "
                f"{x['input']} {x.get('before', '')} -> {x.get('after', '')}")
    out = [f"STALE (a wrong hit): {line(x)}" for x in rep["stale"]]
    out += [f"OVER (a needless miss): {line(x)}" for x in rep["over"]]
    return "\n".join(out)


def judged(rep: dict) -> None:
    assert rep["stale_count"] == 0 and rep["over_count"] == 0, explain(rep, rep.get("name", "?"))


@pytest.mark.parametrize("tpl", TEMPLATES, ids=[t.name for t in TEMPLATES])
def test_official_template_keys_change_exactly_with_their_inputs(tpl, worker, object_info):
    ui = tpl.load()
    try:
        new_ui, report = instrument(ui, name_hint=tpl.name)
    except Exception as e:   # noqa: BLE001 - recorded in the table (a template the instrumenter refuses)
        RESULTS[tpl.name] = template_table.refused(tpl, e)
        raise
    api_plain, _ = convert(ui, object_info, overrides=layouts(object_info))
    api, problems = convert(new_ui, object_info, overrides=layouts(object_info))
    _, api_report = instrument(api_plain, name_hint=tpl.name, object_info=object_info)
    try:
        _, auto_report = auto.instrument_for_arrival(api_plain, object_info=object_info)
        auto_report = {**auto_report, "applied": True}
    except auto.AutoNotApplied as e:
        auto_report = {"applied": False, "reason": str(e)}
    rep = mutations(worker, api, object_info) if report["wrapped"] else None
    row = template_table.row(tpl, report, api_report, auto_report, rep, problems)
    RESULTS[tpl.name] = row
    print(template_table.line(row))
    if rep is not None:
        rep["name"] = tpl.name
        judged(rep)


@pytest.mark.parametrize("ex", EXAMPLES, ids=[f"{e.bundle[9:12]}:{e.name}" for e in EXAMPLES])
def test_shipped_example_keys_change_exactly_with_their_inputs(ex, worker, object_info):
    doc = ex.load()
    api = doc if ex.path.parent.name == "api" else convert(doc, object_info, overrides=layouts(object_info))[0]
    rep = mutations(worker, api, object_info)
    assert rep["slots"], f"{ex.name}: the example wraps nothing"
    rep["name"] = ex.name
    print(f"[keys] example {ex.name}: {len(rep['slots'])} wrapped values, {rep['mutations']} mutations, "
          f"{rep['checks']} checks, stale {rep['stale_count']}, over {rep['over_count']}")
    RESULTS[f"example:{ex.bundle}:{ex.name}"] = {"example": True, "slots": len(rep["slots"]),
                                                  "mutations": rep["mutations"], "checks": rep["checks"],
                                                  "stale": rep["stale_count"], "over": rep["over_count"]}
    judged(rep)


CRAFTED = {
    # name: (workflow, mutations some key must follow)
    "nested subgraphs, a wildcard and a primitive two deep": (
        kc.nested_subgraph_ui, {"SeedReuseTestWildcard.seed", "SeedReuseTestWildcard.wildcard_text",
                                "PrimitiveStringMultiline.value", "StringConcatenate.delimiter"}),
    "a wildcard's seed": (lambda: kc.wildcard_t2v(1, 2, cache_name="c"), {"SeedReuseTestWildcard.seed"}),
    "a two-pass graph": (lambda: kc.two_pass_t2v(1, 2, cache_name="c"), {"KSampler.seed", "KSampler.denoise"}),
    "a node reading the prompt, its id and the workflow": (
        lambda: kc.reader_t2v(1, cache_name="c"),
        {"SeedReuseTestPromptReader.#id", "KSampler.seed", "SaveVideo.filename_prefix", ".extra_pnginfo"}),
    "the stock TextGenerate, sampling on": (lambda: kc.enhancer_t2v("on", 3, 4, cache_name="c"),
                                            {"TextGenerate.sampling_mode.seed", "TextGenerate.sampling_mode"}),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_case_keys_follow_what_they_must(case, worker, object_info):
    make, must = CRAFTED[case]
    if case.startswith("the stock TextGenerate") and "TextGenerate" not in object_info:
        pytest.skip("this host has no stock TextGenerate node (ComfyUI 0.33 added it)")
    doc = make()
    if "nodes" in doc:        # UI: made reusable by the instrumenter, converted as the frontend does
        doc, report = instrument(doc, name_hint="crafted")
        assert report["wrapped"], report
        doc, problems = convert(doc, object_info, overrides=layouts(object_info))
        assert not problems, problems
    rep = mutations(worker, doc, object_info)
    rep["name"] = case
    print(f"[keys] crafted {case}: {len(rep['slots'])} wrapped values, {rep['mutations']} mutations, "
          f"stale {rep['stale_count']}, over {rep['over_count']}")
    judged(rep)
    assert must <= set(rep["required"]), sorted(must - set(rep["required"]))


def test_totals_and_support_table(worker):
    """The totals of this host's run (printed for the CI log); on the primary host the
    per-template support table in docs/SUPPORT_MATRIX.md must be the one this run computes
    (SEEDREUSE_WRITE_TEMPLATE_TABLE=1 writes it)."""
    rows = [r for r in RESULTS.values() if not r.get("example")]
    examples = [r for r in RESULTS.values() if r.get("example")]
    if len(rows) != len(TEMPLATES) or len(examples) != len(EXAMPLES):
        pytest.skip("the template tests of this module did not all run (a -k selection)")
    t = template_table.totals(rows, examples)
    print(f"\n[keys] ComfyUI {host.comfyui_version()}: templates package "
          f"{template_catalog.package_version()}: {t['templates']} templates ({t['partner']} partner), "
          f"{t['with_wrapped']} with wrapped values, {t['wrapped']} wrapped values, {t['mutations']} mutations, "
          f"{t['checks']} checks, {t['stale']} stale, {t['over']} over; {t['examples']} shipped examples: "
          f"{t['example_mutations']} mutations, {t['example_stale']} stale, {t['example_over']} over")
    assert t["stale"] == 0 and t["over"] == 0 and t["example_stale"] == 0 and t["example_over"] == 0
    if template_table.PRIMARY_HOST not in host.comfyui_version():
        return
    text = template_table.render(rows, template_catalog.package_version())
    if os.environ.get("SEEDREUSE_WRITE_TEMPLATE_TABLE") == "1":
        template_table.write(text)
    assert template_table.current() == text, (
        "docs/SUPPORT_MATRIX.md's official-template table is not the one this run computed: run "
        "SEEDREUSE_WRITE_TEMPLATE_TABLE=1 SEEDREUSE_TEST_HOSTS=0.33.0 bash scripts/test.sh "
        "tests/test_key_mutations.py and commit the table")
