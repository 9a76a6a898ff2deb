#!/usr/bin/env bash
# The main job on an embedded default: sets up what is missing, generates the tiny models,
# starts two ComfyUI workers sharing one cache folder, runs encoder and segment reuse across them.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[demo] checking the environment (the first run installs torch and ComfyUI: a few minutes)" >&2
VENV=$(bash scripts/setup.sh | tail -n 1)   # its progress lines go to stderr; the last stdout line is the venv
exec "$VENV/bin/python" -m seedreuse_lab.demo "$@"
