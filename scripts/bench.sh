#!/usr/bin/env bash
# SeedReuse benchmarks: one table of side-by-side measurements (see python -m seedreuse_lab.bench --help).
#   scripts/bench.sh [--repeats 5] [--only encoder,auto,batch,segments,merge,cacheio,memory,gpu,full-size,full-size-llm,object-store,bucket-scale] [--json out.json]
# On ComfyUI 0.33.0 (set up from ../shared/hosts like the tests):
#   SEEDREUSE_HOST=0.33.0 bash scripts/bench.sh --only encoder,realenc
# With COMFYUI_PATH set, on that ComfyUI.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(bash scripts/setup.sh)                  # idempotent; its progress lines go to stderr
VENV=$(printf '%s\n' "$out" | tail -n 1)
if [ "${SEEDREUSE_HOST:-0.3.75}" = 0.33.0 ]; then
  export COMFYUI_PATH; COMFYUI_PATH=$(printf '%s\n' "$out" | tail -n 2 | head -n 1)
fi
exec "$VENV/bin/python" -m seedreuse_lab.bench "$@"
