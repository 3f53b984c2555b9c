// Attestations where cosign and Kyverno look for them (cosign's "attestation" layout, sigstore/
// cosign pkg/oci/remote and pkg/oci/static): in the image's repository, the tag
// "sha256-<hex>.att" names an OCI image manifest with one layer per attestation, each layer a DSSE
// envelope of media type application/vnd.dsse.envelope.v1+json annotated with its predicateType
// and an empty cosign signature annotation.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "image/registry.h"

namespace imgcheck::attest {

inline constexpr std::string_view kDsseMediaType = "application/vnd.dsse.envelope.v1+json";
/// Layer annotations cosign writes on an attestation (cmd/cosign/cli/attest, pkg/oci/static).
inline constexpr std::string_view kPredicateTypeAnnotation = "predicateType";
inline constexpr std::string_view kCosignSignatureAnnotation = "dev.cosignproject.cosign/signature";
/// Bounds on what a registry's .att manifest may make a reader do.
inline constexpr size_t kMaxAttestationLayers = 256;
inline constexpr uint64_t kMaxAttestationManifest = uint64_t{4} << 20;

/// "sha256-<hex>.att" for digest "sha256:<hex>" (cosign's AttestationTag).
std::string AttestationTag(const std::string& digest);

struct AttachOptions {
  /// How long to wait after the PUT before reading the tag back, so that a concurrent
  /// writer's PUT lands first (see Attach); tests shorten it.
  std::chrono::milliseconds settle{300};
  int max_tries = 5;
  std::function<void(std::chrono::milliseconds)> sleep;  ///< null: std::this_thread::sleep_for
};

/// Appends `envelope` (of predicate type `predicate_type`) to the attestations of image `digest`
/// in `repo`, keeping every layer already there. The distribution API has no conditional
/// manifest PUT, so this is read-modify-write: after the PUT it waits `settle`, reads the tag
/// again, and appends again when its layer was lost to a concurrent writer's PUT (which itself
/// re-reads and re-appends what it lost). Returns the .att manifest's digest. util::Fatal, one
/// line, when the registry refuses, the existing manifest is not an attestation manifest or is
/// too large, or the layer is still missing after max_tries.
std::string Attach(image::Repository& repo, const std::string& digest, const std::string& envelope,
                   std::string_view predicate_type, const AttachOptions& options = {});

/// One attestation layer as fetched: its envelope bytes, or why they could not be had.
struct Fetched {
  std::string layer_digest;
  std::string envelope;  ///< digest-verified bytes; empty when `error` is set
  std::string error;     ///< one line: too large, the registry served other bytes, ...
};

/// The DSSE layers of image `digest`'s .att manifest in `repo`, in manifest order (the newest
/// last); empty when there is none. util::Fatal, one line, when the manifest is unreadable, not
/// an OCI/Docker image manifest, or has more than kMaxAttestationLayers layers. A layer larger
/// than kMaxEnvelopeBytes, or whose bytes do not match its digest, is a Fetched with an error.
std::vector<Fetched> FetchAttestations(image::Repository& repo, const std::string& digest);

}  // namespace imgcheck::attest
