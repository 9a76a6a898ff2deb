"""The iterative graph walk (graph_key.describe_upstream): the same fields, in the same order,
as the recursive walk it replaced, for every graph that walk could describe; and clear errors
(cycles with their node ids, limits) where the recursive walk hit Python's recursion limit."""
from __future__ import annotations

import random
import uuid

import pytest

from reuse_backend.keys import graph_key, graph_limits
from reuse_backend.keys.key import ReuseKey


# ---------------------------------------------------------------- the walk before the rewrite
# (verbatim logic of the recursive describe_upstream, as the oracle for byte-identical keys)

def recursive_describe_upstream(prompt, link, *, label="value", resolver=None,
                                exclude_inputs=(), skip_inputs=None,
                                passthrough=None, ignore_change_token=None):
    exclude = frozenset(exclude_inputs)
    skip = {k: frozenset(v) for k, v in (skip_inputs or {}).items()}
    passthrough = passthrough or {}
    fields: dict = {}
    seen: dict = {}

    def visit(lnk, path, depth):
        node_id, out_index = lnk
        node = prompt.get(node_id)
        if not isinstance(node, dict) or "class_type" not in node:
            raise graph_limits.GraphError(f"{path}: link to missing node {node_id!r}")
        ct = node["class_type"]
        inputs = node.get("inputs") or {}
        if ct in passthrough and graph_key.is_link(inputs.get(passthrough[ct])):
            return visit(inputs[passthrough[ct]], path, depth + 1)
        if node_id in seen:
            fields[path] = {"same_node_as": seen[node_id], "output": out_index}
            return
        seen[node_id] = path
        fields[path] = f"{ct}#{out_index}"
        ic = node.get("is_changed")
        if ignore_change_token is not None and ignore_change_token(ct):
            ic = None
        if ic not in (None, False, [None], [False]):
            fields[f"{path}#is_changed"] = ic
        skipped = skip.get(ct, frozenset())
        for name in sorted(inputs):
            if name in exclude or name in skipped:
                continue
            v = inputs[name]
            if graph_key.is_link(v):
                visit(v, f"{path}.{name}", depth + 1)
                continue
            fields[f"{path}:{name}"] = v
            if resolver is not None and isinstance(v, str):
                ident = resolver(ct, name, v)
                if ident is not None:
                    fields[f"{path}:{name}@content"] = ident

    visit(link, label, 0)
    return fields


# ---------------------------------------------------------------- random graphs

NAMES = ["clip", "model", "a", "b", "text", "seed", "x.y", "x", "y:z", "image", "value", "cfg"]
CLASSES = ["Loader", "Encode", "Combine", "Enc", "Enc2", "Session", "Ours"]


def random_dag(rng: random.Random, n: int) -> dict:
    prompt = {}
    for i in range(n):
        ct = rng.choice(CLASSES)
        inputs = {}
        for name in rng.sample(NAMES, rng.randint(0, 5)):
            if i and rng.random() < 0.6:
                inputs[name] = [str(rng.randrange(i)), rng.randrange(3)]   # links point backwards: a DAG
            else:
                inputs[name] = rng.choice(["a cat", "model.safetensors", 7, 1.0, 2.5, True, None,
                                           [1, [2, "x"]], {"__value__": [1, 2]}, "ref.png"])
        if ct in ("Enc", "Enc2") and i and rng.random() < 0.8:
            inputs["value"] = [str(rng.randrange(i)), 0]
        node = {"class_type": ct, "inputs": inputs}
        if rng.random() < 0.2:
            node["is_changed"] = rng.choice([["abc"], "tok", 3, [None], False])
        prompt[str(i)] = node
    return prompt


def resolver(ct, name, value):
    return f"model:{len(value)}" if value.endswith((".safetensors", ".png")) else None


KW = dict(skip_inputs={"Session": ("cache_name", "x"), "Ours": ("b",)},
          passthrough={"Enc": "value", "Enc2": "value"},
          ignore_change_token=lambda ct: ct == "Ours")


@pytest.mark.parametrize("seed", range(60))
def test_same_fields_in_the_same_order_as_the_recursive_walk(seed):
    rng = random.Random(seed)
    prompt = random_dag(rng, rng.randint(1, 120))
    for start in rng.sample(sorted(prompt, key=int), min(8, len(prompt))):
        link = [start, rng.randrange(2)]
        try:
            want = recursive_describe_upstream(prompt, link, resolver=resolver, **KW)
        except graph_limits.GraphError:
            with pytest.raises(graph_limits.GraphError):
                graph_key.describe_upstream(prompt, link, resolver=resolver, **KW)
            continue
        got = graph_key.describe_upstream(prompt, link, resolver=resolver, **KW)
        assert list(got.items()) == list(want.items())
        assert ReuseKey.build("slot", got).digest == ReuseKey.build("slot", want).digest


def test_shared_ancestors_are_described_once_and_the_walk_is_linear():
    # a ladder: every rung reads the two nodes below it (2^n paths, n nodes)
    n = 3000
    prompt = {"0": {"class_type": "Leaf", "inputs": {"text": "x"}}}
    for i in range(1, n):
        prompt[str(i)] = {"class_type": "Pair", "inputs": {"a": [str(i - 1), 0], "b": [str(max(0, i - 2)), 0]}}
    f = graph_key.describe_upstream(prompt, [str(n - 1), 0])      # 3000 deep: no recursion limit
    assert sum(1 for v in f.values() if isinstance(v, str) and v.endswith("#0")) == n
    small = {k: v for k, v in prompt.items() if int(k) < 400}
    f = graph_key.describe_upstream(small, ["399", 0])
    assert sum(1 for v in f.values() if isinstance(v, str) and v.endswith("#0")) == 400   # each node once
    assert f == recursive_describe_upstream(small, ["399", 0])


def chain(n, name="a"):
    p = {"0": {"class_type": "Leaf", "inputs": {"text": "x"}}}
    for i in range(1, n):
        p[str(i)] = {"class_type": "Step", "inputs": {name: [str(i - 1), 0], "k": i}}
    return p


def test_a_long_chain_has_no_recursion_limit():
    p = chain(2000)
    f = graph_key.describe_upstream(p, ["1999", 0])       # the recursive walk: RecursionError
    assert f["value" + ".a" * 1999] == "Leaf#0" and f["value" + ".a" * 1999 + ":text"] == "x"


def test_too_many_upstream_nodes():
    with pytest.raises(graph_limits.GraphTooLargeError, match="more than 5000 nodes"):
        graph_key.describe_upstream(chain(6000, name=""), ["5999", 0])


@pytest.mark.parametrize("cycle", [["1"], ["1", "2"], ["1", "2", "3", "4"]])
def test_a_cycle_names_its_nodes(cycle):
    p = {"0": {"class_type": "Out", "inputs": {"in": [cycle[0], 0]}}}
    for i, nid in enumerate(cycle):
        p[nid] = {"class_type": "Step", "inputs": {"a": [cycle[(i + 1) % len(cycle)], 0], "t": "x"}}
    with pytest.raises(graph_limits.GraphCycleError) as ei:
        graph_key.describe_upstream(p, ["0", 0])
    e = ei.value
    assert e.details["cycle"] == cycle
    assert "cycle" in e.message and all(f"node {n}" in e.message for n in cycle)
    assert "recursion" not in str(e) and e.fix


def test_a_cycle_through_a_passthrough_node():
    p = {"1": {"class_type": "Enc", "inputs": {"value": ["1", 0]}}}        # Encode-or-Reuse onto itself
    with pytest.raises(graph_limits.GraphCycleError) as ei:
        graph_key.describe_upstream(p, ["1", 0], passthrough={"Enc": "value"})
    assert ei.value.details["cycle"] == ["1"]
    p = {"1": {"class_type": "Step", "inputs": {"a": ["2", 0]}}, "2": {"class_type": "Enc", "inputs": {"value": ["1", 0]}}}
    with pytest.raises(graph_limits.GraphCycleError) as ei:
        graph_key.describe_upstream(p, ["1", 0], passthrough={"Enc": "value"})
    assert ei.value.details["cycle"] == ["1", "2"]


def test_deeply_nested_literal_is_refused_not_a_recursion_error():
    v = 0
    for _ in range(900):
        v = [v]
    p = {"1": {"class_type": "Step", "inputs": {"x": v}}}
    with pytest.raises(graph_limits.GraphTooLargeError, match="nested more than 32"):
        graph_key.describe_upstream(p, ["1", 0])
    ok = 0
    for _ in range(graph_limits.MAX_VALUE_DEPTH):
        ok = [ok]
    assert graph_key.describe_upstream({"1": {"class_type": "S", "inputs": {"x": ok}}}, ["1", 0])["value:x"] == ok


def test_value_shape_is_iterative():
    v = {}
    for _ in range(100_000):
        v = {"k": v}
    assert graph_limits.value_shape(v, limit=32)[0] == 33
    assert graph_limits.value_shape([1, "ab", {"c": [2]}]) == (3, graph_key.value_shape([1, "ab", {"c": [2]}])[1])


def test_shared_budget_bounds_many_keys_and_shares_resolver_answers():
    calls = []

    def res(ct, name, value):
        calls.append(value)
        return "model:x"

    p = {"0": {"class_type": "Loader", "inputs": {"clip_name": "m.safetensors"}}}
    for i in range(1, 200):
        p[str(i)] = {"class_type": "Encode", "inputs": {"clip": ["0", 0], "text": "t" * 1000}}
    with graph_limits.key_budget(10**9) as b:
        for i in range(1, 200):
            graph_key.describe_upstream(p, [str(i), 0], resolver=res)
    assert sorted(calls) == ["m.safetensors", "t" * 1000] and not b.exhausted   # each value resolved once
    with graph_limits.key_budget(50_000) as b:
        with pytest.raises(graph_limits.GraphTooLargeError, match="keys of this request"):
            for i in range(1, 200):
                graph_key.describe_upstream(p, [str(i), 0], resolver=res)
    assert b.exhausted
    graph_key.describe_upstream(p, ["1", 0])       # outside the block: no shared budget


def test_errors_are_structured():
    with pytest.raises(graph_limits.GraphError) as ei:
        graph_key.describe_upstream({}, ["9", 0])
    d = ei.value.to_dict()
    assert d["code"] == "invalid_graph" and d["message"] and d["fix"]
    assert isinstance(ei.value, ValueError)   # callers catching ValueError still do
    with pytest.raises(graph_limits.GraphError, match="not connected"):
        graph_key.describe_upstream({}, None)
    _ = uuid  # noqa


def test_walks_of_one_request_share_resolver_answers():
    """The keys of one queued prompt share file identities (PromptContext.resolved): two slots
    over the same loader resolve its file once; a new request (a new dict) asks again."""
    calls = []

    def counting(ct, name, value):
        calls.append(value)
        return f"id:{value}" if value.endswith(".safetensors") else None

    prompt = {"1": {"class_type": "CLIPLoader", "inputs": {"clip_name": "umt5.safetensors"}},
              "2": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["1", 0], "text": "a"}},
              "3": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["1", 0], "text": "b"}}}
    shared: dict = {}
    a = graph_key.describe_upstream(prompt, ["2", 0], resolver=counting, resolved=shared)
    b = graph_key.describe_upstream(prompt, ["3", 0], resolver=counting, resolved=shared)
    assert calls.count("umt5.safetensors") == 1
    assert a["value.clip:clip_name@content"] == b["value.clip:clip_name@content"] == "id:umt5.safetensors"
    graph_key.describe_upstream(prompt, ["2", 0], resolver=counting, resolved={})
    assert calls.count("umt5.safetensors") == 2
