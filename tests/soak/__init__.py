"""Soak tests: many serial requests against real ComfyUI workers sharing one cache root,
with injected failures, interrupts and SIGKILLs (see soak.py, run.py, two_hosts.py)."""
