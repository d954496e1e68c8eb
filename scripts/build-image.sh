#!/usr/bin/env bash
# Build the teapot-lb container image (OCI layout) from Debian packages, without any image
# registry: the same image as the Dockerfile (Debian bookworm, Python 3.11, keepalived,
# the teapot-lb wheel and its dependencies, user 65532, entrypoint teapot-lb).
#
#   scripts/build-image.sh [OUT_DIR] [TAG]       (as root; defaults: build/image, the version)
#
# - the wheels come from pip as configured on this machine (its indexes and find-links);
# - the root filesystem from mmdebstrap (Debian's mirror as apt is configured here);
# - the OCI image from umoci: OUT_DIR is an OCI image layout holding teapot-lb:TAG, and
#   OUT_DIR.tar the same layout as one archive (podman load, skopeo, ctr import).
#
# It prints the image's size and the build time. docs/install.md says how to load it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$here/.venv/bin/python}"
[ -x "$python" ] || python=python3
out="${1:-$here/build/image}"
tag="${2:-$("$python" -c 'import teapot_lb; print(teapot_lb.__version__)' 2>/dev/null || echo dev)}"
tag="${tag//+/-}"
suite="${SUITE:-bookworm}"

for tool in mmdebstrap umoci; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is not installed (scripts/setup.sh)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "build-image: run as root (mmdebstrap --mode=root, umoci)" >&2; exit 1; }

start=$(date +%s)
work="$(mktemp -d /tmp/teapot-image.XXXXXX)"
trap 'rm -rf "$work"' EXIT

echo "build-image: wheels" >&2
"$python" -m pip wheel --quiet --wheel-dir "$work/wheels" "$here" >&2

echo "build-image: root filesystem ($suite)" >&2
# essential: Debian's Essential packages only (no apt in the image), plus what runs it.
# Documentation, manual pages and locales are left out; /var/lib/apt/lists is emptied.
mmdebstrap --mode=root --variant=essential --format=tar \
  --include=python3,python3-venv,keepalived,ca-certificates \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook="mkdir -p \"\$1/tmp/wheels\" && cp $work/wheels/*.whl \"\$1/tmp/wheels/\"" \
  --customize-hook='chroot "$1" python3 -m venv /opt/teapot-lb' \
  --customize-hook='chroot "$1" /opt/teapot-lb/bin/pip install --quiet --no-cache-dir --no-index --find-links=/tmp/wheels teapot-lb' \
  --customize-hook='chroot "$1" /opt/teapot-lb/bin/pip uninstall --quiet --yes pip setuptools || true' \
  --customize-hook='rm -rf "$1/tmp/wheels" "$1"/var/cache/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
  --customize-hook='find "$1/opt/teapot-lb" -name __pycache__ -prune -exec rm -rf {} +' \
  --customize-hook='chroot "$1" /opt/teapot-lb/bin/python -m compileall -q /opt/teapot-lb/lib >/dev/null' \
  --customize-hook='ln -s /opt/teapot-lb/bin/teapot-lb "$1/usr/local/bin/teapot-lb"' \
  --customize-hook='echo "nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin" >> "$1/etc/passwd"' \
  --customize-hook='echo "nonroot:x:65532:" >> "$1/etc/group"' \
  --customize-hook='mkdir -p "$1/var/lib/teapot-lb"' \
  "$suite" "$work/rootfs.tar" >&2

echo "build-image: OCI image $out:$tag" >&2
rm -rf "$out" "$out.tar"
mkdir -p "$(dirname "$out")"
umoci init --layout "$out"
umoci new --image "$out:$tag"
umoci unpack --image "$out:$tag" "$work/bundle" >/dev/null
tar -C "$work/bundle/rootfs" -xf "$work/rootfs.tar"
umoci repack --image "$out:$tag" --history.created_by "scripts/build-image.sh (mmdebstrap $suite)" "$work/bundle"
umoci config --image "$out:$tag" \
  --config.user 65532:65532 \
  --config.entrypoint teapot-lb --config.cmd --help \
  --config.env PYTHONUNBUFFERED=1 \
  --config.env PATH=/opt/teapot-lb/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.workingdir / \
  --config.label org.opencontainers.image.title=teapot-lb \
  --config.label "org.opencontainers.image.version=$tag"
umoci gc --layout "$out"
tar -C "$out" -cf "$out.tar" .

seconds=$(( $(date +%s) - start ))
layer=$(du -sb "$out/blobs" | cut -f1)
rootfs=$(tar -tvf "$work/rootfs.tar" | awk '{s += $3} END {print s}')
echo "build-image: $out:$tag built in ${seconds} s; compressed $(( layer / 1024 / 1024 )) MiB, unpacked $(( rootfs / 1024 / 1024 )) MiB" >&2
echo "{\"image\": \"$out:$tag\", \"seconds\": $seconds, \"compressed_bytes\": $layer, \"unpacked_bytes\": $rootfs}"
