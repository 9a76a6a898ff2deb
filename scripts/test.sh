#!/usr/bin/env bash
# The whole test suite: sets up what is missing (idempotent), then runs pytest on each host of
# SEEDREUSE_TEST_HOSTS. Default: ComfyUI 0.33.0, the primary host (every tier; from the tree in
# $SEEDREUSE_HOSTS_DIR, default ../shared/hosts), then ComfyUI 0.3.75, a year older, for what
# exercises a code path that differs by host (marker both_hosts, tests/conftest.py BOTH_HOSTS).
# Without the 0.33.0 tree (a user's fresh clone) every tier runs on 0.3.75 alone and says so at
# the start and at the end.
#   SEEDREUSE_TEST_HOSTS=0.3.75 bash scripts/test.sh                                 # one host
#   SEEDREUSE_TEST_HOSTS=0.33.0 bash scripts/test.sh tests/test_encoder_reuse.py -x   # one file, one host
# With COMFYUI_PATH set, the suite runs on that ComfyUI only.
# Extra arguments replace the default target (and the host-tier selection of the second host).
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTS_DIR="${SEEDREUSE_HOSTS_DIR:-$(pwd)/../shared/hosts}"
say() { printf '[test] %s\n' "$*" >&2; }

ONE_HOST_NOTE=""
if [ -n "${COMFYUI_PATH:-}" ]; then
  HOSTS="own"
elif [ -n "${SEEDREUSE_TEST_HOSTS:-}" ]; then
  HOSTS="$SEEDREUSE_TEST_HOSTS"
elif [ -f "$HOSTS_DIR/comfyui-0.33.0.tar.xz" ]; then
  HOSTS="0.33.0 0.3.75"
else
  HOSTS="0.3.75"
  ONE_HOST_NOTE="this run tested ONE host, ComfyUI 0.3.75: ComfyUI 0.33.0 was not run because $HOSTS_DIR/comfyui-0.33.0.tar.xz is absent (set SEEDREUSE_HOSTS_DIR to the folder that holds it)"
fi
case " $HOSTS " in
  *" 0.33.0 "*) [ -f "$HOSTS_DIR/comfyui-0.33.0.tar.xz" ] \
      || { say "ComfyUI 0.33.0 needs $HOSTS_DIR/comfyui-0.33.0.tar.xz (set SEEDREUSE_HOSTS_DIR)"; exit 2; } ;;
esac
case "$HOSTS" in
  own|*" "*) ;;
  *) [ -n "$ONE_HOST_NOTE" ] || ONE_HOST_NOTE="this run tested ONE host: ComfyUI $HOSTS" ;;
esac
[ -z "$ONE_HOST_NOTE" ] || say "$ONE_HOST_NOTE"

# tests marked one_host(<version>) run once, on that host, when it is among these (tests/conftest.py)
export SEEDREUSE_RUN_HOSTS="$HOSTS"
status=0
first=1
summary=()
for h in $HOSTS; do
  args=("$@")
  if [ "$h" = own ]; then
    VENV=$(bash scripts/setup.sh --with-browser | tail -n 1)
    label="ComfyUI at $COMFYUI_PATH"
    [ ${#args[@]} -eq 0 ] && args=(tests)
    run=("$VENV/bin/python" -m pytest -q -ra --durations=40 "${args[@]}")
  else
    out=$(SEEDREUSE_HOST="$h" bash scripts/setup.sh --with-browser)
    VENV=$(printf '%s\n' "$out" | tail -n 1)
    label="ComfyUI $h"
    # the first host runs every tier; a later one only what differs by host (both_hosts)
    if [ ${#args[@]} -eq 0 ]; then
      args=(tests)
      [ "$first" = 1 ] || args=(tests -m "both_hosts and not hostfree")
    fi
    if [ "$h" = 0.3.75 ]; then
      run=(env -u COMFYUI_PATH "$VENV/bin/python" -m pytest -q -ra --durations=40 "${args[@]}")
    else
      run=(env COMFYUI_PATH="$(printf '%s\n' "$out" | tail -n 2 | head -n 1)" "$VENV/bin/python" -m pytest -q -ra --durations=40 "${args[@]}")
    fi
  fi
  say "=== $label: pytest ${args[*]}"
  start=$(date +%s)
  rc=0
  "${run[@]}" || rc=$?
  summary+=("$label: exit $rc in $(( $(date +%s) - start )) s")
  [ "$rc" = 0 ] || status=$rc
  first=0
done
for line in "${summary[@]}"; do say "$line"; done
[ -z "$ONE_HOST_NOTE" ] || say "$ONE_HOST_NOTE"
exit "$status"
