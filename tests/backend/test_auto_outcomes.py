"""Automatic mode's report of a prompt that succeeded (reuse_backend/workflow/auto.outcomes): per
wrapped output what its Encode-or-Reuse node did, from the node's payload; a wrapper that did not
execute is "not run", never counted as reused or encoded."""
from __future__ import annotations

from reuse_backend.workflow import auto

REPORT = {"applied": True, "cache": "auto-x", "wrapped": [
    {"slot": "positive", "node": "7", "type": "CONDITIONING", "producer": {"node": "6", "class_type": "CLIPTextEncode"}},
    {"slot": "clip_vision", "node": "9:12", "type": "CLIP_VISION_OUTPUT",
     "producer": {"node": "9:3", "class_type": "CLIPVisionEncode"}},
    {"slot": "negative", "node": "8", "type": "CONDITIONING", "producer": {"node": "5", "class_type": "CLIPTextEncode"}},
]}


def test_each_wrapped_output_says_what_it_did_in_the_reports_order():
    got = auto.outcomes(REPORT, {
        "7": {"action": "reused", "saved_seconds": 1.234567, "load_seconds": 0.0123456, "slot": "positive"},
        "9:12": {"action": "encoded", "encode_seconds": 0.5},
    })
    assert got["outputs"] == [
        {"slot": "positive", "node": "7", "producer": "CLIPTextEncode", "action": "reused",
         "saved_seconds": 1.2346, "load_seconds": 0.0123},
        {"slot": "clip_vision", "node": "9:12", "producer": "CLIPVisionEncode", "action": "encoded",
         "encode_seconds": 0.5},
        {"slot": "negative", "node": "8", "producer": "CLIPTextEncode", "action": auto.NOT_RUN},
    ]
    assert (got["reused"], got["encoded"], got["not_run"], got["saved_seconds"]) == (1, 1, 1, 1.2346)


def test_nothing_executed_means_nothing_reused_nor_saved():
    got = auto.outcomes(REPORT, {})
    assert [o["action"] for o in got["outputs"]] == [auto.NOT_RUN] * 3
    assert (got["reused"], got["encoded"], got["not_run"], got["saved_seconds"]) == (0, 0, 3, 0.0)
    assert auto.outcomes({"applied": False}, {})["outputs"] == []
