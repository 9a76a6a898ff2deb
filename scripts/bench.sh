#!/usr/bin/env bash
# SeedReuse benchmarks: one table of side-by-side measurements (see python -m seedreuse_lab.bench --help).
#   scripts/bench.sh [--repeats 5] [--only encoder,auto,batch,segments,merge,cacheio,memory,gpu] [--json out.json]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SEEDREUSE_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then VENV=$(bash scripts/setup.sh | tail -n 1); fi
exec "$VENV/bin/python" -m seedreuse_lab.bench "$@"
