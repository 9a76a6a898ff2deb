"""The docs cover the code: every setting the pack reads has a row in docs/CONFIGURATION.md, every
error class of the pack a row in docs/TROUBLESHOOTING.md, every setting only the tests, benchmarks
and scripts read a row in docs/DEVELOPMENT.md, and every relative link of the README and docs/
points at a file (and a heading) that exists.

Found by reading the code, not from a list kept here: the settings are the string literals
``SEEDREUSE_*`` (and ``AWS_*``) of the pack's Python files, less the ComfyUI socket types the nodes
declare (``io.Custom("SEEDREUSE_...")``); the error classes are the subclasses of ReuseError
(reuse_backend/errors.py imported, and every reuse_backend module imported so that subclasses
declared elsewhere count) plus every exception class the pack's files declare (read with ast, so
nodes/ needs no ComfyUI). A new setting or error without its doc line fails here.
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import reuse_backend
from reuse_backend.errors import ReuseError

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PACK_FILES = [REPO / "__init__.py", *sorted((REPO / "reuse_backend").rglob("*.py")),
              *sorted((REPO / "nodes").rglob("*.py"))]
DEV_FILES = [*sorted((REPO / "seedreuse_lab").rglob("*.py")), *sorted((REPO / "tests").rglob("*.py")),
             *sorted((REPO / "scripts").glob("*.sh")), *sorted((REPO / "tests").rglob("*.sh"))]
SETTING = re.compile(r"^(SEEDREUSE|AWS)_[A-Z0-9_]+$")
# a read of the environment in the lab, the tests and the scripts: os.environ.get("X"...),
# os.environ["X"], os.getenv("X"), "X" in os.environ, ${X...} / $X in shell
ENV_READ = re.compile(r"""(?:environ(?:\.get)?\s*[(\[]\s*|getenv\s*\(\s*)["'](SEEDREUSE_[A-Z0-9_]+)["']"""
                      r"""|["'](SEEDREUSE_[A-Z0-9_]+)["']\s+(?:not\s+)?in\s+os\.environ"""
                      r"""|\$\{?(SEEDREUSE_[A-Z0-9_]+)""")
EXCEPTION_BASES = {"Exception", "RuntimeError", "ValueError", "OSError", "KeyError", "TypeError"}


def _trees(files):
    for f in files:
        yield f, ast.parse(f.read_text(), filename=str(f))


def pack_settings() -> dict[str, set[str]]:
    """Every SEEDREUSE_* / AWS_* literal of the pack's Python files -> the files naming it, less the
    socket types of io.Custom(...)."""
    found: dict[str, set[str]] = {}
    socket_types: set[str] = set()
    for f, tree in _trees(PACK_FILES):
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "Custom":
                socket_types.update(a.value for a in n.args if isinstance(a, ast.Constant))
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and SETTING.match(n.value):
                found.setdefault(n.value, set()).add(str(f.relative_to(REPO)))
    return {k: v for k, v in found.items() if k not in socket_types}


def dev_settings() -> set[str]:
    """SEEDREUSE_* names the lab, the tests and the scripts read from the environment."""
    out = set()
    for f in DEV_FILES:
        for m in ENV_READ.finditer(f.read_text()):
            out.add(next(g for g in m.groups() if g))
    return out


def table_names(doc: Path) -> set[str]:
    """The `names` in the first cell of every table row of a doc (several per cell allowed)."""
    names = set()
    for line in doc.read_text().splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", first))
    return names


def error_classes() -> set[str]:
    """ReuseError's subclasses (every reuse_backend module imported) and every exception class
    declared in the pack's files (ast: classes whose bases are exceptions or such classes)."""
    for mod in pkgutil.walk_packages(reuse_backend.__path__, "reuse_backend."):
        if not mod.name.endswith(".__main__"):          # it runs the CLI
            importlib.import_module(mod.name)
    names, todo = set(), [ReuseError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    declared: dict[str, list[str]] = {}
    for _f, tree in _trees(PACK_FILES):
        for n in ast.walk(tree):
            if isinstance(n, ast.ClassDef):
                declared[n.name] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in n.bases]
    changed = True
    while changed:
        changed = False
        for name, bases in declared.items():
            if name not in names and any(b in names or b in EXCEPTION_BASES for b in bases):
                names.add(name)
                changed = True
    return names


def test_every_setting_the_pack_reads_is_in_configuration():
    settings = pack_settings()
    assert "SEEDREUSE_CACHE_ROOT" in settings and "SEEDREUSE_SESSION" not in settings, sorted(settings)
    missing = {k: sorted(v) for k, v in settings.items() if k not in table_names(DOCS / "CONFIGURATION.md")}
    assert not missing, f"add a row to docs/CONFIGURATION.md (name, default, effect, why) for: {missing}"


def test_every_setting_of_the_tests_and_benchmarks_is_in_development():
    settings = dev_settings() - set(pack_settings())
    assert "SEEDREUSE_TEST_HOSTS" in settings, sorted(settings)
    missing = sorted(settings - table_names(DOCS / "DEVELOPMENT.md"))
    assert not missing, f"add to the table 'Test and benchmark settings' of docs/DEVELOPMENT.md: {missing}"


def test_every_error_class_is_in_troubleshooting():
    classes = error_classes()
    assert {"ReuseError", "CorruptCacheError", "RequestTooLargeError", "GraphCycleError",
            "AutoNotApplied"} <= classes, sorted(classes)
    doc = (DOCS / "TROUBLESHOOTING.md").read_text()
    rows = table_names(DOCS / "TROUBLESHOOTING.md")
    internal = doc.split("Internal exceptions", 1)[1].split("\n\n", 1)[0] if "Internal exceptions" in doc else ""
    listed = rows | set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", internal))
    missing = sorted(classes - listed)
    assert not missing, ("add a row to docs/TROUBLESHOOTING.md's 'By error class' (what it means, the fix), or "
                         f"name it under 'Internal exceptions' if a user never sees it: {missing}")


# ------------------------------------------------------------------ links

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(md: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file (lower case, punctuation dropped, spaces -> -),
    and its explicit ``<a id="...">`` anchors."""
    text = md.read_text()
    out = set(re.findall(r"""<a\s+(?:id|name)=["']([^"']+)["']""", text))
    for line in text.splitlines():
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            text = re.sub(r"[`*]", "", m.group(1)).strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text)))
    return out


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md")), *sorted((REPO / "example_workflows").rglob("*.md"))]


def broken_links(files, base: Path = REPO) -> list[str]:
    """'<file relative to base>: <target> (why)' for every relative link that points nowhere."""
    bad = []
    for md in files:
        for m in LINK.finditer(md.read_text()):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):       # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            if not dest.exists():
                bad.append(f"{md.relative_to(base)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{md.relative_to(base)}: {target} (no heading #{anchor} in {dest.name})")
    return bad


def test_relative_links_of_the_readme_and_docs_resolve():
    files = doc_files()
    assert REPO / "README.md" in files and DOCS / "CONFIGURATION.md" in files
    bad = broken_links(files)
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_the_link_check_sees_a_broken_link(tmp_path):
    (tmp_path / "a.md").write_text("# Title `here`\n[ok](a.md#title-here) [gone](b.md) [anchor](a.md#nope) "
                                   "![img](c.png) [web](https://example.com/x) [self](#title-here)\n")
    assert broken_links([tmp_path / "a.md"], tmp_path) == [
        "a.md: b.md (no such file)", "a.md: a.md#nope (no heading #nope in a.md)", "a.md: c.png (no such file)"]


def test_the_readme_shows_the_picture_and_the_two_commands():
    readme = (REPO / "README.md").read_text()
    assert "](docs/images/canvas.png)" in readme and (DOCS / "images" / "canvas.png").stat().st_size < 400_000
    assert "bash scripts/demo.sh" in readme and "bash scripts/test.sh" in readme
    assert len(readme.splitlines()) < 200, "README.md is for ComfyUI users: keep it under 200 lines (docs/ for the rest)"
