"""Static checks of the web extension (web/): small ES modules, one palette, no polling.

No browser and no ComfyUI needed (tests/browser/test_browser.py drives the real thing).
"""
from __future__ import annotations

import re
from pathlib import Path

WEB = Path(__file__).resolve().parents[1] / "web"
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


def test_no_polling_and_no_hand_copied_error_types():
    for p in JS:
        code = _code(p.read_text())
        assert "setInterval" not in code, f"{p.relative_to(WEB)} polls (setInterval)"
        assert not re.search(r"[\"'](?:\w+Error)[\"']\s*,\s*[\"']\w+Error[\"']", code), \
            f"{p.relative_to(WEB)} keeps a list of error types; read error.type / error.code as given"


def test_submodules_only_export():
    """ComfyUI imports every .js under web/ as an extension entry point: only the entry module
    may register the extension or touch the page at import time."""
    for p in JS:
        if p == ENTRY:
            continue
        code = _code(p.read_text())
        assert "registerExtension(" not in code, p
        assert not re.search(r"\bfrom\s+[\"'](?:\.\./)+scripts/", code), \
            f"{p.relative_to(WEB)} imports the host directly; the entry module binds it (core.bindHost)"
        depth = 0
        for line in code.splitlines():
            if depth == 0 and line.strip() and not re.match(
                    r"\s*(export\s+|import\s|const\s|let\s|function\s|async\s+function\s|class\s|[}\])]|//)", line):
                raise AssertionError(f"{p.relative_to(WEB)}: top-level statement {line.strip()!r}")
            depth += line.count("{") + line.count("(") + line.count("[")
            depth -= line.count("}") + line.count(")") + line.count("]")


def test_badges_go_through_the_node_badge_api():
    """The badges are entries of node.badges (drawn by LiteGraph, rendered by the Vue node header,
    beside the host's own badges), never drawn over the node from onDrawForeground."""
    badges = _code((WEB / "seedreuse" / "badges.js").read_text())
    assert "node.badges.push(" in badges
    assert "LGraphBadge" in badges, "use the frontend's badge class when it has one"
    entry = _code(ENTRY.read_text())
    hooks = re.findall(r'chain\(proto, "onDrawForeground", function \([^)]*\) \{(.*?)\}, "onDrawForeground"\)',
                       entry, re.S)
    assert all("badge" not in h.lower() for h in hooks), hooks
    # badge_fit.js lays the node's badge row out once on its own offscreen canvas to measure the
    # host's badges (drawBadges with our entries empty); nothing else draws badges
    fit = _code((WEB / "seedreuse" / "badge_fit.js").read_text())
    assert 'document.createElement("canvas")' in fit and "onDrawForeground" not in fit
    for p in JS:
        if p.name not in ("badges.js", "badge_fit.js"):
            assert "drawBadge" not in _code(p.read_text()), p


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


def _cycles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """The import cycles a depth-first search closes (one per back edge; none if and only if the
    graph has no cycle), each as the modules along it, the first repeated at the end."""
    found, colour, stack = [], {}, []

    def visit(n):
        colour[n] = "grey"
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if colour.get(m) == "grey":
                found.append(stack[stack.index(m):] + [m])
            elif m not in colour:
                visit(m)
        stack.pop()
        colour[n] = "black"

    for n in sorted(graph):
        if n not in colour:
            visit(n)
    return found


def test_no_import_cycles_among_the_modules():
    """ES modules in a circle evaluate in an order that depends on which one the host imports
    first (ComfyUI imports every .js under web/): no module of web/ may reach itself by imports."""
    graph = {p.resolve(): _imports(p) for p in JS}
    missing = {str(t.relative_to(WEB)) for ts in graph.values() for t in ts if not t.is_file()}
    assert not missing, f"imports of modules that do not exist: {sorted(missing)}"
    assert graph[ENTRY.resolve()], "the entry module imports its submodules"
    cycles = [" -> ".join(str(p.relative_to(WEB)) for p in c) for c in _cycles(graph)]
    assert not cycles, "import cycles among web/ modules:\n" + "\n".join(cycles)


def test_the_cycle_finder_finds_a_cycle():
    a, b, c = Path("/a.js"), Path("/b.js"), Path("/c.js")
    assert _cycles({a: {b}, b: {c}, c: {a}}) == [[a, b, c, a]]
    assert _cycles({a: {b}, b: {c}, c: set()}) == []
