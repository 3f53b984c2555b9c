#!/usr/bin/env bash
# Installs imgcheck's Debian packages; does nothing for those already present.
#   scripts/deps.sh          what the build, the tests and the benchmark need
#   scripts/deps.sh build    only what building imgcheck needs (docker/Dockerfile)
#   scripts/deps.sh demo     building imgcheck and the demo image (scripts/dev demo): build's, and
#                            what configuring the tests' targets needs
set -euo pipefail
pkgs=(cmake g++ make ninja-build pkg-config
      # dpkg-buildflags: every build compiles with the release's hardening flags
      dpkg-dev
      libarchive-dev nlohmann-json3-dev libssl-dev libcli11-dev catch2 libisal-dev libzstd-dev
      libcurl4-openssl-dev
      # the config file (.imgcheck.yaml): full YAML
      libyaml-cpp-dev
      # imgcheck serve: HTTPS server (Boost.Beast/Asio, header-only) and Redis
      libboost-dev libhiredis-dev
      # registries over TLS at run time: the CA bundle
      ca-certificates)
case "${1:-}" in
  build) ;;
  # the tests' CMake needs cpp-httplib's pkg-config file (the demo image is a test fixture)
  demo) pkgs+=(libcpp-httplib-dev) ;;
  *) pkgs+=(
      # the style gate (scripts/lint)
      clang-format clang-tidy
      # peers and oracles used by the tests and the benchmark
      umoci skopeo docker-registry libtree isal zstd gzip apache2-utils time python3
      # the registry tests make their certificates with the openssl command
      openssl
      redis-server redis-tools wrk
      # the tests' HTTPS clients and fake registries (cpp-httplib, with OpenSSL, zlib and brotli)
      libcpp-httplib-dev zlib1g-dev libbrotli-dev
      # the CI gate's tests: real builds, podman's Docker API, the SARIF schema
      buildah podman python3-jsonschema
      # docker/kubernetes/ against the policy engines' CRD schemas (tests/k8s_policies_check.py)
      python3-yaml
      # an independent verifier of the attestations imgcheck writes (testdata/attest/verify.py)
      python3-cryptography
      # the JUnit report against the Jenkins and Ant/JUnit 5 XSDs (testdata/junit)
      libxml2-utils
      # the Markdown reports rendered as GitHub does (GFM tables, raw HTML) and checked as HTML
      cmark-gfm
      # `why --format dot` drawn by Graphviz (tests/why_cli_test.cpp); the Action's comment and
      # the GitLab template's note against fake APIs (tests/action_check.py, gitlab_check.py)
      graphviz curl jq
      # scripts/build-image.sh: a Debian 12 base where no registry serves one; scripts/release.sh
      # --check: pristine Debian 12 roots
      debootstrap
      # scripts/release.sh: the .deb (lintian; dpkg-shlibdeps is dpkg-dev's), the tarball's
      # RUNPATH (patchelf), the validators' virtual environment (scripts/validate-release)
      lintian patchelf python3-venv
      # the fuzz targets (scripts/fuzz): clang with libFuzzer and the sanitizer runtimes
      clang libclang-rt-14-dev) ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
