"""Per-user cache namespaces under one cache root (ComfyUI's ``--multi-user``).

Layout: ``<root>/<cache>`` is the shared namespace (single-user servers, and multi-user servers
whose operator chose a shared namespace); ``<root>/.users/<user>/<cache>`` is one user's.
Automatic caches (``SEEDREUSE_AUTO``, nodes/auto_mode.py) live in the ``.auto/`` folder of the
namespace they belong to: ``<root>/.auto/<cache>``, ``<root>/.users/<user>/.auto/<cache>``.

Invariants, enforced here:
- a user's namespace is derived from the user id alone, and cache names never contain '/' or
  '.' (roots.validate_cache_name), so no cache name a user can type names a cache of another
  user or of the shared namespace: isolation does not depend on any route or node filtering;
- ``.users`` starts with a dot, which no cache name can, so the namespace folder never
  collides with a cache of the shared namespace;
- ``.auto`` starts with a dot too: an automatic cache never has the path of a named cache, and
  a named Session can never reach an automatic cache (nor the other way round);
- a user id becomes a path component only after validation (plain characters, no dot-only
  names), and a namespace folder that is a symlink is refused: a hostile or careless folder
  cannot redirect one user's caches into another place.

What this does not guarantee: ComfyUI's ``--multi-user`` identifies users by the
``comfy-user`` request header, which it does not authenticate; isolation between users is as
strong as that identification (run an authenticating proxy in front of a shared server).
Filesystem permissions are not per user either: every worker writes as its own OS user.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .. import settings
from ..errors import InvalidRequestError
from ..storage import fsops
from .roots import is_url

USERS_DIR = ".users"
AUTO_DIR = ".auto"
USER_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
_USER_RE = re.compile(USER_PATTERN)


def validate_user(user) -> str:
    if (not isinstance(user, str) or not _USER_RE.fullmatch(user) or set(user) <= {"."}
            or ".." in user):
        raise InvalidRequestError(
            f"invalid ComfyUI user id: {user!r}", expected=f"a user id matching {USER_PATTERN}",
            actual=repr(user), fix="pick the user again in ComfyUI's user selection (the comfy-user header)")
    return user


def user_root(root: Path | str, user: str | None, *, create: bool = True) -> Path | str:
    """The folder that holds ``user``'s caches: ``root`` itself when ``user`` is None (no
    multi-user server) or the operator forced a shared namespace. On an object store (``root``
    an ``s3://`` URL) the same folders are key prefixes: the URL with ``/.users/<user>``."""
    if user is None or settings.shared_namespace():
        return root if is_url(root) else Path(root)
    validate_user(user)
    if is_url(root):
        return f"{root.rstrip('/')}/{USERS_DIR}/{user}"
    root = Path(root)
    return _folders(root, (root / USERS_DIR, root / USERS_DIR / user), create)


def auto_root(ns_root: Path | str, *, create: bool = True) -> Path | str:
    """The folder of the automatic caches of one namespace (``ns_root``: a ``user_root``)."""
    if is_url(ns_root):
        return f"{ns_root.rstrip('/')}/{AUTO_DIR}"
    ns_root = Path(ns_root)
    return _folders(ns_root, (ns_root / AUTO_DIR,), create)


def is_auto_root(path: Path | str) -> bool:
    """True for the folder of a namespace's automatic caches (its budget: usage.budget_for)."""
    return str(path).rstrip("/").rsplit("/", 1)[-1] == AUTO_DIR


def _folders(root: Path, chain: tuple, create: bool) -> Path:
    ns = chain[-1]
    for d in chain:
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            if not create:
                return ns
            fsops.mkdir(d, exist_ok=True)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidRequestError(
                f"user namespace folder {d} is not a directory", expected="a directory",
                actual=stat.filemode(st.st_mode), fix=f"remove {d}; the pack recreates it")
    return ns


def namespaces(root: Path | str) -> list[tuple[str | None, Path]]:
    """Every namespace under ``root``: (None, root) first, then (user, folder) for each valid
    user folder; entries that are not plain directories with a valid name are skipped (the
    check reports them as orphaned)."""
    root = Path(root)
    out: list[tuple[str | None, Path]] = [(None, root)]
    base = root / USERS_DIR
    try:
        names = sorted(os.listdir(base))
    except (FileNotFoundError, NotADirectoryError):
        return out
    for n in names:
        p = base / n
        try:
            ok = stat.S_ISDIR(os.lstat(p).st_mode) and bool(_USER_RE.fullmatch(n)) and ".." not in n
        except FileNotFoundError:
            continue
        if ok:
            out.append((n, p))
    return out


def invalid_entries(root: Path | str) -> list[str]:
    """Entries of ``<root>/.users`` that are not valid namespaces (for check())."""
    base = Path(root) / USERS_DIR
    try:
        names = sorted(os.listdir(base))
    except (FileNotFoundError, NotADirectoryError):
        return []
    valid = {n for n, _ in namespaces(root) if n is not None}
    return [f"{USERS_DIR}/{n}" for n in names if n not in valid]
