"""``python -m reuse_backend instrument IN.json [-o OUT.json] [--json] [--cache-name N]
[--object-info FILE]``: the instrumenter on a file.

Writes the instrumented workflow to OUT.json (``-`` for stdout; without -o only the report is
printed), the report as text or, with --json, as JSON ``{"report": ...}`` (errors as
``{"error": {...}}``). Exit codes: 0 done (also when nothing needed wrapping), 2 refused.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..errors import ReuseError
from . import instrument, limits


def add_parser(sub) -> None:
    sp = sub.add_parser("instrument", help="insert a Session and Encode-or-Reuse nodes into a workflow file")
    sp.add_argument("input", metavar="IN.json", help="a UI-format workflow (with subgraphs) or an API-format prompt")
    sp.add_argument("-o", "--output", metavar="OUT.json", help="where to write the result ('-': stdout)")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")
    sp.add_argument("--cache-name", help="cache name of a new Session (default: derived from the file name)")
    sp.add_argument("--object-info", metavar="FILE", help="a host's /object_info JSON (refines node types)")


def text_report(rep: dict) -> str:
    lines = [f"{rep['format']} workflow; cache '{rep['cache_name']}'; "
             + ("changed" if rep["changed"] else "nothing to change")]
    s = rep["session"]
    if rep["changed"]:
        lines.append(f"  session: node {s['node']}" + (" (new)" if s["created"] else " (existing)")
                     + (f", brought into subgraph(s) {', '.join(s['threaded_into'])}" if s["threaded_into"] else ""))
    for w in rep["wrapped"]:
        p = w["producer"]
        lines.append(f"  wrapped  {w['slot']:<24} {w['type']:<20} after {p['class_type']} (node {p['node']}) "
                     f"-> node {w['node']}")
        if w.get("note"):
            lines.append(f"           note: {w['note']}")
    if rep["already_wrapped"]:
        lines.append(f"  already wrapped: {', '.join(rep['already_wrapped'])}")
    for n in rep["not_wrapped"]:
        lines.append(f"  not wrapped: {n['class_type']} (node {n['node']}): {n['reason']}")
    return "\n".join(lines)


def run(args) -> int:
    try:
        path = Path(args.input)
        if not path.is_file():
            raise limits.invalid(f"no such file: {args.input}", expected="a workflow JSON file",
                                 actual=args.input, fix="pass the path of a saved workflow")
        if path.stat().st_size > limits.MAX_BODY_BYTES:
            raise limits.too_large("bytes", limits.MAX_BODY_BYTES, f"{path.stat().st_size} bytes")
        doc = limits.parse_json(path.read_bytes())
        info = limits.parse_json(Path(args.object_info).read_bytes()) if args.object_info else None
        new, rep = instrument(doc, name_hint=path.name, cache_name=args.cache_name,
                              object_info=info if isinstance(info, dict) else None)
    except ReuseError as e:
        if args.json:
            print(json.dumps({"error": e.to_dict()}, indent=1))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    if args.output:
        text = json.dumps(new, indent=1, ensure_ascii=False) + "\n"
        if args.output == "-":
            sys.stdout.write(text)
        else:
            tmp = f"{args.output}.tmp-{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, args.output)
    out = sys.stderr if args.output == "-" else sys.stdout
    print(json.dumps({"report": rep}, indent=1) if args.json else text_report(rep), file=out)
    return 0
