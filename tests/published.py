"""The pack as the Comfy Registry publishes it: the git-tracked files less what ``.comfyignore``
names (gitignore patterns, as ``comfy node pack`` applies them), read with git itself."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _git(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def published_files() -> list[str]:
    """Paths (relative, posix) of every file a published archive holds."""
    tracked = set(_git("ls-files", "-c", "--cached", "--others", "--exclude-standard"))
    ignored = set(_git("ls-files", "-c", "--others", "--exclude-standard", "-i", "--exclude-from=.comfyignore"))
    return sorted(p for p in tracked - ignored if (REPO / p).is_file())


def copy_published(dest: Path) -> Path:
    """The published file set copied (not linked) into ``dest``; returns ``dest``."""
    for rel in published_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    return dest
