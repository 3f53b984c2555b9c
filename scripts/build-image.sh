#!/usr/bin/env bash
# Builds the imgcheck container image (docker/Dockerfile) with buildah and checks it: its scan of
# the demo image (build/demo, made by `cmake --build build --target demo_image`) must report
# IC001 and IC020 and exit 1, as on the host. .ci/run runs it after the test suite.
#   scripts/build-image.sh [--binaries DIR] [TAG]      default TAG: localhost/imgcheck:dev
# --binaries: the image takes an installed tree (DIR/bin, DIR/share/imgcheck/rules; built on
# Debian 12, as the image's base) instead of compiling imgcheck in its build stage.
# The version and commit compiled in and labelled (org.opencontainers.image.version, .revision):
# $IMGCHECK_VERSION and $IMGCHECK_COMMIT (scripts/release.sh sets them), else git's. The demo scan
# runs as the image's own user, which must not be root.
# The Dockerfile's bases are Docker Hub's Debian 12 images. Where neither this machine's storage
# nor a registry has them, one Debian 12 made here by debootstrap (from the mirror this
# machine's apt uses, scripts/debian-mirror) serves as both, as localhost/imgcheck-debian:12.
# Needs buildah (and debootstrap for that fallback; scripts/deps.sh installs both); runs as root
# or with user namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
binaries=()
if [ "${1:-}" = --binaries ]; then
  [ -x "${2:-}/bin/imgcheck" ] || { echo "build-image.sh: no ${2:-DIR}/bin/imgcheck" >&2; exit 2; }
  binaries=(--build-arg BINARIES=prebuilt --build-context "binaries=$(cd "$2" && pwd)")
  shift 2
fi
tag=${1:-localhost/imgcheck:dev}
mirror=$(scripts/debian-mirror)  # this machine apt's, or $DEBIAN_MIRROR
security=${DEBIAN_SECURITY_MIRROR:-${mirror%/debian}/debian-security}
local_base=localhost/imgcheck-debian:12

tmp=$(mktemp -d)
ctr=""
trap '[ -z "$ctr" ] || buildah rm "$ctr" >/dev/null; rm -rf "$tmp"' EXIT

have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }
obtain() { have_image "$1" || buildah pull -q "$1" >/dev/null 2>&1; }

# Debian 12 (minbase) with the apt sources of Debian's own images, committed as $local_base.
make_local_base() {
  local dir=$tmp/debootstrap base
  echo "debootstrap: Debian 12 from $mirror" >&2
  mkdir "$dir"
  debootstrap --variant=minbase bookworm "$dir/root" "$mirror" >"$dir/log" 2>&1 ||
    { tail -n 20 "$dir/log" >&2; return 1; }
  chroot "$dir/root" apt-get clean
  # What debootstrap took from this machine or the run (the container runtime provides them).
  rm -rf "$dir"/root/var/lib/apt/lists/* "$dir"/root/dev/* "$dir"/root/etc/resolv.conf \
    "$dir"/root/etc/hostname "$dir"/root/etc/apt/sources.list
  cat >"$dir/root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  tar -C "$dir/root" --numeric-owner -cf "$dir/root.tar" .
  base=$(buildah from scratch)
  buildah add "$base" "$dir/root.tar" / >/dev/null  # a local tar is unpacked, owners kept
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash "$base"
  buildah commit -q --rm "$base" "$local_base" >/dev/null
}

bases=()
if ! obtain docker.io/library/debian:12 || ! obtain docker.io/library/debian:12-slim; then
  echo "no registry serves docker.io/library/debian:12: building on $local_base" >&2
  have_image "$local_base" || make_local_base
  bases=(--pull=false --build-arg "BASE=$local_base" --build-arg "RUNTIME_BASE=$local_base")
fi
version=${IMGCHECK_VERSION:-$( (git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || true) | sed 's/^v//')}
commit=${IMGCHECK_COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}
buildah bud --isolation chroot --layers "${bases[@]}" "${binaries[@]}" --build-arg "VERSION=$version" \
  --build-arg "REVISION=$commit" -f docker/Dockerfile -t "$tag" .

if [ ! -d build/demo/image ]; then
  cmake -S . -B build -G Ninja >/dev/null && cmake --build build --target demo_image
fi
ctr=$(buildah from "$tag")
uid=$(buildah run --isolation chroot "$ctr" -- id -u)
[ "$uid" != 0 ] || { echo "the image runs as root" >&2; exit 1; }
echo "the image runs as uid $uid; $(buildah run --isolation chroot "$ctr" -- imgcheck version | head -n1)"
set +e
out=$(buildah run --isolation chroot -v "$PWD/build/demo:/demo:ro" "$ctr" -- \
      imgcheck scan oci:/demo/image:latest --format json -q 2>"$tmp/stderr")
status=$?
set -e
# buildah adds its own lines about the expected exit 1; anything else is shown.
[ "$status" -eq 1 ] || cat "$tmp/stderr" >&2
echo "$out" | python3 -c '
import json, sys
rules = sorted({f["rule"] for f in json.load(sys.stdin)["findings"]})
print("demo scan in the image:", ", ".join(rules))
sys.exit(0 if {"IC001", "IC020"} <= set(rules) else 1)'
[ "$status" -eq 1 ] || { echo "expected exit 1 from the demo scan, got $status" >&2; exit 1; }
echo "ok: $tag"
