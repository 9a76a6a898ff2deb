#!/usr/bin/env bash
# The whole test suite: sets up what is missing (idempotent), then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(bash scripts/setup.sh --with-browser | tail -n 1)
exec "$VENV/bin/python" -m pytest tests -q -ra "$@"
