"""UI format -> API format as the canvas' "Queue" / "Export (API)" does, subgraphs expanded.

Each node that runs on the server becomes ``{class_type, inputs, _meta: {title}}`` under its
flattened id (instance ids and node id joined by ':', the frontend's own ids). Widget values are
mapped to input names in the host's widget order, which only the host knows: pass its
``/object_info``. A widget input linked from a subgraph input takes the instance's link, or,
unlinked there, keeps the inner node's own value (the frontend's promoted widgets store it there).
Frontend-only nodes (notes, reroutes, primitives) and muted or bypassed nodes are not sent;
a link through a bypassed node passes its first input of the same type.
"""
from __future__ import annotations

from .ui_graph import Resolver, Workflow, computing_nodes

WIDGET_TYPES = ("INT", "FLOAT", "STRING", "BOOLEAN", "COMBO")


DYNAMIC_COMBO = "COMFY_DYNAMICCOMBO_V3"   # a combo whose selected option brings inputs of its own


def widget_layout(schema: dict, values: list | None = None) -> list:
    """Names of a node's widgets_values entries in the canvas' order (None: a frontend-only
    widget such as 'control_after_generate' or an upload button), from its /object_info entry.

    A dynamic combo (ComfyUI 0.33's ``io.DynamicCombo``, e.g. SaveVideo's ``format``) is followed
    by the widgets of the option it selects, recursively, named with dotted keys as the frontend
    sends them (``format.codec``): which option is selected is read from ``values``; without
    them (or for a value that selects no option) the option's widgets are not in the layout.
    An input marked hidden still has its widget (frontend 1.49.6 saves SaveVideo's hidden
    ``codec`` as a fourth value after ``format.codec``; files saved before it have three). A
    multi-type input (``io.MultiType``: type "FLOAT,INT") has the widget of its ``widgetType``; a
    ``seed`` inside a dynamic combo's option has no control_after_generate widget."""
    return [name for name, _ in widget_specs(schema, values)]


def widget_specs(schema: dict, values: list | None = None) -> list[tuple]:
    """(name, spec) per widgets_values entry, as widget_layout orders them (spec None for a
    frontend-only widget)."""
    entries: list = []
    _walk(schema.get("input") or {}, schema.get("input_order") or {}, values, "", entries)
    return entries


def _walk(inp: dict, order: dict, values: list | None, prefix: str, entries: list) -> None:
    for section in ("required", "optional"):
        specs = inp.get(section) or {}
        for name in order.get(section, list(specs)):
            spec = specs.get(name)
            if not isinstance(spec, (list, tuple)) or not spec:
                continue
            t = "COMBO" if isinstance(spec[0], list) else spec[0]
            opts = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
            if opts.get("forceInput"):
                continue
            if isinstance(t, str) and "," in t and opts.get("widgetType"):
                t = opts["widgetType"]        # a multi-type input ("FLOAT,INT") shows its widget type
            if t == DYNAMIC_COMBO:
                at = len(entries)
                entries.append((prefix + name, spec))
                chosen = values[at] if values is not None and at < len(values) else None
                option = next((o for o in opts.get("options") or []
                               if isinstance(o, dict) and o.get("key") == chosen), None)
                if option is not None:
                    _walk(option.get("inputs") or {}, {}, values, f"{prefix}{name}.", entries)
                continue
            if t not in WIDGET_TYPES:
                continue
            entries.append((prefix + name, spec))
            # a seed inside a dynamic combo's option (TextGenerate's sampling_mode.seed) has no
            # control widget: the templates save none there
            if t in ("INT", "COMBO") and opts.get("control_after_generate",
                                                  t == "INT" and not prefix and name in ("seed", "noise_seed")):
                entries.append((None, None))
            if opts.get("image_upload"):
                entries.append((None, None))
            if opts.get("audio_upload"):
                entries += [(None, None), (None, None)]


_NO_DEFAULT = object()


def _default(spec) -> object:
    """The value the canvas gives a widget a saved file has no value for."""
    opts = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
    if "default" in opts:
        return opts["default"]
    choices = spec[0] if isinstance(spec[0], list) else [
        o.get("key") if isinstance(o, dict) else o for o in opts.get("options") or []]
    return choices[0] if choices else _NO_DEFAULT


def convert(ui: dict, object_info: dict, *, overrides: dict | None = None) -> tuple[dict, list]:
    """(API prompt, problems). ``overrides``: class_type -> widget layout for classes the host
    lacks. A problem is a string naming a node whose widget values do not fit the host's
    layout (the values that fit are still mapped) or whose class the host does not know."""
    wf = Workflow(ui)
    ctxs = wf.expand()
    res = Resolver(wf)
    out, problems = {}, []
    for ctx, n in computing_nodes(wf, ctxs):
        key = ctx.key(n["id"])
        schema = object_info.get(n["type"])
        layout = (overrides or {}).get(n["type"])
        values = n.get("widgets_values")
        specs = None
        if layout is None and isinstance(schema, dict):
            specs = widget_specs(schema, values if isinstance(values, list) else None)
            layout = [name for name, _ in specs]
        inputs: dict = {}
        if isinstance(values, dict):
            inputs.update({k: v for k, v in values.items() if isinstance(k, str)})
        elif layout is None:
            problems.append(f"{key} ({n['type']}): not a class of this host; widgets_values not mapped")
        else:
            values = values if isinstance(values, list) else []
            # widgets the file predates (a newer host added them after the saved ones) get
            # their defaults, as the canvas gives them on load
            added = [(name, _default(spec)) for name, spec in (specs or [])[len(values):] if name is not None]
            if len(values) > len(layout) or (specs is None and len(values) < len(layout)) \
                    or any(v is _NO_DEFAULT for _, v in added):
                problems.append(f"{key} ({n['type']}): {len(values)} widget values, the host's layout has "
                                f"{len(layout)}: {layout}")
            inputs.update({name: v for name, v in zip(layout, values) if name is not None})
            inputs.update({name: v for name, v in added if v is not _NO_DEFAULT})
        for slot in n.get("inputs") or []:
            if slot.get("link") is None:
                continue
            r = res.resolve(ctx, slot["link"])
            if r is None:
                continue
            if r[0] == "value":
                inputs[slot["name"]] = r[1]
            else:
                _, sctx, snode, oslot = r
                inputs[slot["name"]] = [sctx.key(snode["id"]), oslot]
        out[key] = {"class_type": n["type"], "inputs": inputs, "_meta": {"title": str(n.get("title") or n["type"])}}
    return out, problems
