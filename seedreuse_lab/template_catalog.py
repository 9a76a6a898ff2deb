"""The official templates a host installs and the pack's shipped examples, as the key mutation
checker (tests/test_key_mutations.py) and the per-template support table read them.

A host's templates come from the ``comfyui_workflow_templates`` package its own requirements pin
(ComfyUI 0.33.0: 0.11.44; 0.3.75: 0.7.25), installed in the venv that runs it: every entry of its
manifest that is a workflow (the manifest also lists the template browser's index files), with
its bundle. Partner templates (their nodes call a remote API and run no local encoder) are the
``media-api`` bundle's and every template named ``api_*``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .host import REPO_ROOT

EXAMPLES = REPO_ROOT / "example_workflows"
PARTNER_BUNDLE = "media-api"


@dataclass(frozen=True)
class Template:
    name: str
    bundle: str
    path: Path

    @property
    def partner(self) -> bool:
        return self.bundle == PARTNER_BUNDLE or self.name.startswith("api_")

    def load(self) -> dict:
        return json.loads(self.path.read_text(encoding="utf-8"))


def is_workflow(doc) -> bool:
    """A UI workflow (nodes and links) or an API prompt (node ids -> class_type and inputs)."""
    if not isinstance(doc, dict):
        return False
    if isinstance(doc.get("nodes"), list):
        return True
    return bool(doc) and all(isinstance(n, dict) and "class_type" in n for n in doc.values())


def host_templates() -> list[Template]:
    """Every workflow of the installed ``comfyui_workflow_templates`` package, by name."""
    import comfyui_workflow_templates as cwt
    out = []
    for entry in cwt.iter_templates():
        fname = next((a.filename for a in entry.assets if a.filename.endswith(".json")), None)
        if fname is None:
            continue
        t = Template(entry.template_id, entry.bundle, Path(cwt.get_asset_path(entry.template_id, fname)))
        if is_workflow(t.load()):
            out.append(t)
    return sorted(out, key=lambda t: t.name)


def package_version() -> str:
    from importlib.metadata import version
    return version("comfyui_workflow_templates")


def shipped_examples() -> list[Template]:
    """The pack's examples: UI workflows (``example_workflows/*.json``) and their API twins."""
    ui = [Template(p.stem, "example (UI)", p) for p in sorted(EXAMPLES.glob("*.json"))]
    api = [Template(p.stem, "example (API)", p) for p in sorted((EXAMPLES / "api").glob("*.json"))]
    return ui + api
