"""The support-matrix example workflows are the tested graphs, up to date with the host's schemas.

seedreuse_lab/tools/make_family_examples.py builds each example from the graph its family test runs
(stand-ins swapped for the stock nodes). This rebuilds them from the live worker's
/object_info (with the pack loaded) and compares with example_workflows/ and its api/ twins,
so a change to a tested graph or to a node schema shows up here. The UI files are named by their
titles (mfe.TITLES: what the template browser shows), the API twins by their ids. Regenerate with
``python -m seedreuse_lab.tools.make_family_examples http://127.0.0.1:PORT`` (a worker with the pack).
tests/test_examples.py validates all examples (format, UI/API agreement, host validation)."""
from __future__ import annotations

import json

import pytest

from seedreuse_lab.tools import make_family_examples as mfe

pytestmark = pytest.mark.comfy


def test_family_examples_are_up_to_date(family_workers):
    a, _, _ = family_workers
    built = mfe.build_examples(a.object_info())
    assert set(built) == set(mfe.TITLES)
    stale = []
    for name, (ui, api) in built.items():
        ui_file, thumb, api_file = mfe.FILES[name]
        for path, obj in ((mfe.OUT / ui_file, ui), (mfe.OUT / api_file, api)):
            if not path.is_file() or json.loads(path.read_text()) != json.loads(mfe.dumps(obj)):
                stale.append(str(path.relative_to(mfe.REPO)))
        if not (mfe.OUT / thumb).is_file():
            stale.append(f"example_workflows/{thumb} (missing)")
    assert not stale, ("example workflows out of date (regenerate with "
                       "`python -m seedreuse_lab.tools.make_family_examples <worker url>`): " + ", ".join(stale))


def test_family_examples_use_stock_nodes_only():
    for name, (api, _) in mfe.example_graphs().items():
        test_only = sorted({n["class_type"] for n in api.values() if n["class_type"].startswith("SeedReuseTest")})
        assert not test_only, f"{name}: test-only nodes in a shipped example: {test_only}"
