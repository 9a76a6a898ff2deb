"""Bounds of POST /seedreuse/check and exact numeric inputs, in a real worker.

The dry run refuses, before any expensive work, with a 4xx and a structured reason
{"error": {code, type, message, expected, actual, fix}}:

- 413 request_too_large: a body over 16 MiB, more than 2000 nodes, an input value nested more
  than 32 levels, keys over 64 M characters in all;
- 400: class_type null, a dependency cycle (its node ids), an INT/FLOAT literal outside its
  schema's range (the pack's nodes and host nodes, as ComfyUI's validation checks them), and a
  non-integer for an INT input of the pack (1.5, true, "2").

POST /prompt refuses the same non-integers for the pack's inputs (ComfyUI itself would turn
1.5 into 1 before any validate function sees it) and an out-of-range reuse_prefix_segments
with "must be >= 0" (not "must be smaller than the segment count").
"""
from __future__ import annotations

import http.client
import json
import time

import pytest

from seedreuse_lab import graphs
from seedreuse_lab.graphs import T2V, link
from seedreuse_lab.reuse_graphs import SEG, segment_graph, t2v_reuse
from seedreuse_lab.worker import PromptRejected, default_custom_nodes

pytestmark = pytest.mark.comfy

SMALL = dict(width=32, height=32, length=5, steps=1)
QUICK_S = 10.0      # a refusal comes before any expensive work (the old dry run took 8-22 s for some)

BOUNDS_PACK = '''
class BoundsTestSink:
    """An output node with bounded literals (ComfyUI checks min/max itself)."""
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"n": ("INT", {"default": 1, "min": 0, "max": 10}),
                             "x": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0})}}
    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True
    CATEGORY = "testing"

    def run(self, n, x):
        return {}


class BoundsTestSelfChecked(BoundsTestSink):
    """Validates n itself: ComfyUI skips its own min/max check for n (not for x)."""
    @classmethod
    def VALIDATE_INPUTS(cls, n):
        return True


NODE_CLASS_MAPPINGS = {"BoundsTestSink": BoundsTestSink, "BoundsTestSelfChecked": BoundsTestSelfChecked}
'''


@pytest.fixture(scope="module")
def w(module_workers, tmp_path_factory):
    pack = tmp_path_factory.mktemp("bounds") / "bounds_test_pack"
    pack.mkdir()
    (pack / "__init__.py").write_text(BOUNDS_PACK)
    worker = module_workers.one(custom_nodes=[*default_custom_nodes(), ("bounds_test_pack", pack)])
    graphs.write_test_image(worker.input_dir / "seg.png", seed=7)
    return worker


# ---------------------------------------------------------------- helpers

def post_check(worker, body, *, chunked: bool = False):
    """POST /seedreuse/check -> (status, parsed body, seconds)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", worker.port, timeout=120)
    t0 = time.perf_counter()
    try:
        if chunked:
            conn.request("POST", "/seedreuse/check", body=(raw[i:i + (1 << 20)] for i in range(0, len(raw), 1 << 20)),
                         headers={"Content-Type": "application/json"}, encode_chunked=True)
        else:
            conn.request("POST", "/seedreuse/check", body=raw, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    return r.status, json.loads(data), time.perf_counter() - t0


def refused(worker, prompt_or_body, status: int, code: str | None = None, **kw) -> dict:
    body = prompt_or_body if isinstance(prompt_or_body, bytes) or "prompt" in prompt_or_body \
        else {"prompt": prompt_or_body}
    st, answer, dt = post_check(worker, body, **kw)
    assert st == status, (st, str(answer)[:500])
    err = answer["error"]
    for f in ("code", "type", "message", "expected", "actual", "fix"):
        assert f in err, (f, err)
    assert err["message"] and err["fix"], err
    assert "recursion" not in json.dumps(err)
    if code is not None:
        assert err["code"] == code, err
    assert dt < QUICK_S, f"refusal took {dt:.1f} s"
    return err


def base(**kw):
    return t2v_reuse(**{"seed": 1, "prompt_text": "bounds", "cache_name": "bounds", **SMALL, **kw})


def chain(n_total: int, tail: str = "101") -> dict:
    """The T2V reuse graph with a chain of ConditioningSetTimestepRange between the text encoder
    and the Encode-or-Reuse node, n_total nodes in all."""
    p = base()
    prev = T2V.POS
    for i in range(n_total - len(p)):
        nid = str(5000 + i)
        p[nid] = {"class_type": "ConditioningSetTimestepRange",
                  "inputs": {"conditioning": link(prev), "start": 0.0, "end": 1.0}}
        prev = nid
    p[tail]["inputs"]["value"] = link(prev)
    return p


def seg_prompt(**start):
    p = segment_graph("seg.png", 1, cache_name="boundsseg", F=5, M=1, total_frames=13, steps=1, audio=False)
    p[SEG.START]["inputs"].update(start)
    return p


# ---------------------------------------------------------------- limits (413)

def test_node_count_limit(w):
    st, answer, _ = post_check(w, {"prompt": chain(2000)})      # at the limit: answered
    assert st == 200 and answer["nodes"]["101"]["will"] == "fail"   # (its key is too large: below)
    err = refused(w, chain(2001), 413, "request_too_large")
    assert "2000" in err["message"] and err["actual"] == 2001
    err = refused(w, chain(10_000), 413, "request_too_large")     # the old walk: "maximum recursion depth"
    assert err["actual"] == 10_000


def test_body_size_limit(w):
    p = base(prompt_text="x" * (17 << 20))
    err = refused(w, {"prompt": p}, 413, "request_too_large")
    assert "bytes" in err["message"]
    refused(w, {"prompt": p}, 413, "request_too_large", chunked=True)   # no Content-Length
    st, _, _ = post_check(w, {"prompt": base(prompt_text="x" * (4 << 20))})
    assert st == 200


def nested(depth):
    v = 0
    for _ in range(depth):
        v = [v]
    return v


def test_nesting_depth_limit(w):
    p = base()
    p[T2V.POS]["inputs"]["extra"] = nested(900)                 # the old dry run: 500 (deepcopy recursion)
    err = refused(w, p, 413, "request_too_large")
    assert "nesting" in err["message"] and "'extra'" in err["message"] and "32" in err["message"]
    p[T2V.POS]["inputs"]["extra"] = nested(33)
    refused(w, p, 413, "request_too_large")
    p[T2V.POS]["inputs"]["extra"] = nested(32)
    st, answer, _ = post_check(w, {"prompt": p})
    assert st == 200 and answer["nodes"]["101"]["will"] == "encode"


def test_key_size_limits(w):
    # one key: a 2000-node chain's field names (paths) would be ~80 M characters -> that node fails
    st, answer, dt = post_check(w, {"prompt": chain(2000)})
    a = answer["nodes"]["101"]
    assert st == 200 and a["will"] == "fail" and a["error"]["code"] == "graph_too_large", a
    assert "characters" in a["reason"] and dt < QUICK_S
    # all keys together: 8 reuse nodes at the end of a 700-node chain (~10 M characters each)
    p = chain(700)
    end = p["101"]["inputs"]["value"]
    for i in range(8):
        p[str(300 + i)] = {"class_type": "SeedReuseEncodeConditioning",
                           "inputs": {"session": link("100"), "slot": f"s{i}", "value": end}}
    err = refused(w, p, 413, "request_too_large")
    assert "keys" in err["message"]


def test_a_chain_longer_than_the_old_recursion_limit_gets_its_key(w):
    t0 = time.perf_counter()
    st, answer, _ = post_check(w, {"prompt": chain(1200)})       # the old walk: RecursionError at ~1000
    a = answer["nodes"]["101"]
    assert st == 200 and a["will"] == "encode" and len(a["key"]) == 64, a
    assert time.perf_counter() - t0 < 30


# ---------------------------------------------------------------- invalid prompts (400)

def test_class_type_null(w):
    p = base()
    p["60"] = {"class_type": None, "inputs": {}}                # the old dry run: 500 AttributeError
    err = refused(w, p, 400, "invalid_request")
    assert "'60'" in err["message"] and "null" in err["message"]
    del p["60"]["class_type"]                                    # absent: an unknown node, accepted
    st, _, _ = post_check(w, {"prompt": p})
    assert st == 200


@pytest.mark.parametrize("shape", ["self", "encode_self", "three"])
def test_cycles_name_their_nodes(w, shape):
    p = base()
    if shape == "self":           # the old dry run: "encode", as if the graph could run
        p["60"] = {"class_type": "ConditioningSetTimestepRange",
                   "inputs": {"conditioning": link("60"), "start": 0.0, "end": 1.0}}
        p["101"]["inputs"]["value"] = link("60")
        cycle = ["60"]
    elif shape == "encode_self":  # the old dry run: "maximum recursion depth exceeded"
        p["101"]["inputs"]["value"] = link("101")
        cycle = ["101"]
    else:
        for a, b in (("61", "62"), ("62", "63"), ("63", "61")):
            p[a] = {"class_type": "ConditioningSetTimestepRange",
                    "inputs": {"conditioning": link(b), "start": 0.0, "end": 1.0}}
        p["101"]["inputs"]["value"] = link("61")
        cycle = ["61", "62", "63"]
    err = refused(w, p, 400, "graph_cycle")
    got = err["details"]["cycle"]
    assert sorted(got) == sorted(cycle) and all(f"node {n}" in err["message"] for n in cycle), err
    assert got == cycle[cycle.index(got[0]):] + cycle[:cycle.index(got[0])]   # in link order


# ---------------------------------------------------------------- schema ranges (400)

def test_total_frames_beyond_the_schema_max(w):
    # the old dry run: 8-22 s, a 72-275 MB answer with a P(N) for each of 7.5 M segments
    err = refused(w, seg_prompt(total_frames=30_000_000), 400, "invalid_request")
    assert "total_frames must be <= 10000000" in err["message"] and err["details"]["input"] == "total_frames"
    assert err["details"]["node"] == SEG.START and "fix" in err and "total_frames" in err["fix"]
    err = refused(w, seg_prompt(motion_frames=-1), 400)
    assert "motion_frames must be >= 0" in err["message"]
    err = refused(w, seg_prompt(fps=0), 400)
    assert "fps must be >= 0.01" in err["message"]


def test_large_segment_counts_are_listed_in_bounds(w):
    st, answer, dt = post_check(w, {"prompt": seg_prompt(segment_frames=2, motion_frames=1, total_frames=10_000_000)})
    a = answer["segments"][SEG.START]
    assert st == 200 and a["S"] == 9_999_999 and len(a["prefix_frames_by_n"]) == a["listed_segments"] == 10_000
    assert a["prefix_frames_by_n"][9_999] == 9_999 + 1 and dt < QUICK_S


def test_host_node_ranges_as_comfyui_checks_them(w):
    p = base()
    p["50"] = {"class_type": "ConditioningSetTimestepRange", "inputs": {"conditioning": link(T2V.POS), "start": 0.0,
                                                                        "end": 2.5}}
    p["101"]["inputs"]["value"] = link("50")
    err = refused(w, p, 400)
    assert err["details"]["node"] == "50" and err["details"]["input"] == "end"
    assert "end must be <= 1.0; got 2.5" in err["message"]
    p = base()
    p[T2V.SAMPLER]["inputs"]["steps"] = 0
    err = refused(w, p, 400)
    assert "steps must be >= 1" in err["message"] and err["details"]["class_type"] == "KSampler"


def test_self_validated_inputs_and_conversions_agree_with_comfyui(w):
    def sink(ct, n, x=0.5):
        return {"1": {"class_type": ct, "inputs": {"n": n, "x": x}}}

    cases = [("BoundsTestSink", 50, 0.5, False),        # n > max: ComfyUI refuses
             ("BoundsTestSink", 5, 1.5, False),         # x > max
             ("BoundsTestSelfChecked", 50, 0.5, True),  # n validated by the class: no min/max
             ("BoundsTestSelfChecked", 5, 1.5, False),  # ... but x still
             ("BoundsTestSink", 2.7, 0.5, True),        # a host node: ComfyUI takes int(2.7) == 2
             ("BoundsTestSink", True, 0.5, True),
             ("BoundsTestSink", "3", 0.5, True),
             ("BoundsTestSink", "abc", 0.5, False)]     # int("abc") fails
    for ct, n, x, ok in cases:
        st, answer, _ = post_check(w, {"prompt": sink(ct, n, x)})
        try:
            w.queue(sink(ct, n, x))
            accepted = True
        except PromptRejected:
            accepted = False
        assert accepted == ok, (ct, n, x, "ComfyUI")
        assert (st == 200) == ok, (ct, n, x, answer)


# ---------------------------------------------------------------- exact integers (POST /prompt and dry run)

BAD_N = [(1.5, "must be a whole number", "1.5"), (2.7, "must be a whole number", "2.7"),
         (True, "must be a whole number, not true/false", "true"), ("2", "must be a number, not text", "'2'"),
         (-2, "must be >= -1", "-2"), (100001, "must be <= 100000", "100001")]


@pytest.mark.parametrize("value,why,shown", BAD_N, ids=[repr(b[0]) for b in BAD_N])
def test_reuse_prefix_segments_is_validated_exactly(w, value, why, shown):
    p = base()
    p["100"]["inputs"]["reuse_prefix_segments"] = value
    with pytest.raises(PromptRejected) as ei:       # the old node: ran as 1, 2, 1, 2; -1 / 100001 ran too
        w.queue(p)
    assert ei.value.status == 400
    errors = ei.value.node_errors["100"]["errors"]
    text = json.dumps(errors)
    assert f"reuse_prefix_segments {why}; got {shown}" in text, text
    assert "allowed: an integer from -1 to 100000" in text and "fix: set reuse_prefix_segments" in text
    assert "smaller than the segment count" not in text
    # the dry run refuses it the same way
    err = refused(w, p, 400, "invalid_request")
    assert f"reuse_prefix_segments {why}; got {shown}" in err["message"] and err["details"]["node"] == "100"


@pytest.mark.parametrize("value", [-1, 1e30], ids=["-1", "1e30"])
def test_from_take_refusals_name_from_take(w, value):
    """Issue 27: from_take of -1 or 1e30 was refused by the Session's validate_inputs, which
    ComfyUI files under every input the function takes (the first, cache_name, in the UI)."""
    p = base()
    p["100"]["inputs"]["from_take"] = value
    with pytest.raises(PromptRejected) as ei:
        w.queue(p)
    assert ei.value.status == 400
    errors = ei.value.node_errors["100"]["errors"]
    assert {e["extra_info"]["input_name"] for e in errors} == {"from_take"}, errors
    text = json.dumps(errors)
    assert "from_take must be" in text and "fix: set from_take" in text, text


def test_segment_loop_integers_are_exact(w):
    p = seg_prompt(segment_frames=5.5)          # the old node: int(5.5) == 5, silently
    with pytest.raises(PromptRejected) as ei:
        w.queue(p)
    text = json.dumps(ei.value.node_errors[SEG.START]["errors"])
    assert "segment_frames must be a whole number; got 5.5 (allowed: an integer from 2 to 10000)" in text
    err = refused(w, p, 400)
    assert "segment_frames must be a whole number" in err["message"]


def test_integral_numbers_are_accepted(w):
    p = base()
    p["100"]["inputs"]["reuse_prefix_segments"] = 0.0     # what a client may send for 0
    st, answer, _ = post_check(w, {"prompt": p})
    assert st == 200 and answer["nodes"]["101"]["will"] == "encode"
    w.run(p).raise_for_status()


def test_keys_at_execution_match_the_dry_run_for_deep_and_shared_graphs(w):
    """The iterative walk gives the keys execution computes (a chain with a diamond)."""
    p = chain(60)
    first = p["101"]["inputs"]["value"][0]
    p["70"] = {"class_type": "ConditioningCombine",
               "inputs": {"conditioning_1": link(first), "conditioning_2": link("5010")}}
    p["101"]["inputs"]["value"] = link("70")
    p["100"]["inputs"]["cache_name"] = "boundsdeep"
    st, answer, _ = post_check(w, {"prompt": p})
    assert st == 200 and answer["nodes"]["101"]["will"] == "encode", answer
    w.run(p).raise_for_status()
    committed = w.get_json("/seedreuse/caches/boundsdeep")["slots"]["positive"]["key"]
    assert committed == answer["nodes"]["101"]["key"]
    p[T2V.SAMPLER]["inputs"]["seed"] = 2
    st, answer, _ = post_check(w, {"prompt": p})
    assert answer["nodes"]["101"]["will"] == "reuse"
