#!/usr/bin/env bash
# Assembles the local base image the Dockerfiles are built on offline (`--build-arg BASE=...`):
# a minimal Debian bookworm rootfs from debootstrap (through the apt mirror this machine uses),
# with this machine's Node and pnpm copied in, imported with `podman import`. The rootfs is cached
# under node_modules/.cache/taskline-images; the image is re-imported only when Node or pnpm change.
# Prints the image name.
set -euo pipefail
cd "$(dirname "$0")/../../.."
CACHE=node_modules/.cache/taskline-images
mkdir -p "$CACHE"
NODE_BIN=$(command -v node)
PNPM_DIR=$(dirname "$(dirname "$(readlink -f "$(command -v pnpm)")")")
TAG="node$(node --version | tr -d v)-pnpm$(pnpm --version)"
IMAGE=localhost/taskline-base:bookworm-$TAG
if podman image exists "$IMAGE"; then echo "$IMAGE"; exit 0; fi

ROOTFS_TAR=$CACHE/debian-bookworm-minbase.tar
if [ ! -s "$ROOTFS_TAR" ]; then
  MIRROR=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
  DIR=$(mktemp -d)
  echo "debootstrap bookworm from ${MIRROR:=http://deb.debian.org/debian} (once; cached)" >&2
  debootstrap --variant=minbase bookworm "$DIR" "$MIRROR" >&2
  rm -rf "$DIR"/var/cache/apt/archives/*.deb "$DIR"/var/lib/apt/lists/*
  tar -C "$DIR" -cf "$ROOTFS_TAR.tmp" . && mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  rm -rf "$DIR"
fi

DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
tar -C "$DIR" -xf "$ROOTFS_TAR"
install -m 0755 "$NODE_BIN" "$DIR/usr/local/bin/node"
mkdir -p "$DIR/usr/local/lib/node_modules"
cp -a "$PNPM_DIR" "$DIR/usr/local/lib/node_modules/pnpm"
ln -sf ../lib/node_modules/pnpm/bin/pnpm.cjs "$DIR/usr/local/bin/pnpm"
# The distroless runtime images start node as their entrypoint; this base does the same.
tar -C "$DIR" -cf - . | podman import \
  --change 'ENTRYPOINT ["/usr/local/bin/node"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  - "$IMAGE" >&2
echo "$IMAGE"
