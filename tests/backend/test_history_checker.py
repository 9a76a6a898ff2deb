"""The randomized history test's checker (tests/object_store/history_check.py) finds a violation of
each invariant in a recorded history, and none in a clean one: synthetic histories, as the actors
and the harness record them (the real histories run against RGW in the object-store tier)."""
from __future__ import annotations

import pytest

from tests.object_store import history_check
from tests.object_store.history_check import check


def _commit(op, t0, t1, text, image, outcome="ok", version=None, actor="w1"):
    run = f"{actor}-{op}"
    return [{"t": t0, "op": op, "kind": "commit", "phase": "invoke", "run": run, "actor": actor},
            {"t": t0 + 0.01, "op": op, "kind": "staged", "phase": "note", "run": run, "text": text, "image": image,
             "actor": actor},
            {"t": t1, "op": op, "kind": "commit", "phase": outcome, "run": run, "version": version or f"v-{op}",
             "message": "x", "actor": actor}]


def _read(op, t0, t1, text, image, run, version, **kw):
    return [{"t": t0, "op": op, "kind": "read", "phase": "invoke", "actor": "r1"},
            {"t": t1, "op": op, "kind": "read", "phase": "ok", "version": version, "text": text, "image": image,
             "run": run, "actor": "r1", **kw}]


def _reset(kind, t0, t1):
    return [{"t": t0, "op": kind, "kind": kind, "phase": "invoke", "actor": "harness"},
            {"t": t1, "op": kind, "kind": kind, "phase": "ok", "actor": "harness"}]


CLEAN = _commit("a", 1, 2, 1.0, -1.0) + _read("r", 3, 4, 1.0, -1.0, "w1-a", "v-a")

BROKEN = {
    "a failed run's version is read": (_commit("a", 1, 2, 1.0, -1.0, outcome="fail")
                                       + _read("r", 3, 4, 1.0, -1.0, "w1-a", "v-a"), history_check.SUCCESSFUL_ONLY),
    "another version than its run reported": (_commit("a", 1, 2, 1.0, -1.0) + _read("r", 3, 4, 1.0, -1.0, "w1-a", "v-x"),
                                              history_check.SUCCESSFUL_ONLY),
    "a slot of another run": (_commit("a", 1, 2, 1.0, -1.0) + _read("r", 3, 4, 1.0, -7.0, "w1-a", "v-a"),
                              history_check.NAMED_ONLY),
    "a missing object without a wipe": (_commit("a", 1, 2, 1.0, -1.0)
                                        + [{"t": 3, "op": "r", "kind": "read", "phase": "invoke", "actor": "r1"},
                                           {"t": 4, "op": "r", "kind": "read", "phase": "fail", "missing": True,
                                            "message": "missing from the bucket", "actor": "r1"}],
                                        history_check.NOTHING_LOST),
    "a version from before a wipe": (_commit("a", 1, 2, 1.0, -1.0) + _reset("wipe", 3, 4)
                                     + _read("r", 5, 6, 1.0, -1.0, "w1-a", "v-a"), history_check.NOTHING_LOST),
    "a version from before a clear": (_commit("a", 1, 2, 1.0, -1.0) + _reset("clear", 3, 4)
                                      + _read("r", 5, 6, 1.0, -1.0, "w1-a", "v-a"), history_check.NOTHING_LOST),
}


def test_a_clean_history_has_no_violation():
    bad, counts = check(CLEAN)
    assert bad == [] and counts == {"commit ok": 1, "read ok": 1}


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_checker_finds_each_violation(case):
    events, invariant = BROKEN[case]
    bad, _ = check(events)
    assert bad and all(b.startswith(invariant) for b in bad), bad


def test_a_killed_writers_open_commit_is_an_unknown_outcome_not_a_failure():
    events = _commit("a", 1, 2, 1.0, -1.0)[:2] + [{"t": 2.5, "op": "w1/killed", "kind": "killed", "phase": "note",
                                                    "actor": "w1"}] + _read("r", 3, 4, 1.0, -1.0, "w1-a", "v-a")
    bad, counts = check(events)
    assert bad == [] and counts["commit info"] == 1
