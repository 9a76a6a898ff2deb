"""Two users on one ``--multi-user`` server cannot see, read, reuse or replace each other's caches.

Tried as each user would: the same cache name through the Session node (auto and require),
the routes (list, inspect), the dry run, a prompt body that claims the other user in
``extra_data``, and a client that sends no user at all. Also the operator setting
``SEEDREUSE_SHARED_NAMESPACE=1`` (one namespace for a single-tenant service). Without
``--multi-user`` every other test of the suite runs, with caches directly under the root.
"""
from __future__ import annotations

import uuid

import pytest

from seedreuse_lab.graphs import T2V
from seedreuse_lab.reuse_graphs import t2v_reuse

pytestmark = pytest.mark.comfy

SMALL = dict(width=32, height=32, length=5, steps=1)
NAME = "talk"     # both users name their cache the same


def as_user(w, user):
    w.headers = {"comfy-user": user} if user else {}
    return w


def new_user(w, name: str) -> str:
    as_user(w, None)
    return w.post_json("/users", {"username": f"{name}-{uuid.uuid4().hex[:6]}"})


def encodes(res) -> dict:
    return {e["data"]["slot"]: e["data"]["action"] for e in res.events_of("seedreuse.slot")}


def version(w, name=NAME):
    return w.get_json(f"/seedreuse/caches/{name}")["version"]


@pytest.fixture(scope="module")
def server(module_workers):
    w = module_workers.one(extra_args=["--multi-user"])
    alice, bob = new_user(w, "alice"), new_user(w, "bob")
    return w, alice, bob, module_workers.cache_root


def test_users_are_isolated(server):
    w, alice, bob, root = server
    # alice makes her cache
    res = as_user(w, alice).run(t2v_reuse(1, "alice's prompt", cache_name=NAME, **SMALL)).raise_for_status()
    assert encodes(res) == {"positive": "encoded"}
    assert (root / ".users" / alice / NAME).is_dir() and not (root / NAME).exists()
    v_alice = version(w)
    assert w.get_json("/seedreuse/caches")["caches"] == [NAME]

    # bob: same cache name, same prompt text (the key would match alice's), require -> no cache
    as_user(w, bob)
    assert w.get_json("/seedreuse/caches")["caches"] == []
    assert w.get_json(f"/seedreuse/caches/{NAME}") == {"name": NAME, "committed": False}
    answer = w.post_json("/seedreuse/check", {"prompt": t2v_reuse(2, "alice's prompt", cache_name=NAME,
                                                                   reuse="require", **SMALL)})
    assert answer["nodes"]["101"]["will"] == "fail", answer["nodes"]["101"]
    res = w.run(t2v_reuse(2, "alice's prompt", cache_name=NAME, reuse="require", **SMALL))
    assert res.status == "error" and "no successful run" in res.error["exception_message"], res.error
    assert T2V.SAMPLER not in res.executed

    # bob with auto encodes into his own namespace; alice's cache is untouched
    res = w.run(t2v_reuse(3, "alice's prompt", cache_name=NAME, **SMALL)).raise_for_status()
    assert encodes(res) == {"positive": "encoded"}
    v_bob = version(w)
    assert v_bob != v_alice and (root / ".users" / bob / NAME).is_dir()
    assert version(as_user(w, alice)) == v_alice

    # a prompt body claiming alice in extra_data still runs as bob (the header decides)
    as_user(w, bob)
    res = w.run(t2v_reuse(4, "bob's new prompt", cache_name=NAME, **SMALL),
                extra_data={"seedreuse_user": alice}).raise_for_status()
    assert encodes(res) == {"positive": "encoded"}
    assert version(as_user(w, alice)) == v_alice
    assert version(as_user(w, bob)) not in (v_bob, v_alice)

    # the dry run answers from the requesting user's namespace only
    def will(user, text):
        p = t2v_reuse(9, text, cache_name=NAME, reuse="require", **SMALL)
        return as_user(w, user).post_json("/seedreuse/check", {"prompt": p})["nodes"]["101"]["will"]
    assert will(bob, "bob's new prompt") == "reuse"
    assert will(alice, "bob's new prompt") == "fail"
    assert will(alice, "alice's prompt") == "reuse"

    # alice reuses her own cache (require) and is not affected by bob's runs
    res = as_user(w, alice).run(t2v_reuse(5, "alice's prompt", cache_name=NAME, reuse="require",
                                          **SMALL)).raise_for_status()
    assert encodes(res) == {"positive": "reused"}


def test_no_user_gets_the_shared_namespace(server):
    w, alice, _bob, root = server
    as_user(w, None)
    assert w.get_json("/seedreuse/caches")["caches"] == []
    res = w.run(t2v_reuse(6, "alice's prompt", cache_name=NAME, reuse="require", **SMALL))
    assert res.status == "error", "a prompt without a user reused a user's cache"
    res = w.run(t2v_reuse(7, "anonymous", cache_name="anon", **SMALL)).raise_for_status()
    assert (root / "anon").is_dir()
    assert "anon" not in as_user(w, alice).get_json("/seedreuse/caches")["caches"]


def test_shared_namespace_setting(comfy_workers):
    w = comfy_workers.one(extra_args=["--multi-user"], env={"SEEDREUSE_SHARED_NAMESPACE": "1"})
    alice, bob = new_user(w, "alice"), new_user(w, "bob")
    as_user(w, alice).run(t2v_reuse(1, "one team", cache_name=NAME, **SMALL)).raise_for_status()
    res = as_user(w, bob).run(t2v_reuse(2, "one team", cache_name=NAME, reuse="require", **SMALL))
    assert encodes(res.raise_for_status()) == {"positive": "reused"}
    assert (comfy_workers.cache_root / NAME).is_dir()
    assert not (comfy_workers.cache_root / ".users").exists()
