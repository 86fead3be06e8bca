#!/usr/bin/env bash
# Build identityctl's OCI container image from Debian's packages and the PEX, no base image:
#   ./build_image.sh            -> build/image/oci (OCI image layout) and
#                                  build/image/identityctl-image.tar (docker load / podman load)
#   ./build_image.sh OUT_DIR    -> the same under OUT_DIR
#   PEX=path/to/identityctl.pex ./build_image.sh    (default: dist/identityctl.pex, built by
#                                  ./build_pex.sh when absent)
# Needs apt-get and dpkg-deb (Debian or Ubuntu of the same release as the image's packages)
# and root, or user namespaces for `unshare --map-root-user`, to let the image's Python
# unpack the PEX once. The Debian layer is cached in ~/.cache/identityctl-image (or
# $IDENTITYCTL_IMAGE_CACHE) by its package list: a second build downloads nothing.
# Prints the image id (its config's digest) and its size; see docs/deployment.md.
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-build/image}"
pex="${PEX:-dist/identityctl.pex}"
for tool in apt-get apt-cache dpkg-deb chroot; do
  command -v "$tool" >/dev/null || { echo "build_image.sh: $tool is missing" >&2; exit 2; }
done
[ -f "$pex" ] || ./build_pex.sh "$pex"
# The image's creation time: the last commit's, as build_pex.sh uses (the layers' files
# all have one fixed time).
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
exec python3 deploy/image.py --pex "$pex" --out "$out"
