"""The architecture as rules a change cannot silently break.

- no import cycle among the project's modules, counting function-level imports too;
- the backend's layers point one way (storage <- store <- media; storage <- keys <- media; store <- the
  two media, folder and bucket, which never import each other; workflow imports no other layer);
- each medium implements the store interface's protocols (store/interface.py);
- ComfyUI is imported only by the host package nodes/host/ (and the stand-in pack, which is a
  ComfyUI pack), and the rest of nodes/ reads no attribute of a host object (the host probe rule);
- every backend module imports alone, without ComfyUI (each in a fresh child process);
- nothing edits sys.path; the pack and the lab never import from tests/;
- every module is about 400 lines at most and listed in docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_cycles import find_cycles

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
    cycles = find_cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_function_level_and_relative_imports():
    """The checker itself: it must resolve the imports the cycle test depends on."""
    g = _graph()
    assert "reuse_backend.folder.cache" in g["reuse_backend.folder.check"]
    assert "reuse_backend.storage.fsops" in g["reuse_backend.folder.lease_files"]
    assert "nodes.host" in g["nodes.transactions"]
    assert "reuse_backend.store" in g["nodes.routes"] or "reuse_backend.store.cache" in g["nodes.routes"]


LAYERS = {   # backend subpackage -> the backend subpackages it may import
    "storage": set(),
    "store": {"storage"},                   # the interface and the engine: no medium
    "folder": {"storage", "store"},         # a medium: never the other one
    "bucket": {"storage", "store"},
    "keys": {"storage"},
    "media": {"storage", "store", "keys"},
    "workflow": set(),
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


def test_the_two_media_never_import_each_other_and_only_stores_and_the_tool_choose_one():
    """folder/ and bucket/ import neither each other nor stores.py; elsewhere in the pack (nodes/,
    reuse_backend/) only stores.py names a medium (the cache tool asks it). The lab and the tests
    may use a medium directly."""
    g = _graph()
    media = {"folder", "bucket"}
    bad = []
    for mod, deps in g.items():
        parts = mod.split(".")
        if parts[0] not in ("reuse_backend", "nodes"):
            continue
        for d in deps:
            dp = d.split(".")
            if len(dp) > 1 and dp[0] == "reuse_backend" and dp[1] in media:
                inside = len(parts) > 1 and parts[0] == "reuse_backend" and parts[1] in media
                if (inside and parts[1] != dp[1]) or (not inside and mod != "reuse_backend.stores"):
                    bad.append(f"{mod} imports {d}")
            if inside_media(parts) and d == "reuse_backend.stores":
                bad.append(f"{mod} imports {d}")
    assert not bad, bad


def inside_media(parts) -> bool:
    return len(parts) > 1 and parts[0] == "reuse_backend" and parts[1] in ("folder", "bucket")


def _protocol_members(proto) -> set[str]:
    names = set(getattr(proto, "__annotations__", {}))
    names |= {n for n, v in vars(proto).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    return names


def _class_members(cls) -> set[str]:
    """Methods and class attributes of ``cls`` (and its bases in the pack), and the attributes its
    __init__ methods assign to ``self``."""
    names = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        names |= {n for n in vars(klass) if not n.startswith("__")}
        init = vars(klass).get("__init__")
        if init is not None and hasattr(init, "__code__"):
            import inspect
            import textwrap
            tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
            names |= {t.attr for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                      for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                      for t in ([t] if not isinstance(t, ast.Tuple) else t.elts)
                      if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return names


def test_each_medium_implements_the_store_interface():
    """The protocols of store/interface.py, member by member, on both media (and the engine's
    Transaction, Claim and Snapshot, shared by both)."""
    from reuse_backend.bucket.cache import BucketCache
    from reuse_backend.bucket.snapshot import BucketSnapshot
    from reuse_backend.bucket.store import BucketStore
    from reuse_backend.folder.cache import FolderCache
    from reuse_backend.folder.reader import FolderSnapshot
    from reuse_backend.folder.store import FolderStore
    from reuse_backend.store import interface
    from reuse_backend.store.claim import Claim
    from reuse_backend.store.transaction import Transaction
    pairs = [(interface.Cache, FolderCache), (interface.Cache, BucketCache), (interface.Store, FolderStore),
             (interface.Store, BucketStore), (interface.Snapshot, FolderSnapshot),
             (interface.Snapshot, BucketSnapshot), (interface.Transaction, Transaction), (interface.Claim, Claim)]
    missing = {f"{impl.__name__}: {sorted(_protocol_members(proto) - _class_members(impl))}"
               for proto, impl in pairs if _protocol_members(proto) - _class_members(impl)}
    assert not missing, missing
    assert _protocol_members(interface.Cache) >= {"snapshot", "begin", "claim", "carry", "publish", "staging_parent"}


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
        if _in_host_package(mod) or mod.startswith("seedreuse_lab.stand_in_nodes") \
                or mod.startswith("seedreuse_lab._gen_"):
            continue   # the host adapter; a ComfyUI pack of its own; model generators run inside ComfyUI
        hits += _top_level_host_imports(path)
    hits += _top_level_host_imports(REPO / "__init__.py")
    assert not hits, hits


def _in_host_package(mod: str) -> bool:
    return mod == "nodes.host" or mod.startswith("nodes.host.")


# The host probe rule. Outside nodes/host/, the pack reads nothing of the host's objects itself:
# (a) no attribute of these names (ComfyUI's node-class protocol, executor and server), whether
#     read as ``x.NAME`` or through getattr/hasattr/setattr/delattr(x, "NAME"), and none of the
#     host's class names as a bare name;
# (b) no attribute at all of a value a host accessor returned (the registered node class, a host
#     class): neither ``host.node_class(ct).x`` nor ``cls = host.node_class(ct)`` then ``cls.x`` or
#     getattr/hasattr(cls, ...) in the same function; such a value only goes back to the host's
#     functions (or is compared with None);
# (c) no private name of the host package (``host._x``).
# Methods the pack's own V3 nodes define (``def validate_inputs``) are definitions, not probes.
HOST_ATTRIBUTES = frozenset({
    "INPUT_TYPES", "RETURN_TYPES", "RETURN_NAMES", "OUTPUT_NODE", "OUTPUT_IS_LIST", "INPUT_IS_LIST",
    "VALIDATE_INPUTS", "IS_CHANGED", "FUNCTION", "CATEGORY", "GET_SCHEMA", "GET_BASE_CLASS", "NODE_CLASS_MAPPINGS",
    "fingerprint_inputs", "validate_inputs", "mro", "__mro__", "PromptExecutor", "PromptServer", "instance",
    "add_message", "handle_execution_error", "prompt_queue", "currently_running", "user_manager", "send_sync",
    "add_on_prompt_handler", "middlewares", "last_prompt_id", "client_id"})
HOST_CLASS_NAMES = frozenset({"PromptExecutor", "PromptServer", "NODE_CLASS_MAPPINGS"})
HOST_OBJECT_ACCESSORS = frozenset({"node_class", "clip_vision_output_class"})
PROBES = ("getattr", "hasattr", "setattr", "delattr")


def host_probes(source: str, host_name: str = "host") -> list[str]:
    """'line: what' for every host probe in ``source`` (a module outside the host package that
    imports the host package as ``host_name``)."""
    tree = ast.parse(source)
    hits = []

    def is_accessor_call(node) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == host_name
                and node.func.attr in HOST_OBJECT_ACCESSORS)

    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for scope in [tree, *scopes]:
        held = set()   # names bound to a host accessor's result in this scope
        for node in ast.walk(scope):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and is_accessor_call(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                held |= {t.id for t in targets if isinstance(t, ast.Name)}

        def holds_host_object(node) -> bool:
            return is_accessor_call(node) or (isinstance(node, ast.Name) and node.id in held)

        for node in ast.walk(scope):
            if isinstance(node, ast.Attribute) and holds_host_object(node.value):
                hits.append(f"{node.lineno}: .{node.attr} of a host object")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES \
                    and node.args and holds_host_object(node.args[0]):
                hits.append(f"{node.lineno}: {node.func.id}() of a host object")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            on_host = isinstance(node.value, ast.Name) and node.value.id == host_name
            if on_host and node.attr.startswith("_"):
                hits.append(f"{node.lineno}: {host_name}.{node.attr} (private to the host package)")
            elif not on_host and node.attr in HOST_ATTRIBUTES:
                hits.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in HOST_ATTRIBUTES:
            hits.append(f"{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.Name) and node.id in HOST_CLASS_NAMES:
            hits.append(f"{node.lineno}: {node.id}")
    return sorted(set(hits), key=lambda h: (int(h.split(":")[0]), h))


def test_no_host_probes_outside_the_host_package():
    hits = []
    files = [(m, p) for m, p in MODULES.items() if m.startswith("nodes") and not _in_host_package(m)]
    for mod, path in files + [("", REPO / "__init__.py")]:
        hits += [f"{path.relative_to(REPO)}:{h}" for h in host_probes(path.read_text())]
    assert not hits, "host knowledge outside nodes/host/ (ask a function of the host package):\n" + "\n".join(hits)


def test_the_host_probe_rule_fails_on_planted_probes():
    """The rule itself: each planted probe is found, at its line; the pack's legitimate uses are not."""
    planted = {
        "spec = cls.INPUT_TYPES()": ".INPUT_TYPES",
        "out = getattr(cls, 'OUTPUT_NODE', False)": "getattr(..., 'OUTPUT_NODE')",
        "ok = hasattr(cls, 'GET_BASE_CLASS')": "hasattr(..., 'GET_BASE_CLASS')",
        "for c in cls.mro(): pass": ".mro",
        "pe = execution.PromptExecutor": ".PromptExecutor",
        "from execution import PromptExecutor as P": None,     # an import: the import rule's case
        "x = PromptServer": "PromptServer",
        "host._PROVIDERS.clear()": "host._PROVIDERS (private to the host package)",
        "n = host.node_class(ct).__name__": ".__name__ of a host object",
        "def f(ct):\n    cls = host.node_class(ct)\n    return cls.whatever": ".whatever of a host object",
        "def f(ct):\n    cls = host.node_class(ct)\n    return getattr(cls, 'x', 0)": "getattr() of a host object",
        "self.success = srv.send_sync(1)": ".send_sync",
    }
    for src, want in planted.items():
        got = host_probes(src)
        if want is None:
            assert got == [], (src, got)
        else:
            assert any(h.endswith(": " + want) for h in got), (src, got)
    allowed = ("routes = host.routes()\n"
               "cls = host.node_class(ct)\nmissing = cls is None\n"
               "schemas = host.NodeClasses()\nspecs = schemas.specs(ct)\n"
               "class N(io.ComfyNode):\n    @classmethod\n    def validate_inputs(cls, slot=None): return True\n"
               "t = d['INPUT_TYPES']\nx = node.inputs\n")
    assert host_probes(allowed) == []


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


def _benchmark_imports(path: Path) -> list[str]:
    """The benchmark modules (seedreuse_lab/bench*.py) a file imports, by any import form."""
    hits, where = [], path.relative_to(REPO) if REPO in path.parents else path.name
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        hits += [f"{where}:{node.lineno} imports {n}" for n in names
                 if re.fullmatch(r"seedreuse_lab\.bench\w*", n)]
    return hits


def test_backend_tests_import_no_benchmark_code():
    """A backend test judges the pack: what it shares with a benchmark lives in non-benchmark
    support (seedreuse_lab/media_samples.py and the like), never in seedreuse_lab/bench*.py."""
    backend = sorted((REPO / "tests" / "backend").rglob("*.py")) + [
        p for p in sorted((REPO / "tests").glob("*.py")) if "pytest.mark.comfy" not in p.read_text()]
    hits = [h for p in backend for h in _benchmark_imports(p)]
    assert not hits, hits


def test_the_benchmark_import_rule_sees_every_form(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import seedreuse_lab.bench_merge\nfrom seedreuse_lab import bench\n"
                       "from seedreuse_lab.bench_takes import x\nfrom seedreuse_lab import media_samples\n")
    hits = _benchmark_imports(planted)
    assert [h.split(" imports ")[1] for h in hits] == ["seedreuse_lab.bench_merge", "seedreuse_lab.bench",
                                                        "seedreuse_lab.bench_takes"], hits


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
                                          ("storage", "store", "folder", "keys", "media", "video", "reuse_backend"))]
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
