#!/usr/bin/env bash
# The full-size benchmarks on a lent GPU machine (one H100 or H200 with its own PyTorch, no network):
# the Wan 2.1 I2V stack with umT5-XXL (benchmark section full-size) and Z-Image's Qwen3 4B text encoder
# (full-size-llm), each without the pack, cold, and as a hit on another worker: loads vs encodes, peak
# RSS and peak GPU memory. The weights are generated there (seeded, ~24 GB), never carried.
#
#   here:   bash scripts/gpu_fullsize.sh --prepare     # .device/: the ComfyUI 0.33.0 tarball and the
#                                                      # packages that machine lacks (cp312), ~59 MB
#   there:  bash scripts/gpu_fullsize.sh [--small] [--out DIR]
#   CPU:    bash scripts/gpu_fullsize.sh --small --python .cache/venvs/comfyui-0.33.0/bin/python
#
# --small runs the Qwen3 4B section alone (how the script is tested on CPU here, where the umT5-XXL
# stack's peak memory does not fit beside other work); --out DIR receives bench.md (the table),
# bench.json (the rows and the machine) and bench.log (progress, the generators' progress bars).
# Settings: SEEDREUSE_GPU_PYTHON (the Python with torch, default python3), COMFYUI_PATH (a ComfyUI
# 0.33.0 tree; default: the carried tarball unpacked under /tmp), SEEDREUSE_TINY_MODELS_CACHE (where
# the weights are generated, default /tmp/seedreuse-models). docs/BENCHMARKS.md, "GPU script".
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
BUNDLE="$REPO/.device"
PY="${SEEDREUSE_GPU_PYTHON:-python3}"
OUT_DIR="${OUT:-$REPO/gpu-output}"
SECTIONS="full-size,full-size-llm"
PREPARE=0
say() { printf '[gpu] %s\n' "$*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) PREPARE=1 ;;
    --small) SECTIONS="full-size-llm" ;;
    --out) OUT_DIR="$2"; shift ;;
    --python) PY="$2"; shift ;;
    *) say "unknown argument $1"; exit 2 ;;
  esac
  shift
done

# what ComfyUI 0.33.0, the pack and the lab import that the machine's image lacks, at the versions of
# the suite's 0.33.0 venv (kornia and spandrel left out: only optional nodes import them);
# --no-deps: each one named
WHEELS="av==18.1.0 torchsde==0.2.6 trampoline==0.1.2 alembic==1.20.1 Mako==1.4.3 SQLAlchemy==2.1.9 \
greenlet==3.5.6 simpleeval==1.0.8 blake3==1.0.11 comfy-kitchen==0.2.31 comfy-aimdo==0.4.13 pydantic==2.14.4 \
pydantic-core==2.50.5 pydantic-settings==2.16.3 python-dotenv==1.2.4 annotated-types==0.8.0 \
typing-inspection==0.4.5 websocket-client==1.9.2"

if [ "$PREPARE" = 1 ]; then
  # the wheels unpacked into one folder, comfy-kitchen's ROCm backend left out, as one xz tarball:
  # the wheels themselves come to ~100 MB, over what travels to that machine (64 MiB with the tree)
  hosts="${SEEDREUSE_HOSTS_DIR:-$REPO/../shared/hosts}"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$BUNDLE" "$work/wheels" "$work/site"
  cp "$hosts/comfyui-0.33.0.tar.xz" "$BUNDLE/"
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$work/wheels" $WHEELS >&2
  for w in "$work"/wheels/*.whl; do python3 -m zipfile -e "$w" "$work/site"; done
  rm -rf "$work/site/comfy_kitchen/backends/hip"
  tar -cf - -C "$work/site" . | xz -T0 -6 > "$BUNDLE/site.tar.xz.part" && mv "$BUNDLE/site.tar.xz.part" "$BUNDLE/site.tar.xz"
  say "bundle: $(du -sh "$BUNDLE" | cut -f1) in $BUNDLE: carry .device (that machine takes 64 MiB with the tree)"
  exit 0
fi

mkdir -p "$OUT_DIR"
if [ -f "$BUNDLE/site.tar.xz" ]; then
  if "$PY" -c "import sys; sys.exit(0 if sys.version_info[:2] == (3, 12) else 1)"; then
    mkdir -p /tmp/seedreuse-site && tar -xJf "$BUNDLE/site.tar.xz" -C /tmp/seedreuse-site
    export PYTHONPATH="/tmp/seedreuse-site${PYTHONPATH:+:$PYTHONPATH}"
  else
    say "the carried packages are for Python 3.12; $PY is not: using its own packages"
  fi
fi
if [ -z "${COMFYUI_PATH:-}" ]; then
  if [ -d "$REPO/.cache/hosts/comfyui-0.33.0/ComfyUI" ]; then
    COMFYUI_PATH="$REPO/.cache/hosts/comfyui-0.33.0/ComfyUI"
  else
    want=43974a40219979b154cbca1476fa994919dc498500042fe12279c1c43eeed246   # ../shared/hosts/README.md
    echo "$want  $BUNDLE/comfyui-0.33.0.tar.xz" | sha256sum -c --quiet - \
      || { say "no ComfyUI 0.33.0: run --prepare here and carry .device"; exit 2; }
    mkdir -p /tmp/seedreuse-host && tar -xJf "$BUNDLE/comfyui-0.33.0.tar.xz" -C /tmp/seedreuse-host
    COMFYUI_PATH=/tmp/seedreuse-host/ComfyUI
  fi
fi
export COMFYUI_PATH
export SEEDREUSE_TINY_MODELS_CACHE="${SEEDREUSE_TINY_MODELS_CACHE:-/tmp/seedreuse-models}"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  export SEEDREUSE_WORKER_DEVICE=gpu
  say "workers on $("$PY" -c "import torch; print(torch.cuda.get_device_name(0))")"
else
  say "no CUDA device: workers on the CPU"
fi
say "ComfyUI at $COMFYUI_PATH, models under $SEEDREUSE_TINY_MODELS_CACHE, sections $SECTIONS"
start=$(date +%s)
rc=0
"$PY" -m seedreuse_lab.bench --only "$SECTIONS" --json "$OUT_DIR/bench.json" --tmp /tmp/seedreuse-gpu-bench \
  > "$OUT_DIR/bench.md" 2> >(tee "$OUT_DIR/bench.log" >&2) || rc=$?
rm -rf /tmp/seedreuse-gpu-bench
cat "$OUT_DIR/bench.md"
say "exit $rc in $(( $(date +%s) - start )) s; results in $OUT_DIR"
exit "$rc"
