"""The architecture as rules a change cannot silently break.

- no import cycle among the project's modules, counting function-level imports too;
- the backend's layers point one way (storage <- store <- media; storage <- keys <- media);
- ComfyUI is imported only by nodes/host.py (and the stand-in pack, which is a ComfyUI pack);
- every backend module imports alone, without ComfyUI (each in a fresh child process);
- nothing edits sys.path; the pack and the lab never import from tests/;
- every module is about 400 lines at most and listed in docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("reuse_backend", "nodes", "seedreuse_lab")
HOST_MODULES = {"comfy", "comfy_api", "comfy_execution", "comfy_extras", "comfy_config", "folder_paths",
                "server", "execution", "nodes", "app", "node_helpers", "latent_preview", "comfyui_version"}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((REPO / pkg).rglob("*.py")):
            rel = f.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


MODULES = _modules()


def _imports(mod: str, path: Path) -> list[tuple[str, int]]:
    """(absolute target, line) of every import in the file, function-level ones included."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[:len(base) - (node.level - 1)]
                # nodes/ reaches the backend as ``..reuse_backend``: the pack root is the
                # anchor, and our module names start below it
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # "from pkg import mod" imports pkg.mod when that is a module of ours
            out.append((target, node.lineno))
            for a in node.names:
                if f"{target}.{a.name}" in MODULES:
                    out.append((f"{target}.{a.name}", node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod, path in MODULES.items():
        for target, _ in _imports(mod, path):
            t = target
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            # a submodule importing its own package (``from . import x``) only needs the package
            # object, which is always initialised first: not an edge of a cycle
            if t and t != mod and not mod.startswith(t + "."):
                g[mod].add(t)
    return g


def test_no_import_cycles():
    g = _graph()
    WHITE, GREY, BLACK = 0, 1, 2
    color = {m: WHITE for m in g}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m):
        color[m] = GREY
        stack.append(m)
        for n in sorted(g[m]):
            if color[n] == GREY:
                cycles.append(stack[stack.index(n):] + [n])
            elif color[n] == WHITE:
                visit(n)
        stack.pop()
        color[m] = BLACK

    for m in sorted(g):
        if color[m] == WHITE:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_graph_sees_function_level_and_relative_imports():
    """The checker itself: it must resolve the imports the cycle test depends on."""
    g = _graph()
    assert "reuse_backend.store.cache" in g["reuse_backend.store.check"]
    assert "reuse_backend.storage.fsops" in g["reuse_backend.store.lock"]
    assert "nodes.host" in g["nodes.transactions"]
    assert "reuse_backend.store" in g["nodes.routes"] or "reuse_backend.store.cache" in g["nodes.routes"]


LAYERS = {   # backend subpackage -> the backend subpackages it may import
    "storage": set(),
    "store": {"storage"},
    "keys": {"storage"},
    "media": {"storage", "store", "keys"},
}


def test_backend_layers_point_one_way():
    g = _graph()
    bad = []
    for mod, deps in g.items():
        parts = mod.split(".")
        if parts[0] != "reuse_backend" or len(parts) < 2 or parts[1] not in LAYERS:
            continue
        for d in deps:
            dp = d.split(".")
            if dp[0] == "reuse_backend" and len(dp) > 1 and dp[1] in LAYERS and dp[1] != parts[1] \
                    and dp[1] not in LAYERS[parts[1]]:
                bad.append(f"{mod} imports {d}")
    assert not bad, bad


def _top_level_host_imports(path: Path) -> list[str]:
    hits = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for n in names:
            if n.split(".")[0] in HOST_MODULES:
                hits.append(f"{path.relative_to(REPO)}:{node.lineno} imports {n}")
    return hits


def test_comfyui_is_imported_only_through_the_host_module():
    hits = []
    for mod, path in MODULES.items():
        if mod == "nodes.host" or mod.startswith("seedreuse_lab.stand_in_nodes") \
                or mod.startswith("seedreuse_lab._gen_"):
            continue   # the host adapter; a ComfyUI pack of its own; model generators run inside ComfyUI
        hits += _top_level_host_imports(path)
    hits += _top_level_host_imports(REPO / "__init__.py")
    assert not hits, hits


_ISOLATED = r"""
import importlib, json, os, sys
import numpy, torch, av, safetensors   # third-party only: our modules load fresh in each child
HOST = set(json.loads(sys.argv[1]))
out = {}
for mod in json.loads(sys.argv[2]):
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(mod)
            host = sorted(m for m in sys.modules if m.split(".")[0] in HOST)
            os.write(1, (json.dumps({"mod": mod, "host": host}) + "\n").encode())
            os._exit(0)
        except BaseException as e:
            os.write(1, (json.dumps({"mod": mod, "error": repr(e)}) + "\n").encode())
            os._exit(1)
    os.waitpid(pid, 0)
"""


def test_every_backend_module_imports_alone_without_comfyui():
    mods = [m for m in MODULES if m.startswith("reuse_backend") and m != "reuse_backend.__main__"]
    p = subprocess.run([sys.executable, "-c", _ISOLATED, json.dumps(sorted(HOST_MODULES)), json.dumps(mods)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert [r["mod"] for r in rows] == mods, p.stderr[-3000:]
    errors = [r for r in rows if "error" in r]
    assert not errors, errors
    leaked = [r for r in rows if r["host"]]
    assert not leaked, leaked


def _py_files():
    skip = {".venv", ".git", "node_modules", ".cache", "test-artifacts"}
    for f in REPO.rglob("*.py"):
        if not skip.intersection(f.relative_to(REPO).parts):
            yield f


def test_nothing_edits_sys_path():
    hits = []
    for f in _py_files():
        if f == Path(__file__):
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if "sys.path" in code and any(op in code for op in (".insert(", ".append(", "[:0]", "sys.path =",
                                                                   ".extend(")):
                hits.append(f"{f.relative_to(REPO)}:{i}: {line.strip()}")
    assert not hits, hits


def test_pack_and_lab_never_import_tests():
    hits = []
    for mod, path in MODULES.items():
        for target, line in _imports(mod, path):
            if target == "tests" or target.startswith("tests."):
                hits.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not hits, hits


def test_modules_are_small():
    big = [f"{p.relative_to(REPO)}: {n} lines" for p in MODULES.values()
           if (n := len(p.read_text().splitlines())) > MAX_LINES]
    lab_big = [b for b in big if b.startswith("seedreuse_lab")]
    pack_big = [b for b in big if not b.startswith("seedreuse_lab")]
    assert not pack_big, pack_big
    # the lab's worker launcher, benchmark and example builders are tools, not the pack: allowed
    # to be longer, but not unboundedly
    assert all(int(b.rsplit(": ", 1)[1].split()[0]) <= 2 * MAX_LINES for b in lab_big), lab_big


@pytest.mark.parametrize("kind", ["py", "js"])
def test_every_module_is_listed_in_the_architecture_doc(kind):
    doc = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    if kind == "py":
        files = [p for p in MODULES.values()] + [REPO / "reuse_backend" / "__main__.py"]
        files = [p for p in files if not (p.name == "__init__.py" and p.parent.name in
                                          ("storage", "store", "keys", "media", "video", "reuse_backend"))]
    else:
        files = sorted((REPO / "web").rglob("*.js")) + sorted((REPO / "web").rglob("*.css"))
    missing = []
    for p in files:
        rel = p.relative_to(REPO).as_posix()
        if p.name == "__main__.py":
            rel = "__main__.py"
        if f"`{rel}`" not in doc and rel not in doc:
            missing.append(rel)
    assert not missing, f"add to docs/ARCHITECTURE.md: {missing}"
