"""What the pure-store tests of the object-store tier share: committing and reading back a
version, the keys under a cache, a writer subprocess (bucket_writer.py), waiting out a lease."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from reuse_backend.bucket import client as clients, leases, location, log as commit_log
from reuse_backend.bucket.cache import BucketCache
from reuse_backend.store.run_info import RunInfo

from .bucket_writer import image_value, stage, text_value

REPO = Path(__file__).resolve().parents[2]
NAME = "c"

__all__ = ["REPO", "NAME", "commit", "current", "read_back", "keys_under", "prefix_keys", "Writer", "wait_stale",
           "image_value", "text_value", "stage"]


def commit(url: str, root, marker: int, *, name: str = NAME, run_id: str | None = None):
    """Commit slots text and image with ``marker`` (in this process): (transaction, version)."""
    cache = BucketCache(url, name, local_root=root)
    tx = cache.begin(RunInfo(run_id=run_id) if run_id else None)
    stage(tx, marker)
    return tx, tx.commit()


def current(url: str, root, name: str = NAME) -> tuple[int | None, dict | None]:
    """(seq, record) of the newest commit record, read from the bucket."""
    cache = BucketCache(url, name, local_root=root)
    return commit_log.latest(cache.client, cache.keys)


def read_back(url: str, root, name: str = NAME) -> tuple[str, float]:
    """(version, marker) of what a reader on a fresh host gets: every file of the current
    version is loaded (sizes and hashes checked) and both slots must hold one marker."""
    with BucketCache(url, name, local_root=root).snapshot() as snap:
        text, image = snap.load_slot("text"), snap.load_slot("image")
        marker = float(text["cond"][0, 0])
        assert torch.equal(text["cond"], text_value(marker)["cond"]), "slot text is not one writer's"
        assert torch.equal(image["big"], image_value(marker)["big"]), "the slots of this version are a mix"
        return snap.version, marker


def keys_under(cache: BucketCache) -> set[str]:
    objs, _ = cache.client.list(cache.keys.base)
    return {o.key for o in objs}


def prefix_keys(url: str) -> set[str]:
    """Every key under the location ``url`` (no cache handle: nothing is probed or written)."""
    loc = location.parse(url)
    objs, _ = clients.for_bucket(loc.bucket).list(loc.prefix)
    return {o.key for o in objs}


def wait_stale(cache: BucketCache, run_id: str, bound_s: float = 90.0) -> None:
    """Until the run lease of ``run_id`` is stale on the store's clock or gone (bounded; the
    writer must be dead or stopped)."""
    key = cache.keys.lease(run_id)
    deadline = time.monotonic() + bound_s
    while True:
        alive, _ = leases.live(cache.client, cache.keys.lease_prefix, cache.lease_s)
        if not any(o["key"] == key for o in alive):
            return
        assert time.monotonic() < deadline, f"the lease {key} never went stale"
        time.sleep(0.3)


class Writer:
    """A bucket_writer.py subprocess (``env``: its S3 settings, lease, local tier)."""

    def __init__(self, env: dict, *args, prefix=()):
        """``prefix``: a command the writer runs under (e.g. ``unshare --pid ...``)."""
        self.proc = subprocess.Popen([*prefix, sys.executable, "-m", "tests.object_store.bucket_writer",
                                      *map(str, args)], cwd=REPO, env={**os.environ, **env}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def say(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, line: str) -> None:
        got = self.proc.stdout.readline().strip()
        assert got == line, (got, self.proc.stderr.read() if self.proc.poll() is not None else "")

    def outcome(self, timeout: float = 120.0) -> dict:
        out, err = self.proc.communicate(timeout=timeout)
        lines = out.strip().splitlines()
        assert lines, err[-3000:]
        return json.loads(lines[-1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc) -> None:
        self.kill()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()
