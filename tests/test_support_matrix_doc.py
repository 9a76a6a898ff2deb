"""docs/SUPPORT_MATRIX.md stays true: every test its table names exists, every family test (file
and function) is named in it, and every example it names exists with its API twin (the UI files
are named by their titles, with spaces and commas; each names its twin api/<id>.json in
extra.seedreuse_example, seedreuse_lab/tools/example_files.py). No worker."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from seedreuse_lab.tools import example_files

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "SUPPORT_MATRIX.md"
FAMILIES = REPO / "tests" / "families"
# test files of tests/families that are not a family row (checked elsewhere, named in the prose)
NOT_A_FAMILY_ROW = {"test_family_examples.py"}
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
# `example_workflows/<Title>.json` (a UI file: any characters but ` and /) or `example_workflows/api/<id>.json`
EXAMPLE_REF = re.compile(r"`(example_workflows/(?:api/)?[^`/]+\.json)`")


def parse_matrix(text: str) -> list[dict]:
    """The rows of the first table under '## Matrix' as {column header: cell}."""
    lines = text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "## Matrix")
    except StopIteration:
        raise AssertionError("docs/SUPPORT_MATRIX.md has no '## Matrix' section") from None
    table = []
    for ln in lines[start + 1:]:
        if ln.startswith("## "):
            break
        if ln.strip().startswith("|"):
            table.append(ln)
        elif table:
            break
    assert len(table) >= 3, "the Matrix section has no table"

    def cells(ln):
        return [c.strip() for c in ln.strip().strip("|").split("|")]

    header = cells(table[0])
    assert set(cells(table[1])) <= {"---", ":---", "---:", ":---:"} or all(set(c) <= set(":-") for c in cells(table[1]))
    rows = []
    for ln in table[2:]:
        c = cells(ln)
        assert len(c) == len(header), f"row has {len(c)} cells, header {len(header)}: {ln}"
        rows.append(dict(zip(header, c)))
    return rows


def module_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test")}


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return parse_matrix(DOC.read_text())


def test_matrix_has_the_required_columns(rows):
    for col in ("Family / task", "Cached (slots)", "Recomputed on a new seed", "Test", "Model classes"):
        assert col in rows[0], f"missing column {col!r}"
    for r in rows:
        assert TEST_REF.search(r["Test"]), f"row {r['Family / task']!r} names no test (file::function)"
        assert r["Cached (slots)"] and r["Model classes"], r["Family / task"]


def test_every_named_test_exists(rows):
    missing = []
    for r in rows:
        for path, func in TEST_REF.findall(r["Test"]):
            f = REPO / path
            if not f.is_file():
                missing.append(f"{path} (file missing)")
            elif func not in module_tests(f):
                missing.append(f"{path}::{func}")
    assert not missing, f"docs/SUPPORT_MATRIX.md names tests that do not exist: {missing}"


def test_every_family_test_is_named(rows):
    named = {(p, f) for r in rows for p, f in TEST_REF.findall(r["Test"])}
    named_files = {p for p, _ in named}
    files = sorted(p for p in FAMILIES.glob("test_*.py") if p.name not in NOT_A_FAMILY_ROW)
    assert files, "no family test files found"
    problems = []
    for f in files:
        rel = f.relative_to(REPO).as_posix()
        if rel not in named_files:
            problems.append(f"{rel} is not named in the matrix")
            continue
        for func in sorted(module_tests(f)):
            if (rel, func) not in named:
                problems.append(f"{rel}::{func} is not named in the matrix")
    assert not problems, "\n".join(problems)


def test_named_examples_exist_with_api_twins(rows):
    missing, named = [], 0
    for r in rows:
        refs = EXAMPLE_REF.findall(r.get("Example", ""))
        uis = [p for p in refs if not p.startswith("example_workflows/api/")]
        apis = [p for p in refs if p.startswith("example_workflows/api/")]
        named += len(uis)
        for path in refs:
            if not (REPO / path).is_file():
                missing.append(path)
        for path in uis:
            if not (REPO / path).is_file():
                continue
            try:
                twin = example_files.api_twin(REPO / path).relative_to(REPO).as_posix()
            except LookupError as e:
                missing.append(str(e))
                continue
            if not (REPO / twin).is_file():
                missing.append(f"api twin {twin} of {path}")
            if apis and twin not in apis:
                missing.append(f"{path} names {twin}, the row names {apis}")
        if apis and not uis:
            missing.append(f"row {r['Family / task']!r} names an API twin without its UI workflow")
    assert not missing, missing
    assert named, "the matrix names no example workflow"


def test_example_ref_reads_titles_with_spaces_and_commas():
    cell = ("`example_workflows/Wan 2.2 two experts, reuse the text encoding.json` "
            "(API: `example_workflows/api/wan22_two_expert_reuse.json`)")
    assert EXAMPLE_REF.findall(cell) == ["example_workflows/Wan 2.2 two experts, reuse the text encoding.json",
                                         "example_workflows/api/wan22_two_expert_reuse.json"]


def test_parser_reads_a_table():
    text = "# x\n\n## Matrix\n\n| A | Test |\n| --- | --- |\n| a | `tests/x.py::test_y` |\n\n## Next\n"
    assert parse_matrix(text) == [{"A": "a", "Test": "`tests/x.py::test_y`"}]
