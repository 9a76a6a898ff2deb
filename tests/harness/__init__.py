"""Real-ComfyUI test harness for SeedReuse (host location, tiny models, workers, graph builders)."""
