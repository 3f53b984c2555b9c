#!/usr/bin/env bash
# Builds imgcheck's release artifacts, all of one version, into OUT:
#   imgcheck_DEBVERSION_amd64.deb           /usr/bin, /usr/share/imgcheck/rules, completions, man pages;
#                                           Depends from dpkg-shlibdeps plus ca-certificates; lintian
#   imgcheck-VERSION-linux-amd64.tar.gz     relocatable: bin/, lib/ (the shared libraries a minimal
#                                           Debian 12 lacks, found through an $ORIGIN RUNPATH),
#                                           share/imgcheck/rules, licences
#   imgcheck-VERSION-image.oci.tar          docker/Dockerfile's image of the same binaries
#                                           (scripts/build-image.sh --binaries, with
#                                           its demo scan as a non-root user), tagged
#                                           localhost/imgcheck:VERSION in buildah's storage too
#   SHA256SUMS                              of the three
#   scripts/release.sh [--no-image] VERSION OUT
#   scripts/release.sh --set-action vVERSION    before tagging: action.yml and the GitLab
#                                               template run that image
# VERSION is the tag without its "v" (0.3.0); it is compiled in (IMGCHECK_VERSION_OVERRIDE), so
# `imgcheck version` says what the file names say. The binaries are built by Debian's hardening
# flags (scripts/hardening-flags) in build/release (ccache when installed).
# IMGCHECK_RELEASE_BUILD_DIR names an existing build configured with the same flags and build
# type to take them from (.ci/run: the suite's build/, which scripts/dev configures so; the
# version is set there for the run and reset after). --no-image: where buildah cannot build
# (.ci/run says why).
# Needs what scripts/deps.sh installs (dpkg-dev, lintian, patchelf, buildah).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --set-action ] && [ $# -eq 2 ]; then
  sed -i -E "s|(IMGCHECK_RELEASED_IMAGE: ghcr.io/[a-z0-9._-]+/imgcheck:).*|\1$2|" action.yml
  sed -i -E "s|(IMGCHECK_IMAGE: ghcr.io/[a-z0-9._-]+/imgcheck:).*|\1$2|" docker/gitlab/imgcheck.gitlab-ci.yml
  grep -n "ghcr.io/.*/imgcheck:v" action.yml docker/gitlab/imgcheck.gitlab-ci.yml
  exit 0
fi
image=1
[ "${1:-}" = --no-image ] && { image=0; shift; }
[ $# -eq 2 ] || { echo "usage: scripts/release.sh [--no-image] VERSION OUT" >&2; exit 2; }
version=$1
out=$2
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+~][0-9A-Za-z.+~-]+)?$ ]] ||
  { echo "release.sh: VERSION '$version' is not N.N.N[-suffix] (the tag without its v)" >&2; exit 2; }
# Debian's spelling: a pre-release sorts before its release (0.3.0~rc1), anything else after it.
deb_version=$(sed -E 's/-(rc|alpha|beta)/~\1/; s/-/+/g' <<<"$version")
arch=$(dpkg --print-architecture)
case "$arch" in amd64) tar_arch=amd64 ;; arm64) tar_arch=arm64 ;; *) tar_arch=$arch ;; esac
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
src=$PWD
build=${IMGCHECK_RELEASE_BUILD_DIR:-build/release}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { echo "== release: $* ($(date -u +%T))" >&2; }

# ---- the binaries -------------------------------------------------------------------------------
step "build $version in $build"
command -v dpkg-buildflags >/dev/null || { echo "release.sh: no dpkg-buildflags (dpkg-dev)" >&2; exit 1; }
mapfile -t hardening < <(scripts/hardening-flags)
flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DCMAKE_UNITY_BUILD=ON
       -DIMGCHECK_VERSION_OVERRIDE="$version" -DIMGCHECK_COMMIT_OVERRIDE="$commit" "${hardening[@]}")
command -v ccache >/dev/null &&
  flags+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [ -n "${IMGCHECK_RELEASE_BUILD_DIR:-}" ] && [ -f "$build/CMakeCache.txt" ]; then
  # Only a build that compiles what build/release would: the release's flags and build type
  # (CMakeLists.txt's default where none was given).
  for want in "${hardening[@]#-D}"; do
    grep -qxF -- "${want/=/:STRING=}" "$build/CMakeCache.txt" ||
      { echo "release.sh: $build is not built with the release's ${want%%=*}" >&2; exit 1; }
  done
  grep -qxE 'CMAKE_BUILD_TYPE:STRING=(RelWithDebInfo)?' "$build/CMakeCache.txt" ||
    { echo "release.sh: $build is not a RelWithDebInfo build" >&2; exit 1; }
  flags=(-DIMGCHECK_VERSION_OVERRIDE="$version" -DIMGCHECK_COMMIT_OVERRIDE="$commit")
  trap 'rm -rf "$work"; cmake -B "$build" -DIMGCHECK_VERSION_OVERRIDE= -DIMGCHECK_COMMIT_OVERRIDE= >/dev/null' EXIT
fi
cmake -S . -B "$build" "${gen[@]}" "${flags[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target imgcheck imgcheck-probe
stage=$work/stage
cmake --install "$build" --prefix "$stage/usr" --strip >/dev/null
bin=$stage/usr/bin/imgcheck
built=$("$bin" version --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
[ "$built" = "$version" ] || { echo "release.sh: built version $built, wanted $version" >&2; exit 1; }

# Completions and man page, from the command's own definitions (`imgcheck completion`, `imgcheck
# man`); a build without them gets help2man's page and no completions, said aloud.
generated=$work/generated
mkdir -p "$generated"
if "$bin" help completion >/dev/null 2>&1 && "$bin" help man >/dev/null 2>&1; then
  "$bin" completion bash >"$generated/imgcheck.bash"
  "$bin" completion zsh >"$generated/_imgcheck"
  "$bin" completion fish >"$generated/imgcheck.fish"
  "$bin" man >"$generated/imgcheck.1"
else
  echo "release.sh: this imgcheck has no 'completion'/'man' subcommands: man page from help2man," \
       "no completions" >&2
  help2man --no-info --version-string="$version" \
    --name "find broken CUDA/cuDNN stacks in container images" "$bin" >"$generated/imgcheck.1"
fi
cat >"$generated/imgcheck-probe.1" <<EOF
.TH IMGCHECK-PROBE 1 "" "imgcheck $version" "User Commands"
.SH NAME
imgcheck-probe \- the GPU probe process of imgcheck probe
.SH SYNOPSIS
.B imgcheck-probe
.SH DESCRIPTION
.B imgcheck-probe
is started by
.B imgcheck probe
and
.B imgcheck scan \-\-probe
to load an image's own CUDA and cuDNN libraries in a separate process with time limits.
It is not meant to be run by hand.
.SH SEE ALSO
.BR imgcheck (1)
EOF

# ---- the Debian package -------------------------------------------------------------------------
step "deb"
pkg=$work/deb
mkdir -p "$pkg/DEBIAN"
cp -a "$stage/usr" "$pkg/"
doc=$pkg/usr/share/doc/imgcheck
mkdir -p "$doc" "$pkg/usr/share/man/man1"
for page in imgcheck.1 imgcheck-probe.1; do
  gzip -9n <"$generated/$page" >"$pkg/usr/share/man/man1/$page.gz"
done
if [ -f "$generated/imgcheck.bash" ]; then
  install -D -m644 "$generated/imgcheck.bash" "$pkg/usr/share/bash-completion/completions/imgcheck"
  install -D -m644 "$generated/_imgcheck" "$pkg/usr/share/zsh/vendor-completions/_imgcheck"
  install -D -m644 "$generated/imgcheck.fish" \
    "$pkg/usr/share/fish/vendor_completions.d/imgcheck.fish"
fi
# imgcheck reads the dpkg database of the images it scans (var/lib/dpkg inside a layer), never
# this system's: the tag's concern (bypassing dpkg's interfaces) does not apply.
mkdir -p "$pkg/usr/share/lintian/overrides"
cat >"$pkg/usr/share/lintian/overrides/imgcheck" <<'EOF'
# The dpkg database read is that of a scanned container image, not this system's.
imgcheck: uses-dpkg-database-directly [usr/bin/imgcheck]
EOF
# A native package: its copyright in Debian's machine-readable form, its changelog.
year=$(date -u +%Y)
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: imgcheck"
  echo "Source: https://github.com/imgcheck/imgcheck"
  echo
  echo "Files: *"
  echo "Copyright: $year the imgcheck authors"
  echo "License: Apache-2.0"
  echo
  echo "License: Apache-2.0"
  echo " On Debian systems, the full text of the Apache License, Version 2.0 can be found in"
  echo " /usr/share/common-licenses/Apache-2.0."
} >"$doc/copyright"
date_r=$(git log -1 --format=%aD 2>/dev/null || date -R)
printf 'imgcheck (%s) unstable; urgency=medium\n\n  * Release %s (%s).\n\n -- imgcheck maintainers <imgcheck@users.noreply.github.com>  %s\n' \
  "$deb_version" "$version" "$commit" "$date_r" | gzip -9n >"$doc/changelog.gz"
# Depends: what the binaries link (dpkg-shlibdeps reads debian/control from its directory).
mkdir -p "$work/shlibs/debian"
printf 'Source: imgcheck\n\nPackage: imgcheck\nArchitecture: any\n' >"$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" &&
         dpkg-shlibdeps -O "$pkg/usr/bin/imgcheck" "$pkg/usr/bin/imgcheck-probe" 2>"$work/shlibdeps.log" |
         sed -n 's/^shlibs:Depends=//p') || { cat "$work/shlibdeps.log" >&2; exit 1; }
# imgcheck loads libcurl when it first talks HTTP (dlopen, src/image/curl_lib.h), which neither
# dpkg-shlibdeps nor ldd sees: its package and dependency as its shlibs file states them.
owner_of() {  # dpkg knows a file by the path its package ships (/lib or /usr/lib: usrmerge)
  local real o p
  real=$(readlink -f "$1")
  for p in "$real" "$1" "${real#/usr}" "/usr$real"; do
    o=$(dpkg -S "$p" 2>/dev/null | head -n1 | cut -d: -f1) && [ -n "$o" ] && { echo "$o"; return; }
  done
  echo "release.sh: no package owns $1" >&2
  return 1
}
curl_lib=$(realpath -s "$(gcc -print-file-name=libcurl.so.4)")
[ -f "$curl_lib" ] || { echo "release.sh: no libcurl.so.4 (scripts/deps.sh installs it)" >&2; exit 1; }
curl_dep=$(dpkg-query --control-show "$(owner_of "$curl_lib")" shlibs |
           awk '$1 == "libcurl" && $2 == "4" {$1 = $2 = ""; sub(/^ +/, ""); print; exit}')
[ -n "$curl_dep" ] || { echo "release.sh: libcurl's package states no shlibs" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: imgcheck
Version: $deb_version
Architecture: $arch
Maintainer: imgcheck maintainers <imgcheck@users.noreply.github.com>
Installed-Size: $size
Depends: $shlibs, $curl_dep, ca-certificates
Section: utils
Priority: optional
Homepage: https://github.com/imgcheck/imgcheck
Description: static checker of CUDA and cuDNN stacks in container images
 imgcheck reads a container image (from a registry, Docker, podman or an OCI
 layout) without running it and finds what breaks its CUDA/cuDNN stack at run
 time: libraries the loader cannot resolve, cuDNN and CUDA versions that do not
 match what the frameworks were built with, driver files baked into the image,
 and more. It reports as text, JSON, SARIF, JUnit or GitLab Code Quality, and
 serves Kubernetes admission and Gatekeeper requests.
EOF
(cd "$pkg" && find usr -type f -exec md5sum {} + | sort -k2) >"$pkg/DEBIAN/md5sums"
find "$pkg" -type d -exec chmod 755 {} +
deb=$out/imgcheck_${deb_version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
step "lintian"
lintian --fail-on error,warning "$deb"

# ---- the relocatable tarball --------------------------------------------------------------------
step "tarball"
name=imgcheck-$version-linux-$tar_arch
root=$work/tar/$name
mkdir -p "$root/lib" "$root/share/doc/imgcheck/third-party"
cp -a "$stage/usr/bin" "$stage/usr/share" "$root/"
cp LICENSE NOTICE "$root/share/doc/imgcheck/"
install -D -m644 "$generated/imgcheck.1" "$root/share/man/man1/imgcheck.1"
if [ -f "$generated/imgcheck.bash" ]; then
  install -D -m644 "$generated/imgcheck.bash" "$root/share/bash-completion/completions/imgcheck"
  install -D -m644 "$generated/_imgcheck" "$root/share/zsh/site-functions/_imgcheck"
  install -D -m644 "$generated/imgcheck.fish" "$root/share/fish/vendor_completions.d/imgcheck.fish"
fi
# Bundled: every library the binaries need (transitively) whose package a minimal Debian 12
# lacks. The packages `debootstrap --variant=minbase bookworm` installs (its var/lib/dpkg/status;
# scripts/validate-release runs the tarball in exactly such a root, so a wrong list fails there):
minbase=" adduser apt base-files base-passwd bash bsdutils coreutils dash debconf
  debian-archive-keyring debianutils diffutils dpkg e2fsprogs findutils gcc-12-base gpgv grep gzip
  hostname init-system-helpers libacl1 libapt-pkg6.0 libattr1 libaudit-common libaudit1 libblkid1
  libbz2-1.0 libc-bin libc6 libcap-ng0 libcap2 libcom-err2 libcrypt1 libdb5.3 libdebconfclient0
  libext2fs2 libffi8 libgcc-s1 libgcrypt20 libgmp10 libgnutls30 libgpg-error0 libhogweed6
  libidn2-0 liblz4-1 liblzma5 libmd0 libmount1 libnettle8 libp11-kit0 libpam-modules
  libpam-modules-bin libpam-runtime libpam0g libpcre2-8-0 libseccomp2 libselinux1
  libsemanage-common libsemanage2 libsepol2 libsmartcols1 libss2 libstdc++6 libsystemd0
  libtasn1-6 libtinfo6 libudev1 libunistring2 libuuid1 libxxhash0 libzstd1 login logsave mawk
  mount ncurses-base ncurses-bin passwd perl-base sed sysvinit-utils tar tzdata usr-is-merged
  util-linux util-linux-extra zlib1g "
in_minbase() { tr -s '[:space:]' '\n' <<<"$minbase" | grep -qxF "$1"; }
{ ldd "$root/bin/imgcheck" "$root/bin/imgcheck-probe" "$curl_lib" |
    awk '$2 == "=>" && $3 ~ /^\// {print $3}'; echo "$curl_lib"; } | sort -u >"$work/libs"
: >"$work/bundled-packages"
while read -r lib; do
  real=$(readlink -f "$lib")
  owner=$(owner_of "$lib") || exit 1
  in_minbase "$owner" && continue
  cp "$real" "$root/lib/$(basename "$lib")"
  chmod 644 "$root/lib/$(basename "$lib")"
  echo "$owner" >>"$work/bundled-packages"
done <"$work/libs"
for p in $(sort -u "$work/bundled-packages"); do
  install -D -m644 "/usr/share/doc/$p/copyright" "$root/share/doc/imgcheck/third-party/$p/copyright"
done
# The binaries look in ../lib, the libraries beside themselves (RUNPATH is not inherited).
for b in "$root"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$b"; done
for l in "$root"/lib/*; do patchelf --set-rpath '$ORIGIN' "$l"; done
tarball=$out/$name.tar.gz
tar -C "$work/tar" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime="@$(git log -1 --format=%ct 2>/dev/null || date +%s)" -cf - "$name" | gzip -9n >"$tarball"
echo "tarball bundles: $(cd "$root/lib" && ls | tr '\n' ' ')" >&2

# ---- the container image ------------------------------------------------------------------------
artifacts=("$(basename "$deb")" "$name.tar.gz")
if [ "$image" = 1 ]; then
  step "image"
  IMGCHECK_VERSION="$version" IMGCHECK_COMMIT="$commit" scripts/build-image.sh \
    --binaries "$stage/usr" "localhost/imgcheck:$version"
  rm -f "$out/imgcheck-$version-image.oci.tar"
  buildah push -q "localhost/imgcheck:$version" \
    "oci-archive:$out/imgcheck-$version-image.oci.tar:$version" >/dev/null
  artifacts+=("imgcheck-$version-image.oci.tar")
fi

(cd "$out" && sha256sum "${artifacts[@]}" >SHA256SUMS)
step "done"
cat "$out/SHA256SUMS"
