"""Which medium serves a cache location: a folder, or the object store for a URL; the one module
of the pack that imports a medium.

A location is what the pack passes around as a cache "root": a folder path (the folder medium,
``folder/``) or ``s3://bucket/prefix`` (the object store, ``bucket/``), optionally followed by
namespace folders (``/.users/<user>``, ``/.auto``; store/namespaces.py). Both media give the same
interface (store/interface.py): nodes/, media/ and the cache tool use what the functions here
return and never know which medium serves them.
"""
from __future__ import annotations

from .folder.cache import FolderCache
from .folder.store import FolderStore
from .store.interface import Cache, Store
from .store.roots import is_url


def open_cache(location, name: str, **kw) -> Cache:
    """The cache handle of ``name`` at ``location`` (name validated, settings read once)."""
    if is_url(location):
        from .bucket.cache import BucketCache     # boto3 is imported only for a bucket
        return BucketCache(location, name, **kw)
    return FolderCache(location, name, **kw)


def at(location, **kw) -> Store:
    """The store of a whole location (list, describe, check, delete, gc, summary): a FolderStore or
    a BucketStore (folder/store.py, bucket/store.py), one interface."""
    if is_url(location):
        from .bucket.store import BucketStore
        return BucketStore(location, **kw)
    return FolderStore(location)


def probe(location, peer=None):
    """The primitives the store needs of the medium at ``location``, checked (a ProbeReport,
    store/check.py): a folder's filesystem (``peer``: another mount of it), a bucket's endpoint."""
    if is_url(location):
        from .bucket.probe import report
        return report(location)
    from .folder.probe import probe as probe_folder
    return probe_folder(location, peer)
