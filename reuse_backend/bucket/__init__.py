"""The object store: caches on an S3-compatible bucket (``SEEDREUSE_CACHE_URL=s3://bucket/prefix``).

The same interface as the folder store (reuse_backend/stores.py chooses); a version becomes
current by one conditional create of a numbered commit record; data objects are immutable and
named by content; a local read-through tier on each host holds what it fetched. See
docs/ARCHITECTURE.md ("The store interface") and docs/OBJECT_STORAGE.md.
"""
