"""reuse_backend: the host-free logic of SeedReuse (plain Python + torch/numpy/PyAV).

It never imports ComfyUI: nodes/ adapts ComfyUI types and calls into this package, and
every module here is testable with plain pytest.
"""
