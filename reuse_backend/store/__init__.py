"""The store: committed versions, staged transactions, leases, recovery and checks of caches.

This package is the store's shared vocabulary (manifest, names, staged versions, take index,
run info) and the folder store (``Cache``, cache.py); the object store lives in
``reuse_backend/bucket/``, and ``reuse_backend/stores.py`` says which one serves a location.
See docs/ARCHITECTURE.md for the interface and what each module owns.
"""
from .cache import DEFAULT_BUDGET, Cache, committed_caches, list_caches
from .reader import Snapshot, sha256_fd
from .transaction import RunInfo, Transaction

__all__ = ["Cache", "Snapshot", "Transaction", "RunInfo", "list_caches", "committed_caches",
           "sha256_fd", "DEFAULT_BUDGET"]
