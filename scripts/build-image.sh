#!/usr/bin/env bash
# Builds the imgcheck container image (docker/Dockerfile) with buildah and checks it: its scan of
# the demo image (build/demo, made by `cmake --build build --target demo_image`) must report
# IC001 and IC020 and exit 1, as on the host. Not part of the test suite: a from-scratch image
# build (Debian packages + a Release build) takes far longer than CI's budget on a 2-core machine.
#   scripts/build-image.sh [TAG]          default TAG: localhost/imgcheck:dev
# Needs buildah (scripts/deps.sh installs it); runs as root or with user namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-localhost/imgcheck:dev}
buildah bud --isolation chroot --layers -f docker/Dockerfile -t "$tag" .
if [ ! -d build/demo/image ]; then
  cmake -S . -B build -G Ninja >/dev/null && cmake --build build --target demo_image
fi
ctr=$(buildah from "$tag")
trap 'buildah rm "$ctr" >/dev/null' EXIT
set +e
out=$(buildah run --isolation chroot -v "$PWD/build/demo:/demo:ro" "$ctr" -- \
      imgcheck scan oci:/demo/image:latest --format json)
status=$?
set -e
echo "$out" | python3 -c '
import json, sys
rules = sorted({f["rule"] for f in json.load(sys.stdin)["findings"]})
print("demo scan in the image:", ", ".join(rules))
sys.exit(0 if {"IC001", "IC020"} <= set(rules) else 1)'
[ "$status" -eq 1 ] || { echo "expected exit 1 from the demo scan, got $status" >&2; exit 1; }
echo "ok: $tag"
