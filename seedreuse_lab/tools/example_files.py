"""File names of the example workflows, and how a UI workflow names its API twin.

ComfyUI lists a custom node pack's templates (GET /workflow_templates) as the file names of
example_workflows/*.json without the extension, and the template browser (frontend 1.32.9 and
1.58.1 alike) shows that name as the card's title AND, with every "-" and "_" replaced by a
space, as its description; the thumbnail is example_workflows/<name>.jpg. There is no other
metadata channel for a custom node pack's templates, so the UI files carry human titles:

    example_workflows/<Title>.json        the UI (LiteGraph) workflow the template browser opens
    example_workflows/<Title>.jpg         its thumbnail
    example_workflows/api/<id>.json       its API-format twin (snake_case id: API clients and docs)

The pairing lives in ONE place, the UI workflow itself::

    "extra": {"seedreuse_example": {"id": "<id>", "api": "api/<id>.json"}, ...}

written by the generators (build_wan21_examples.py, make_family_examples.py) and read by the
tests (api_twin below). A title is short, has no "_" (the description would show a space), no
" - " (it would read "a   b"), and none of the characters Windows refuses in a file name.
Only the standard library.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "example_workflows"
# the pack's Comfy Registry id (pyproject.toml ``name``): the ``cnr_id`` of its nodes in a UI workflow
PACK_CNR_ID = "seedreuse"
PAIRING_KEY = "seedreuse_example"
MAX_TITLE_CHARS = 56
_ID = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")
_TITLE = re.compile(r"^[A-Z][A-Za-z0-9.,()' -]*[A-Za-z0-9)]$")


def title_problems(title: str) -> list[str]:
    """Why a file stem does not read well as the template browser's title and description."""
    out = []
    if not _TITLE.match(title):
        out.append("letters, digits, spaces and . , ( ) ' - only, starting with a capital")
    if "_" in title or " - " in title or "  " in title:
        out.append('no "_", " - " or double spaces (the card\'s description replaces "-" and "_" by spaces)')
    if len(title) > MAX_TITLE_CHARS:
        out.append(f"at most {MAX_TITLE_CHARS} characters (it is {len(title)})")
    if " " not in title:
        out.append("a title of several words, not an id")
    return out


def pairing(example_id: str) -> dict:
    """What a UI workflow's extra carries under PAIRING_KEY."""
    if not _ID.match(example_id):
        raise ValueError(f"example id {example_id!r} is not snake_case")
    return {"id": example_id, "api": f"api/{example_id}.json"}


def file_names(titles: dict[str, str]) -> dict[str, tuple[str, str, str]]:
    """id -> (UI file, thumbnail, API twin) relative to example_workflows/; checks the titles."""
    bad = {t: p for t in titles.values() if (p := title_problems(t))}
    if bad:
        raise ValueError(f"example titles that would not read well in the template browser: {bad}")
    if len(set(titles.values())) != len(titles):
        raise ValueError("two examples share a title")
    return {i: (f"{t}.json", f"{t}.jpg", pairing(i)["api"]) for i, t in titles.items()}


def example_id(ui: dict) -> str | None:
    """The id (API twin's stem) a UI workflow names, or None."""
    p = (ui.get("extra") or {}).get(PAIRING_KEY) or {}
    return p.get("id") if isinstance(p, dict) else None


def api_twin(ui_path: Path) -> Path:
    """The API twin a UI workflow names in extra.seedreuse_example.api (a path next to it).
    Raises LookupError when the file names none."""
    p = (json.loads(Path(ui_path).read_text()).get("extra") or {}).get(PAIRING_KEY)
    if not isinstance(p, dict) or not isinstance(p.get("api"), str):
        raise LookupError(f"{Path(ui_path).name} names no API twin (extra.{PAIRING_KEY}.api)")
    return Path(ui_path).parent / p["api"]


def ui_files(folder: Path = EXAMPLES) -> list[Path]:
    return sorted(Path(folder).glob("*.json"))


def pairs(folder: Path = EXAMPLES) -> dict[str, Path]:
    """id -> UI file, for every UI workflow of the folder that names an API twin."""
    out = {}
    for p in ui_files(folder):
        i = example_id(json.loads(p.read_text()))
        if i:
            out[i] = p
    return out


def draw_caption(img, title: str) -> int:
    """The thumbnail's caption (Pillow image, drawn in place): the pack's name at the top right
    and the title in up to two lines below it, large enough to read on a template card (frontend
    1.58 lays a "Node graph" chip over the top-left corner, 1.32 cuts the card's title to one
    line). Returns the y where the graph's drawing may start."""
    from PIL import ImageDraw, ImageFont

    d = ImageDraw.Draw(img)
    W = img.size[0]
    label = ImageFont.load_default(size=24)
    d.text((W - 16, 14), "SeedReuse", font=label, fill=(80, 220, 200), anchor="ra")
    font = ImageFont.load_default(size=28)
    words, lines = title.split(), [""]
    for w in words:
        cand = f"{lines[-1]} {w}".strip()
        if d.textlength(cand, font=font) <= W - 32 or not lines[-1]:
            lines[-1] = cand
        elif len(lines) < 2:
            lines.append(w)
        else:
            lines[-1] = cand  # a third line would not fit: the second one runs on (kept short by MAX_TITLE_CHARS)
    y = 62
    for line in lines:
        d.text((16, y), line, font=font, fill=(235, 235, 235))
        y += 34
    return y + 14
