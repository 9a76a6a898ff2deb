"""The folder medium: caches in a folder on a local disk or a supported shared filesystem
(``SEEDREUSE_CACHE_ROOT``). Its ``FolderCache`` (cache.py) and ``FolderStore`` (store.py) are the
store interface's (store/interface.py) over the primitives a filesystem gives: directories renamed
into place, hard links, lease files (lease_files.py). It never imports the bucket medium;
reuse_backend/stores.py picks one. See docs/ARCHITECTURE.md ("Cache layout").
"""
