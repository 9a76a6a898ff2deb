"""What the Comfy Registry would publish (``.comfyignore``, tests/published.py) is the pack and only
the pack, and it holds no finding of the registry's scanner beyond the ones docs/DEVELOPMENT.md
lists and justifies ("Publishing to the Comfy Registry"):

- the published set holds what a user's ComfyUI loads and nothing of the lab, the tests, the
  scripts or the docs; every import of its Python files resolves inside it, to the standard
  library, to its requirements or (nodes/host/ only) to ComfyUI;
- the environment is read by one module, reuse_backend/settings.py; a network module is imported
  only by the object store's client (boto3, reuse_backend/bucket/client.py) and by the host package
  (aiohttp, ComfyUI's web framework: nodes/host/server.py); no subprocess, exec or eval.

That it loads and registers its nodes in a real ComfyUI with nothing else present is
tests/test_pack_loads.py (its worker loads a copy of this set).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.published import REPO, published_files

SHIPPED_TOP = {"__init__.py", "README.md", "pyproject.toml", "requirements.txt", "nodes", "reuse_backend", "web",
               "example_workflows"}
# third-party modules the pack may import: requirements.txt (safetensors, av, numpy), torch from
# the host, boto3/botocore (pyproject's optional [s3] extra, imported only for a bucket)
THIRD_PARTY = {"torch", "numpy", "av", "safetensors", "boto3", "botocore"}
# ComfyUI and its web framework (aiohttp): nodes/host/ alone imports them
HOST_MODULES = {"comfy", "comfy_api", "comfy_execution", "comfy_extras", "folder_paths", "server", "execution",
                "nodes", "node_helpers", "latent_preview", "app", "comfyui_version", "aiohttp"}
SETTINGS = "reuse_backend/settings.py"
NETWORK = {"socket", "urllib", "http", "requests", "aiohttp", "boto3", "botocore", "ftplib", "smtplib", "ssl"}
# the object store's client (boto3), and the host's web framework the routes answer through
NETWORK_USERS = {"reuse_backend/bucket/client.py", "nodes/host/server.py"}
FORBIDDEN = {"subprocess", "ctypes", "pickle", "marshal", "shelve"}


def _python_files() -> list[str]:
    return [p for p in published_files() if p.endswith(".py")]


def _imports(rel: str):
    """(absolute module, line) of every import of the published file ``rel``."""
    tree = ast.parse((REPO / rel).read_text(), rel)
    parts = Path(rel).with_suffix("").parts
    package = list(parts[:-1]) if parts[-1] != "__init__" else list(parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno, False
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package[:len(package) - (node.level - 1)]
                yield ".".join(anchor + ([node.module] if node.module else [])), node.lineno, True
                for a in node.names:
                    yield ".".join(anchor + ([node.module] if node.module else []) + [a.name]), node.lineno, True
            else:
                yield node.module or "", node.lineno, False


def test_the_published_set_is_the_pack_alone():
    files = published_files()
    top = {f.split("/", 1)[0] for f in files}
    assert top == SHIPPED_TOP, f"published but not loaded by ComfyUI: {sorted(top - SHIPPED_TOP)}; " \
                               f"missing: {sorted(SHIPPED_TOP - top)} (.comfyignore)"
    assert "reuse_backend/__main__.py" in files and "nodes/host/__init__.py" in files
    assert any(f.startswith("web/seedreuse/") for f in files)


def test_every_import_of_the_published_set_resolves_inside_it():
    files = set(published_files())
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for rel in _python_files():
        for mod, line, relative in _imports(rel):
            top = mod.split(".")[0]
            if relative:
                # a relative import names a module or package of the published set (or a name in one)
                path = mod.replace(".", "/")
                parent = path.rsplit("/", 1)[0]
                if not ({f"{path}.py", f"{path}/__init__.py", f"{parent}.py", f"{parent}/__init__.py"} & files
                        or path in ("", ".")):
                    bad.append(f"{rel}:{line} imports .{mod} (not in the published set)")
            elif top in HOST_MODULES and rel.startswith("nodes/host/"):
                continue
            elif top not in stdlib and top not in THIRD_PARTY:
                bad.append(f"{rel}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_the_scanners_findings_are_only_the_justified_ones():
    env, network, forbidden = [], [], []
    for rel in _python_files():
        src = (REPO / rel).read_text()
        tree = ast.parse(src, rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv") \
                    and isinstance(node.value, ast.Name) and node.value.id == "os":
                env.append(f"{rel}:{node.lineno}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval"):
                forbidden.append(f"{rel}:{node.lineno} {node.func.id}()")
        for mod, line, relative in _imports(rel):
            top = mod.split(".")[0]
            if not relative and top in NETWORK:
                network.append(f"{rel}:{line} imports {mod}")
            if not relative and top in FORBIDDEN:
                forbidden.append(f"{rel}:{line} imports {mod}")
    assert {e.split(":")[0] for e in env} <= {SETTINGS}, f"environment read outside {SETTINGS}: {env}"
    assert {n.split(":")[0] for n in network} <= NETWORK_USERS, f"network module outside {NETWORK_USERS}: {network}"
    assert not forbidden, forbidden
