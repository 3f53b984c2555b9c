// Attestations where cosign and Kyverno look for them (cosign's "attestation" layout, sigstore/
// cosign pkg/oci/remote and pkg/oci/static): in the image's repository, the tag
// "sha256-<hex>.att" names an OCI image manifest with one layer per attestation, each layer a DSSE
// envelope of media type application/vnd.dsse.envelope.v1+json annotated with its predicateType
// and an empty cosign signature annotation.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
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

/// "sha256-<hex>" for digest "sha256:<hex>": the referrers tag schema's tag (distribution-spec
/// 1.1), which cosign's tags extend.
std::string ReferrersTag(const std::string& digest);
/// "sha256-<hex>.att" (cosign's AttestationTag).
std::string AttestationTag(const std::string& digest);

struct AttachOptions {
  /// How long to wait after the PUT before reading the tag back, so that a concurrent
  /// writer's PUT lands first (see Attach); tests shorten it.
  std::chrono::milliseconds settle{300};
  int max_tries = 5;
  std::function<void(std::chrono::milliseconds)> sleep;  ///< null: std::this_thread::sleep_for
};

/// Appends `envelope` (of predicate type `predicate_type`) to the attestations of image `digest`
/// in `repo`, keeping every layer already there (AppendUnderTag). Returns the .att manifest's
/// digest.
std::string Attach(image::Repository& repo, const std::string& digest, const std::string& envelope,
                   std::string_view predicate_type, const AttachOptions& options = {});

/// The entries `key` ("layers" of an image manifest, "manifests" of an index) of a manifest read
/// from a registry: at most kMaxAttestationLayers, each with a sha256 digest and a size.
/// util::Fatal, one line, naming `what`, for anything else.
nlohmann::ordered_json ListOf(const image::Repository::Manifest& m, std::string_view key,
                              const std::string& what);

/// The document (body, media type) that holds list `entries`.
using MakeDocument =
    std::function<std::pair<std::string, std::string_view>(nlohmann::ordered_json entries)>;
/// Adds descriptor `mine` to the list `key` of the document at `tag` (none yet: an empty list),
/// keeping every entry there, and PUTs make(list) under `tag`. The distribution API has no
/// conditional manifest PUT, so this is read-modify-write: after the PUT it waits `settle`,
/// reads the tag again, and appends again when `mine` was lost to a concurrent writer's PUT
/// (which itself re-reads and re-appends what it lost). Returns the document's digest.
/// util::Fatal, one line, as ListOf, when the registry refuses, or when `mine` is still missing
/// after max_tries.
std::string AppendUnderTag(image::Repository& repo, const std::string& tag, std::string_view key,
                           const nlohmann::ordered_json& mine, const MakeDocument& make,
                           const AttachOptions& options);

/// One attestation layer as fetched: its envelope bytes, or why they could not be had.
struct Fetched {
  std::string layer_digest;
  std::string envelope;  ///< digest-verified bytes; empty when `error` is set
  std::string error;     ///< one line: too large, the registry served other bytes, ...
};

/// Layer `layer` (a descriptor ListOf checked) if it is at most `limit` bytes and the registry
/// serves bytes of its digest; else a Fetched with the error (naming the layer `noun`).
Fetched FetchLayer(image::Repository& repo, const nlohmann::ordered_json& layer, uint64_t limit,
                   std::string_view noun);

/// The DSSE layers of image `digest`'s .att manifest in `repo`, in manifest order (the newest
/// last); empty when there is none. util::Fatal, one line, when the manifest is unreadable, not
/// an OCI/Docker image manifest, or has more than kMaxAttestationLayers layers. A layer larger
/// than kMaxEnvelopeBytes, or whose bytes do not match its digest, is a Fetched with an error.
std::vector<Fetched> FetchAttestations(image::Repository& repo, const std::string& digest);

}  // namespace imgcheck::attest
