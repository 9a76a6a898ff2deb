"""The store: committed versions, staged transactions, locks, recovery and checks of caches.

``Cache`` (cache.py) is the entry point; see docs/ARCHITECTURE.md for what each module owns.
"""
from .cache import DEFAULT_BUDGET, Cache, committed_caches, list_caches
from .reader import Snapshot, sha256_fd
from .transaction import RunInfo, Transaction

__all__ = ["Cache", "Snapshot", "Transaction", "RunInfo", "list_caches", "committed_caches",
           "sha256_fd", "DEFAULT_BUDGET"]
