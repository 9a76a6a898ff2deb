"""The key mutation checker: does every wrapped value's reuse key change when, and only when,
something it depends on changes?

The oracle is independent of the key's implementation: it reads the prompt's links and the
host's schemas (``/object_info`` entries) and decides, for one mutation at a time, which slots'
keys must change:

- a literal input of a node upstream of the slot (every node reachable from the slot's value
  through links, other Encode-or-Reuse nodes transparent) must change the key, whatever its
  name (seeds too); the pack's own controls on the pack's own nodes must not;
- a literal input of a node that is not upstream (the main sampler's seed, steps, cfg, the save
  prefix) must not change it, unless a node upstream reads the whole prompt (a class declaring
  the hidden ``prompt`` / ``dynprompt``): then everything but the pack's controls must;
- removing an optional literal input: as changing it;
- the host's change token (IS_CHANGED / fingerprint_inputs) set on a node: as a literal;
- renumbering a node (the canvas does it): changes the key only where that node's class receives
  its id (hidden ``unique_id``, or ``NOT_IDEMPOTENT``) or a prompt reader is upstream;
- the workflow metadata (``extra_pnginfo``): changes the key only where a class upstream
  declares it.

``check(prompt, schemas, keys_of)`` runs every mutation of one API-format prompt and returns a
report; ``keys_of(prompt, extra_pnginfo) -> {Encode-or-Reuse node id: key digest}`` is the pack's own key
function (run inside a host process: the stand-in pack's ``/seedreuse_test/key_mutations``
route). A mismatch is either *stale* (the key kept its value although an input it depends on
changed: a wrong hit, the worst outcome) or *over* (it changed although nothing it depends on
did: a needless miss). Host-free: no ComfyUI import here.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

ENCODE_PREFIX = "SeedReuseEncode"
SESSION = "SeedReuseSession"
# the pack's own controls (reuse_backend/keys/graph_key.py: the only inputs a key leaves out), by
# class; "*" = every input of that class
PACK_CONTROLS = {SESSION: "*", "SeedReuseSegmentLoopStart": {"session", "seed"},
                 "SeedReuseBoundarySave": {"loop"}, "SeedReusePrefixMerge": {"session", "filename_prefix"}}
ENCODE_CONTROLS = {"session", "slot"}
MAX_LISTED = 20


def is_link(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int)


def is_control(class_type: str, name: str) -> bool:
    if isinstance(class_type, str) and class_type.startswith(ENCODE_PREFIX):
        return name in ENCODE_CONTROLS
    got = PACK_CONTROLS.get(class_type)
    return got == "*" or (got is not None and name in got)


def upstream(prompt: dict, link) -> set:
    """Node ids upstream of ``link`` (its node included), following every link but the pack's
    controls (an Encode-or-Reuse node is followed through its value only)."""
    out, todo = set(), [link[0]] if is_link(link) else []
    while todo:
        nid = todo.pop()
        node = prompt.get(nid)
        if nid in out or not isinstance(node, dict):
            continue
        ct = node.get("class_type", "")
        if isinstance(ct, str) and ct.startswith(ENCODE_PREFIX):
            v = (node.get("inputs") or {}).get("value")
            todo.extend([v[0]] if is_link(v) else [])
            continue          # transparent: not itself upstream
        out.add(nid)
        for name, v in (node.get("inputs") or {}).items():
            if is_link(v) and not is_control(ct, name):
                todo.append(v[0])
    return out


def hidden_of(schema: dict | None) -> set:
    """The hidden values a class declares (``unique_id``, ``prompt``, ``dynprompt``,
    ``extra_pnginfo``), from its ``/object_info`` entry."""
    names = {"UNIQUE_ID": "unique_id", "PROMPT": "prompt", "DYNPROMPT": "dynprompt", "EXTRA_PNGINFO": "extra_pnginfo"}
    hidden = ((schema or {}).get("input") or {}).get("hidden") or {}
    kinds = [v[0] if isinstance(v, (list, tuple)) and v else v for v in hidden.values()]   # V1 "X", V3 ["X"]
    return {names[v] for v in kinds if isinstance(v, str) and v in names}


def declared(schema: dict | None) -> dict:
    """name -> (spec, optional) of a class's declared inputs (dotted names of a dynamic combo's
    options included, as API prompts carry them)."""
    out: dict = {}

    def walk(inp: dict, prefix: str):
        for section in ("required", "optional"):
            for name, spec in ((inp or {}).get(section) or {}).items():
                out[prefix + name] = (spec, section == "optional")
                opts = spec[1] if isinstance(spec, (list, tuple)) and len(spec) > 1 and isinstance(spec[1], dict) else {}
                for o in opts.get("options") or []:
                    if isinstance(o, dict) and isinstance(o.get("inputs"), dict):
                        walk(o["inputs"], f"{prefix}{name}.")
    walk((schema or {}).get("input") or {}, "")
    return out


def mutate_value(value, spec=None):
    """Another value for a literal input: a combo's next allowed option, else a changed value of
    the same kind (None when nothing differs can be made)."""
    options = None
    if isinstance(spec, (list, tuple)) and spec:
        if isinstance(spec[0], list):
            options = spec[0]
        elif spec[0] == "COMBO" and len(spec) > 1 and isinstance(spec[1], dict):
            options = spec[1].get("options")
    if isinstance(options, list) and len(options) > 1:
        other = [o for o in options if o != value]
        if other:
            return other[0]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, list):
        return [*value, 0]
    if isinstance(value, dict):
        return {**value, "seedreuse_mutation": 1}
    if value is None:
        return "~"
    return None


@dataclass
class Report:
    slots: list = field(default_factory=list)           # slot names
    mutations: int = 0
    checks: int = 0                                      # mutations x slots judged
    expected_changes: int = 0
    by_kind: dict = field(default_factory=dict)          # mutation kind -> count
    stale: list = field(default_factory=list)            # expected a change, none: a wrong hit
    over: list = field(default_factory=list)             # a change where none was expected
    unmutable: list = field(default_factory=list)        # literal inputs no other value was found for
    required: set = field(default_factory=set)           # "class.input" mutations some key had to follow

    def to_dict(self) -> dict:
        return {"slots": self.slots, "mutations": self.mutations, "checks": self.checks,
                "expected_changes": self.expected_changes, "by_kind": self.by_kind,
                "stale": self.stale[:MAX_LISTED], "stale_count": len(self.stale),
                "over": self.over[:MAX_LISTED], "over_count": len(self.over),
                "unmutable": self.unmutable[:MAX_LISTED], "required": sorted(self.required)}


def _slots(prompt: dict) -> dict:
    """slot name -> Encode-or-Reuse node id."""
    out = {}
    for nid, node in prompt.items():
        ct = node.get("class_type", "") if isinstance(node, dict) else ""
        slot = (node.get("inputs") or {}).get("slot") if isinstance(node, dict) else None
        if isinstance(ct, str) and ct.startswith(ENCODE_PREFIX) and isinstance(slot, str):
            out[slot] = nid
    return out


def _renumbered(prompt: dict, old: str, new: str) -> dict:
    out = {}
    for nid, node in prompt.items():
        node = copy.deepcopy(node)
        for name, v in (node.get("inputs") or {}).items():
            if is_link(v) and v[0] == old:
                node["inputs"][name] = [new, v[1]]
        out[new if nid == old else nid] = node
    return out


def check(prompt: dict, schemas: dict, keys_of, *, extra_pnginfo=None, not_idempotent=frozenset()) -> Report:
    """Every mutation of ``prompt`` (API format, already made reusable), judged per slot."""
    slots = _slots(prompt)
    rep = Report(slots=sorted(slots))
    if not slots:
        return rep
    base = keys_of(prompt, extra_pnginfo)
    ups = {s: upstream(prompt, (prompt[nid].get("inputs") or {}).get("value")) for s, nid in slots.items()}
    hidden = {nid: hidden_of(schemas.get(node.get("class_type"))) for nid, node in prompt.items()}
    readers = {s: any(hidden[n] & {"prompt", "dynprompt"} for n in ups[s]) for s in slots}

    def judge(kind: str, where: dict, mutated: dict, expect, extra=extra_pnginfo, rename: dict | None = None):
        got = keys_of(mutated, extra)
        if rename:                      # a renumbered node: its key read under its old id
            got = {rename.get(k, k): v for k, v in got.items()}
        rep.mutations += 1
        rep.by_kind[kind] = rep.by_kind.get(kind, 0) + 1
        for s in slots:
            want = expect(s)
            rep.checks += 1
            rep.expected_changes += bool(want)
            if want:
                rep.required.add(f"{where['class_type']}.{where['input']}")
            changed = got.get(slots[s]) != base.get(slots[s])
            if want and not changed:
                rep.stale.append({"slot": s, "kind": kind, **where})
            elif changed and not want:
                rep.over.append({"slot": s, "kind": kind, **where})

    for nid, node in prompt.items():
        if not isinstance(node, dict):
            continue
        ct = node.get("class_type", "")
        specs = declared(schemas.get(ct))
        for name, v in (node.get("inputs") or {}).items():
            if is_link(v):
                continue
            control = is_control(ct, name)

            def expect(s, nid=nid, control=control):
                return not control and (nid in ups[s] or readers[s])
            where = {"node": nid, "class_type": ct, "input": name}
            spec, optional = specs.get(name, (None, False))
            new = mutate_value(v, spec)
            if new is None or new == v:
                rep.unmutable.append(where)
            else:
                m = copy.deepcopy(prompt)
                m[nid]["inputs"][name] = new
                judge("literal", {**where, "before": _short(v), "after": _short(new)}, m, expect)
            if optional:
                m = copy.deepcopy(prompt)
                del m[nid]["inputs"][name]
                judge("optional removed", where, m, expect)
        if isinstance(ct, str) and not ct.startswith("SeedReuse"):
            m = copy.deepcopy(prompt)
            m[nid]["is_changed"] = ["seedreuse-mutation"]
            judge("change token", {"node": nid, "class_type": ct, "input": "#is_changed"}, m,
                  lambda s, nid=nid: nid in ups[s])
        new_id = f"{nid}9"
        while new_id in prompt:
            new_id += "9"
        by_id = bool(hidden[nid] & {"unique_id"}) or ct in not_idempotent
        judge("renumbered", {"node": nid, "class_type": ct, "input": "#id", "after": new_id},
              _renumbered(prompt, nid, new_id), lambda s, nid=nid, by_id=by_id: (by_id and nid in ups[s]) or readers[s],
              rename={new_id: nid})
    judge("extra_pnginfo", {"node": "", "class_type": "", "input": "extra_pnginfo"}, prompt,
          lambda s: any(hidden[n] & {"extra_pnginfo"} for n in ups[s]),
          extra={"workflow": {"seedreuse_mutation": 1}, "was": extra_pnginfo})
    return rep


def _short(v):
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."
