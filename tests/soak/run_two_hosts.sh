#!/usr/bin/env bash
# The soak across two simulated hosts (network namespaces + hostnames, each host seeing the
# shared cache folder through its own sshfs mount; plus a bind-mount control). Needs root.
# Not part of CI: it installs iproute2 / sshfs / openssh-server when missing.
#   tests/soak/run_two_hosts.sh [--requests 12] [--profile sshfs-strict|sshfs-default|bind|all] [--keep]
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then echo "run as root (network namespaces, FUSE mounts, sshd)" >&2; exit 2; fi
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v sshfs >/dev/null || need+=(sshfs)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y "${need[@]}" || { apt-get update && apt-get install -y "${need[@]}"; }
fi
VENV=${SEEDREUSE_VENV:-.venv}
exec "$VENV/bin/python" -m tests.soak.two_hosts "$@"
