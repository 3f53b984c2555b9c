// The attest stage's front door for scan's callers: attest a scan's verdict (scan --attest) and
// find the verdict of an image from its attestations (verify, serve --trust-key).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attest/attach.h"
#include "attest/bundle.h"
#include "attest/keys.h"
#include "attest/verify.h"
#include "image/registry.h"
#include "report/report.h"
#include "scan/policy.h"
#include "util/formats.h"

namespace imgcheck::attest {

/// Where scan --attest puts the attestation (--attest-format); verify reads both.
enum class Layout : uint8_t { kAtt, kBundle };
inline constexpr std::array<util::FormatInfo<Layout>, 2> kLayouts = {{
    {Layout::kAtt, "att", "a layer of cosign's sha256-HEX.att manifest"},
    {Layout::kBundle, "bundle",
     "a Sigstore bundle in an OCI 1.1 referrer; tag sha256-HEX lists it where the registry "
     "has no referrers API"},
}};

struct Attested {
  std::string digest;      ///< the subject: the image manifest the scan read
  std::string index;       ///< the index the reference names that lists it; "" when none
  std::string repository;  ///< "host:5000/app"
  std::string manifest;    ///< the .att manifest's digest after the append, or the referrer's
  std::string where;       ///< for people: "HOST/app:sha256-HEX.att", "HOST/app@sha256:..."
};

/// Signs the statement of `report` (a scan of registry image `reference` under `policy`) with
/// `signer` and appends it to the attestations of the image manifest the scan read: that
/// manifest is the subject, never an index, whose digest and platform the predicate names
/// instead (image.index, image.platform), so a verdict on one platform says nothing of another.
/// The reference must still name that manifest or an index listing it: a tag that moved since
/// the scan is a util::Fatal. util::Fatal, one line, for a reference that is not a registry
/// image, and for every registry failure.
Attested AttestScan(const std::string& reference, const report::Report& report,
                    const scan::Policy& policy, const Signer& signer,
                    const image::RegistryOptions& options, Layout layout = Layout::kAtt,
                    const AttachOptions& attach = {});

/// What the attestations of one image say.
struct Decision {
  std::string digest;               ///< the image's manifest digest
  std::optional<Checked> accepted;  ///< the newest attestation that verified, if any
  struct Refused {
    std::string layer;  ///< the .att layer's or the bundle's digest (the referrer's if unread)
    Rejection reason;
    std::string message;
  };
  std::vector<Refused> refused;  ///< every other attestation, in manifest order
};

/// Verifies every attestation of image `digest` in `repo` against `keys` and `policy_identity`
/// (empty: any policy): the .att layers, then, only when none verifies, the bundle referrers.
/// util::Fatal as FetchAttestations and FetchBundles.
Decision VerifyDigest(image::Repository& repo, const std::string& digest,
                      const std::vector<PublicKey>& keys, const std::string& policy_identity);

/// An image manifest a reference covers: the platform it is for ("" when the reference names a
/// manifest, not an index) and its digest.
struct PlatformImage {
  std::string platform;  ///< "linux/arm64"
  std::string digest;
};
/// The image manifests `root` covers: itself when it is an image manifest, else the entries of
/// the index that have a platform (buildx's attestation manifests, "unknown/unknown", left out).
/// util::Fatal, one line, when it is neither, or an entry is malformed.
std::vector<PlatformImage> ImagesOf(const image::Repository::Manifest& root);

/// What `verify` decides for one reference: the root it names and each image verified.
struct ImageDecision {
  std::string root;  ///< the digest the reference names (an index's, or the manifest's)
  bool index = false;
  struct Platform {
    std::string platform;  ///< "" for a reference to a manifest
    Decision decision;
  };
  std::vector<Platform> images;
};

/// VerifyDigest for registry reference `reference` (its digest, else what its tag names now).
/// For an index, the image of `platform` ("os/arch[/variant]"), or of every platform it lists
/// when `platform` is "all"; for a manifest, that manifest. util::Fatal, one line, when the
/// index has no image of `platform`, and as VerifyDigest.
ImageDecision VerifyImage(const std::string& reference, const std::string& platform,
                          const std::vector<PublicKey>& keys, const std::string& policy_identity,
                          const image::RegistryOptions& options);

/// The images registry reference `reference` names now (ImagesOf its manifest).
std::vector<PlatformImage> ImagesOf(const std::string& reference,
                                    const image::RegistryOptions& options);

}  // namespace imgcheck::attest
