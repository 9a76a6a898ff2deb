"""Support-matrix tests: one real-server, cross-worker test per model family (docs/SUPPORT_MATRIX.md)."""
