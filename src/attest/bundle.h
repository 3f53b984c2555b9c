// Attestations as Sigstore bundles in OCI 1.1 referrers, the layout `cosign attest
// --new-bundle-format` writes (sigstore/cosign pkg/oci/remote/write.go,
// WriteAttestationNewBundleFormat and WriteReferrer): an OCI image manifest whose artifactType is
// the bundle's media type, config the OCI empty descriptor, one layer the bundle (v0.3, DSSE
// content: sigstore/protobuf-specs protos/sigstore_bundle.proto, JSON in protobuf's camelCase
// names), subject the image. Registries without the referrers API get the referrers tag schema
// (distribution-spec 1.1 "Pushing Manifests with Subject"): the index at tag "sha256-<hex>".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attest/attach.h"
#include "attest/dsse.h"
#include "image/registry.h"

namespace imgcheck::attest {

/// sigstore-go bundle.MediaTypeString("0.3").
inline constexpr std::string_view kBundleMediaType =
    "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The OCI empty descriptor's media type and blob (image-spec 1.1 manifest.md).
inline constexpr std::string_view kOciEmptyMediaType = "application/vnd.oci.empty.v1+json";
inline constexpr std::string_view kOciEmptyJson = "{}";
/// Manifest annotations of WriteAttestationNewBundleFormat.
inline constexpr std::string_view kBundleContentAnnotation = "dev.sigstore.bundle.content";
inline constexpr std::string_view kBundlePredicateTypeAnnotation =
    "dev.sigstore.bundle.predicateType";
inline constexpr std::string_view kCreatedAnnotation = "org.opencontainers.image.created";
/// A bundle holds one envelope and a key hint: its bound is the envelope's and a little more.
inline constexpr size_t kMaxBundleBytes = kMaxEnvelopeBytes + (size_t{64} << 10);

/// The bundle JSON around DSSE envelope JSON `envelope`, signed by the key whose KeyId (hex
/// SHA-256 of its DER SubjectPublicKeyInfo) is `key_id`: verificationMaterial.publicKey.hint is
/// that hash in standard base64, as cosign's key pairs give it (internal/key/svkeypair.go).
std::string MakeBundle(std::string_view envelope, const std::string& key_id);

/// The DSSE envelope JSON of bundle bytes `bundle`. One-line error when it is larger than
/// kMaxBundleBytes, not JSON, not of kBundleMediaType, or holds no dsseEnvelope.
util::Expected<std::string> BundleEnvelope(std::string_view bundle);

struct Referred {
  std::string manifest;    ///< the referrer manifest's digest
  bool tag_index = false;  ///< the registry has no referrers API: listed at ReferrersTag
};

/// Puts `bundle` (of predicate type `predicate_type`) as a referrer of image manifest `subject`
/// in `repo`; on a registry that does not answer with OCI-Subject, appends it to the index at
/// ReferrersTag (AppendUnderTag, with `options`). util::Fatal, one line, on registry failures.
Referred AttachBundle(image::Repository& repo, const image::Repository::Manifest& subject,
                      const std::string& bundle, std::string_view predicate_type,
                      const AttachOptions& options = {});

/// The DSSE envelopes of the bundle referrers of image `digest` in `repo`: from the referrers
/// API, or, where it is absent (404), the index at ReferrersTag; in the index's order. Entries of
/// another artifactType are skipped. util::Fatal, one line, when the list is unreadable or has
/// more than kMaxAttestationLayers entries; a referrer that cannot be read (manifest, blob over
/// its bound or of other bytes, bundle) is a Fetched with an error.
std::vector<Fetched> FetchBundles(image::Repository& repo, const std::string& digest);

}  // namespace imgcheck::attest
