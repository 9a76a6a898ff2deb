"""The web extension (web/): its ES modules driven by Node's test runner, and its shape.

tests/web/*.test.mjs import the modules themselves under `node --test`, with a small fake of the
browser and of ComfyUI's `app` / `api` (tests/web/fake_host.mjs): importing a submodule has no
side effect, the entry module registers one extension and hooks only the pack's node types, a
reuse node's badges are entries of node.badges in the stylesheet's colours, nothing polls,
requests and their structured errors are read as the server sends them. Here: those tests run,
and the static shape (small modules, one palette in the stylesheet, no import cycle). No browser
and no ComfyUI needed (tests/browser/test_browser.py drives the real thing).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.import_cycles import find_cycles

WEB = Path(__file__).resolve().parents[1] / "web"
NODE_TESTS = Path(__file__).resolve().parent / "web"
NODE_MIN = (18, 19)   # node --test and module.register
ENTRY = WEB / "seedreuse.js"
CSS = WEB / "seedreuse.css"
MAX_LINES = 400
COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\s*\(|\bhsla?\s*\(")
ALL_FILES = [p for p in sorted(WEB.rglob("*")) if p.is_file()]
JS = [p for p in ALL_FILES if p.suffix in (".js", ".mjs")]


def _code(text: str) -> str:
    """JS source without // and /* */ comments (string contents are kept)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"(^|[^:\\])//.*$", r"\1", text, flags=re.M)


def test_the_extension_is_small_modules():
    assert ENTRY in JS and len(JS) > 1, JS
    sizes = {str(p.relative_to(WEB)): len(p.read_text().splitlines()) for p in JS}
    assert all(n < MAX_LINES for n in sizes.values()), sizes


def test_colours_only_in_the_stylesheet():
    assert CSS.is_file()
    for p in ALL_FILES:
        if p == CSS:
            continue
        hits = COLOUR.findall(p.read_text(errors="replace"))
        assert not hits, f"{p.relative_to(WEB)} has colour literals {hits}: define them in seedreuse.css"


def test_one_palette_each_colour_defined_once():
    css = re.sub(r"/\*.*?\*/", "", CSS.read_text(), flags=re.S)
    literals = []
    for m in COLOUR.finditer(css):
        line = css[css.rfind("\n", 0, m.start()) + 1:css.find("\n", m.end())]
        assert re.match(r"\s*--seedreuse-[\w-]+\s*:", line), f"colour outside the palette: {line.strip()}"
        end = css.find(")", m.end()) + 1 if m.group().endswith("(") else m.end()
        literals.append(re.sub(r"\s+", "", css[m.start():end]).lower())
    assert literals, "seedreuse.css defines the palette"
    dupes = sorted({c for c in literals if literals.count(c) > 1})
    assert not dupes, f"colours defined more than once: {dupes}"
    # every palette token the rules use is defined
    defined = set(re.findall(r"(--seedreuse-[\w-]+)\s*:", css))
    used = set(re.findall(r"var\((--seedreuse-[\w-]+)\)", css))
    assert used <= defined, used - defined


IMPORT = re.compile(r"""\b(?:import|export)\b[^;"']*?\bfrom\s*["']([^"']+)["']|\bimport\s*\(?\s*["']([^"']+)["']""")


def _imports(p: Path) -> set[Path]:
    """The web/ modules that module `p` imports (static, re-export and dynamic imports of a
    relative path; the host's ../../scripts/ modules are outside web/ and left out)."""
    out = set()
    for m in IMPORT.finditer(_code(p.read_text())):
        spec = m.group(1) or m.group(2)
        if spec.startswith("."):
            target = (p.parent / spec).resolve()
            if WEB in target.parents:
                out.add(target)
    return out


def test_no_import_cycles_among_the_modules():
    """ES modules in a circle evaluate in an order that depends on which one the host imports
    first (ComfyUI imports every .js under web/): no module of web/ may reach itself by imports."""
    graph = {p.resolve(): _imports(p) for p in JS}
    missing = {str(t.relative_to(WEB)) for ts in graph.values() for t in ts if not t.is_file()}
    assert not missing, f"imports of modules that do not exist: {sorted(missing)}"
    assert graph[ENTRY.resolve()], "the entry module imports its submodules"
    cycles = [" -> ".join(str(p.relative_to(WEB)) for p in c) for c in find_cycles(graph)]
    assert not cycles, "import cycles among web/ modules:\n" + "\n".join(cycles)


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is not installed: install Node.js >= 20 (apt-get install -y nodejs) to run the web "
                    "extension's tests (tests/web/*.test.mjs)", pytrace=False)
    return node


def test_the_web_modules_pass_their_node_tests():
    node = _node()
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    major, minor = (int(x) for x in version.lstrip("v").split(".")[:2])
    assert (major, minor) >= NODE_MIN, f"Node.js {version} lacks module.register; install Node.js >= 20"
    files = sorted(str(p) for p in NODE_TESTS.glob("*.test.mjs"))
    assert len(files) >= 3, files
    p = subprocess.run([node, "--test", "--test-reporter=tap", *files], capture_output=True, text=True, timeout=300)
    summary = dict(re.findall(r"^# (tests|pass|fail) (\d+)$", p.stdout, re.M))
    assert p.returncode == 0 and summary.get("fail") == "0", p.stdout[-6000:] + p.stderr[-2000:]
    assert int(summary.get("pass", 0)) >= 10, summary
