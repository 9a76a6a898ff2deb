"""What the host's node classes say about themselves (V1 attributes, V3 schemas): the registered
class of a type, its declared inputs, its outputs, whether it is an output node, the validate
function ComfyUI's validation calls and the change-token function its cache calls.

The rest of nodes/ holds a class only as an opaque value (``node_class``) and asks these
functions, usually through ``NodeClasses`` (one answer per class and request)."""
from __future__ import annotations

import inspect

from ...reuse_backend.keys.graph_key import NO_FACTS, ClassFacts


def node_class(class_type: str):
    """The node class registered for ``class_type`` on this host, or None."""
    import nodes as comfy_nodes   # ComfyUI's node registry (the host's top-level module)
    return comfy_nodes.NODE_CLASS_MAPPINGS.get(class_type)


def _internal():
    """(comfy_api.internal._ComfyNodeInternal, first_real_override), or None on older hosts."""
    try:
        from comfy_api.internal import _ComfyNodeInternal, first_real_override as fro
    except ImportError:
        return None
    return _ComfyNodeInternal, fro


def first_real_override(cls, name: str):
    """The method ``name`` of a V3 class when a class of its MRO overrides the placeholder of its
    V3 base (what ComfyUI itself asks before calling fingerprint_inputs / validate_inputs), else
    None. On a host without comfy_api.internal.first_real_override the same walk is done here."""
    got = _internal()
    if got is not None:
        base_cls, fro = got
        return fro(cls, name) if isinstance(cls, type) and issubclass(cls, base_cls) else None
    if not hasattr(cls, "GET_BASE_CLASS"):
        return None
    base = cls.GET_BASE_CLASS()
    base_attr = getattr(base, name, None)
    base_fn = getattr(base_attr, "__func__", base_attr)
    for c in cls.mro():
        if c is base:
            return None
        if name in c.__dict__ and getattr(getattr(c, name), "__func__", None) is not base_fn:
            return getattr(cls, name)
    return None


def change_token_fn(cls):
    """The method execution.IsChangedCache calls for this class (V3 fingerprint_inputs when a
    class in its MRO overrides it, else V1 IS_CHANGED), or None."""
    if _internal() is None:   # older hosts: V3 nodes define it on the class itself
        if hasattr(cls, "GET_SCHEMA") and "fingerprint_inputs" in vars(cls):
            return cls.fingerprint_inputs
        return getattr(cls, "IS_CHANGED", None)
    return first_real_override(cls, "fingerprint_inputs") or getattr(cls, "IS_CHANGED", None)


def validate_signature(cls) -> tuple[frozenset, bool]:
    """(the arguments of the validate function execution.validate_inputs calls for ``cls``,
    whether it takes **kwargs): a V3 class's overriding ``validate_inputs``, else V1
    ``VALIDATE_INPUTS``; (frozenset(), False) for a class that validates nothing itself."""
    fn = first_real_override(cls, "validate_inputs") if hasattr(cls, "GET_BASE_CLASS") \
        else getattr(cls, "VALIDATE_INPUTS", None)
    if fn is None:
        return frozenset(), False
    spec = inspect.getfullargspec(fn)
    return frozenset(spec.args), spec.varkw is not None


def declared_inputs(cls) -> dict:
    """name -> input spec of the declared (required and optional) inputs of a node class."""
    spec = cls.INPUT_TYPES()
    return {**(spec.get("optional") or {}), **(spec.get("required") or {})}


_HIDDEN_NAMES = {"UNIQUE_ID": "unique_id", "PROMPT": "prompt", "DYNPROMPT": "dynprompt",
                 "EXTRA_PNGINFO": "extra_pnginfo"}


def class_facts(cls) -> ClassFacts:
    """What a key must know about a class beyond its inputs (graph_key.ClassFacts): the hidden
    values the host passes it (``INPUT_TYPES()["hidden"]``, V1 and V3 alike), ``NOT_IDEMPOTENT``,
    its seed widgets (``control_after_generate``) and whether it samples (a NOISE input, or a
    seed widget next to a MODEL input)."""
    spec = cls.INPUT_TYPES()
    # V1 declares {"unique_id": "UNIQUE_ID"}; a V3 schema {"unique_id": ("UNIQUE_ID",)}
    kinds = [v[0] if isinstance(v, (list, tuple)) and v else v for v in (spec.get("hidden") or {}).values()]
    hidden = frozenset(_HIDDEN_NAMES[v] for v in kinds if isinstance(v, str) and v in _HIDDEN_NAMES)
    declared = declared_inputs(cls)
    seeds, types = set(), set()
    for name, s in declared.items():
        kind = s[0] if isinstance(s, (list, tuple)) and s else None
        types.add(kind if isinstance(kind, str) else "COMBO")
        extra = s[1] if isinstance(s, (list, tuple)) and len(s) > 1 and isinstance(s[1], dict) else {}
        if extra.get("control_after_generate"):
            seeds.add(name)
    samples = "NOISE" in types or (bool(seeds or {"seed", "noise_seed"} & set(declared)) and "MODEL" in types)
    return ClassFacts(hidden=hidden, not_idempotent=bool(getattr(cls, "NOT_IDEMPOTENT", False)),
                      seed_inputs=frozenset(seeds), samples=samples)


def is_output_node(cls) -> bool:
    return getattr(cls, "OUTPUT_NODE", False) is True


def object_info(cls) -> dict:
    """The /object_info-shaped view (input, output, output_name) of a node class."""
    outs = list(getattr(cls, "RETURN_TYPES", ()) or ())
    names = list(getattr(cls, "RETURN_NAMES", None) or outs)
    return {"input": cls.INPUT_TYPES(), "output": ["COMBO" if isinstance(t, list) else str(t) for t in outs],
            "output_name": [str(n) for n in names]}


def clip_vision_output_class():
    """``comfy.clip_vision.Output`` (restored from caches by a registered adapter), or None."""
    try:
        import comfy.clip_vision
    except ImportError:  # a host without CLIP vision support
        return None
    return comfy.clip_vision.Output


class NodeClasses:
    """What the host says about each node class, asked once per class type and request; a class
    whose introspection fails reads as unknown (None, no specs, not an output)."""

    def __init__(self):
        self._memo: dict = {}

    def _get(self, what: str, ct, make):
        k = (what, ct)
        if k not in self._memo:
            try:
                self._memo[k] = make()
            except Exception:   # noqa: BLE001 - a host class whose introspection fails: unknown
                self._memo[k] = None
        return self._memo[k]

    def cls(self, ct):
        """The registered class (an opaque value: ask the other methods), or None."""
        return self._get("cls", ct, lambda: node_class(ct) if isinstance(ct, str) else None)

    def specs(self, ct) -> dict:
        cls = self.cls(ct)
        return (self._get("specs", ct, lambda: declared_inputs(cls)) or {}) if cls is not None else {}

    def is_output(self, ct) -> bool:
        cls = self.cls(ct)
        return cls is not None and bool(self._get("out", ct, lambda: is_output_node(cls)))

    def self_validated(self, ct) -> tuple[frozenset, bool]:
        """(inputs the class's own validate function takes, whether it takes **kwargs): ComfyUI
        skips its min/max check for those inputs (for all inputs with **kwargs)."""
        cls = self.cls(ct)
        got = self._get("val", ct, lambda: validate_signature(cls)) if cls is not None else None
        return got or (frozenset(), False)

    def change_token_fn(self, ct):
        cls = self.cls(ct)
        return self._get("ct", ct, lambda: change_token_fn(cls)) if cls is not None else None

    def facts(self, ct) -> ClassFacts:
        """graph_key.ClassFacts of a class (NO_FACTS for an unknown one)."""
        cls = self.cls(ct)
        got = self._get("facts", ct, lambda: class_facts(cls)) if cls is not None else None
        return got or NO_FACTS

    def object_info(self, ct) -> dict | None:
        cls = self.cls(ct)
        return self._get("info", ct, lambda: object_info(cls)) if cls is not None else None
