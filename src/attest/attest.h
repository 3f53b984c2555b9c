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
  std::string digest;      ///< the subject: the manifest digest the reference resolves to
  std::string repository;  ///< "host:5000/app"
  std::string manifest;    ///< the .att manifest's digest after the append, or the referrer's
  std::string where;       ///< for people: "HOST/app:sha256-HEX.att", "HOST/app@sha256:..."
};

/// Signs the statement of `report` (a scan of registry image `reference` under `policy`) with
/// `signer` and appends it to the image's attestations. The subject is the digest the reference
/// resolves to now, which must be the manifest the scan read (or an index listing it): a tag
/// that moved since the scan is a util::Fatal. util::Fatal, one line, for a reference that is not
/// a registry image, and for every registry failure.
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

/// VerifyDigest for registry reference `reference` (its digest, else what its tag names now).
Decision VerifyImage(const std::string& reference, const std::vector<PublicKey>& keys,
                     const std::string& policy_identity, const image::RegistryOptions& options);

}  // namespace imgcheck::attest
