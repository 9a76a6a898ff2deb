"""Per-user cache namespaces (``<root>/.users/<user>/``): user ids never become unchecked paths,
a namespace folder that is not a plain directory is refused, and ``gc`` budgets each namespace
on its own (one user's caches never make room for another's)."""
from __future__ import annotations

import json
import os

import pytest

from tests.backend.storehelp import cache_marker, write_version
from reuse_backend import settings
from reuse_backend.cli import main as cli
from reuse_backend.errors import InvalidRequestError
from reuse_backend.folder.cache import FolderCache
from reuse_backend.folder import usage
from reuse_backend.store import budget as budgets
from reuse_backend.store import namespaces as ns
from reuse_backend.folder.check import check_root


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv(settings.MAX_BYTES, raising=False)
    monkeypatch.delenv(settings.SHARED_NAMESPACE, raising=False)


def test_user_root_layout_and_shared_setting(tmp_path, monkeypatch):
    assert ns.user_root(tmp_path, None) == tmp_path
    alice = ns.user_root(tmp_path, "alice_1b2c")
    assert alice == tmp_path / ".users" / "alice_1b2c" and alice.is_dir()
    monkeypatch.setenv(settings.SHARED_NAMESPACE, "1")
    assert ns.user_root(tmp_path, "alice_1b2c") == tmp_path


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "../x", "", "a\x00b", "x" * 200, "..hidden", 7])
def test_user_ids_are_validated(tmp_path, bad):
    with pytest.raises(InvalidRequestError) as ei:
        ns.user_root(tmp_path, bad)
    assert "comfy-user" in ei.value.fix
    assert not (tmp_path / ".users").exists() or os.listdir(tmp_path / ".users") == []


def test_a_symlinked_namespace_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "root"
    (root / ".users").mkdir(parents=True)
    os.symlink(elsewhere, root / ".users" / "mallory_1")
    with pytest.raises(InvalidRequestError) as ei:
        ns.user_root(root, "mallory_1")
    assert "not a directory" in ei.value.message
    assert [u for u, _ in ns.namespaces(root)] == [None]        # never listed either
    assert ns.invalid_entries(root) == [".users/mallory_1"]


def test_gc_budgets_each_namespace_on_its_own(tmp_path):
    root = tmp_path
    a, b = ns.user_root(root, "alice_1"), ns.user_root(root, "bob_2")
    for i, name in enumerate(("a1", "a2", "a3")):
        write_version(FolderCache(a, name), i + 1)
        os.utime(a / name, (1000 + i,) * 2)
    write_version(FolderCache(b, "b1"), 9)
    os.utime(b / "b1", (1,) * 2)                       # bob's cache is the oldest of all
    one = usage.root_size(a) // 3 + 4096
    assert usage.root_size(b) < 2 * one
    rc = cli(["--root", str(root), "gc", "--max-bytes", str(2 * one), "--json"])
    assert rc == 0
    assert cache_marker(FolderCache(b, "b1")) == 9, "another user's cache was evicted to make room"
    assert cache_marker(FolderCache(a, "a1")) is None and cache_marker(FolderCache(a, "a3")) == 3
    assert usage.root_size(a) <= 2 * one


def test_gc_json_lists_users(tmp_path, capsys):
    write_version(FolderCache(ns.user_root(tmp_path, "alice_1"), "x"), 1)
    assert cli(["--root", str(tmp_path), "gc", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["users"]) == ["alice_1"]
    assert [c["name"] for c in out["users"]["alice_1"]["caches"]] == ["x"]


def test_gc_budgets_each_folder_of_automatic_caches_on_its_own(tmp_path, capsys):
    """gc visits ``<namespace>/.auto`` too (each budgeted on its own: automatic caches never make
    room for named ones); without --max-bytes or SEEDREUSE_MAX_BYTES they keep their default."""
    alice = ns.user_root(tmp_path, "alice_1")
    autos = {"shared": ns.auto_root(tmp_path), "alice": ns.auto_root(alice)}
    for where in autos.values():
        for i, name in enumerate(("old", "new")):
            write_version(FolderCache(where, name), i + 1)
            os.utime(where / name, (1000 + i,) * 2)
    write_version(FolderCache(tmp_path, "named"), 7)
    os.utime(tmp_path / "named", (1,) * 2)                   # the oldest of all
    assert cli(["--root", str(tmp_path), "gc", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["budget"] is None and out["automatic"]["budget"] == budgets.DEFAULT_AUTO_BUDGET
    assert [c["name"] for c in out["users"]["alice_1"]["automatic"]["caches"]] == ["old", "new"]
    one = usage.root_size(autos["shared"]) // 2 + 4096
    assert cli(["--root", str(tmp_path), "gc", "--max-bytes", str(one)]) == 0
    text = capsys.readouterr().out
    assert "\nautomatic caches: " in text and "user alice_1: automatic caches: " in text, text
    for where in autos.values():
        assert cache_marker(FolderCache(where, "old")) is None and cache_marker(FolderCache(where, "new")) == 2
    assert cache_marker(FolderCache(tmp_path, "named")) == 7


def test_gc_leaves_a_dot_auto_that_is_not_a_folder(tmp_path, capsys):
    (tmp_path / ".auto").write_text("not a folder")
    write_version(FolderCache(tmp_path, "x"), 1)
    assert cli(["--root", str(tmp_path), "gc", "--dry-run", "--json"]) == 0
    assert "automatic" not in json.loads(capsys.readouterr().out)


def test_check_root_does_not_call_the_users_folder_orphaned(tmp_path):
    write_version(FolderCache(ns.user_root(tmp_path, "alice_1"), "x"), 1)
    problems = check_root(tmp_path)
    assert not [p for p in problems if ".users" in json.dumps(p, default=str)], problems


def test_check_reports_an_invalid_namespace_and_checks_user_caches(tmp_path, capsys):
    a = ns.user_root(tmp_path, "alice_1")
    write_version(FolderCache(a, "x"), 1)
    os.symlink(tmp_path, tmp_path / ".users" / "loop_9")
    problems = check_root(tmp_path)
    assert [p.code for p in problems if p.code == "orphaned_namespace"] == ["orphaned_namespace"]
    assert cli(["--root", str(tmp_path), "check"]) == 1
    assert "orphaned_namespace" in capsys.readouterr().out
    os.unlink(tmp_path / ".users" / "loop_9")
    # a damaged file in a user's cache is found by the root-wide check
    f = next(p for p in (a / "x").iterdir() if p.name.endswith(".safetensors"))
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    assert cli(["--root", str(tmp_path), "check"]) == 1
    assert cli(["--root", str(tmp_path), "--user", "alice_1", "check", "x"]) == 1
    assert cli(["--root", str(tmp_path), "--user", "alice_1", "list"]) == 0


def test_automatic_caches_have_their_own_folder_and_always_a_budget(tmp_path, monkeypatch):
    """``<namespace>/.auto/``: never a named cache's path, not counted in the named root's size,
    bounded without SEEDREUSE_MAX_BYTES (budgets.DEFAULT_AUTO_BUDGET), evicted LRU like named ones."""
    auto = ns.auto_root(tmp_path)
    assert auto == tmp_path / ".auto" and auto.is_dir() and ns.is_auto_root(auto)
    assert ns.auto_root(ns.user_root(tmp_path, "bob")) == tmp_path / ".users" / "bob" / ".auto"
    assert budgets.budget_for(tmp_path) is None and budgets.budget_for(auto) == budgets.DEFAULT_AUTO_BUDGET
    assert budgets.auto_budget_source() == (budgets.DEFAULT_AUTO_BUDGET, "the default for automatic caches")
    write_version(FolderCache(auto, "auto-one"), 1)
    assert usage.root_size(tmp_path) < usage.root_size(auto), "the named root does not count .auto"
    one = usage.root_size(auto)
    monkeypatch.setattr(budgets, "DEFAULT_AUTO_BUDGET", int(1.5 * one))
    os.utime(auto / "auto-one", (1000, 1000))
    write_version(FolderCache(auto, "auto-two"), 2)                 # over the default: the older one goes
    assert not (auto / "auto-one").exists() and cache_marker(FolderCache(auto, "auto-two")) == 2
    write_version(FolderCache(tmp_path, "named"), 3)                # a named root stays unbounded
    write_version(FolderCache(tmp_path, "named2"), 4)
    assert (tmp_path / "named").is_dir() and (tmp_path / "named2").is_dir()
    monkeypatch.setenv(settings.MAX_BYTES, "7G")             # the operator's budget applies to both
    assert budgets.budget_for(auto) == budgets.budget_for(tmp_path) == 7 << 30
    assert budgets.auto_budget_source() == (7 << 30, settings.MAX_BYTES)
    # and evicts in both alike: least recently used first, never the cache that just committed
    monkeypatch.setenv(settings.MAX_BYTES, str(int(1.5 * one)))
    for old in (tmp_path / "named", tmp_path / "named2", auto / "auto-two"):
        os.utime(old, (1000, 1000))
    write_version(FolderCache(tmp_path, "named3"), 5)
    write_version(FolderCache(auto, "auto-three"), 6)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["named3"]
    assert sorted(p.name for p in auto.iterdir() if not p.name.startswith(".")) == ["auto-three"]
    (tmp_path / "x").mkdir()
    os.symlink(tmp_path / "x", tmp_path / "x" / ".auto")
    with pytest.raises(InvalidRequestError):
        ns.auto_root(tmp_path / "x")
