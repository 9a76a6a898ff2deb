#!/usr/bin/env bash
# The whole test suite: sets up what is missing (idempotent), then runs pytest.
# Extra arguments replace the default target, e.g. `bash scripts/test.sh tests/backend -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(bash scripts/setup.sh --with-browser | tail -n 1)
if [ $# -eq 0 ]; then set -- tests; fi
exec "$VENV/bin/python" -m pytest -q -ra "$@"
