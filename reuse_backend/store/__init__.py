"""The store interface (interface.py: the protocols and the invariants every medium keeps) and the
engine written once over the primitives a medium gives: transactions (transaction.py, staged.py,
staging.py, rebase.py), leases (lease.py), single flight (claim.py), the size budget's policy
(budget.py), and what both media share about a version (manifest.py, take_index.py, snapshot.py,
file_checks.py, run_info.py, roots.py, namespaces.py, check.py). The media are ``reuse_backend/folder/``
and ``reuse_backend/bucket/``; ``reuse_backend/stores.py`` says which one serves a location.
"""
