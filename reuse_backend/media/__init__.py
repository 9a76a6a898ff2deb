"""Segment arithmetic, resume plans, audio windows, and video encode/probe/merge (PyAV)."""
