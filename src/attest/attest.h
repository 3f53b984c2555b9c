// The attest stage's front door for scan's callers: attest a scan's verdict (scan --attest) and
// find the verdict of an image from its attestations (verify, serve --trust-key).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attest/attach.h"
#include "attest/keys.h"
#include "attest/verify.h"
#include "image/registry.h"
#include "report/report.h"
#include "scan/policy.h"

namespace imgcheck::attest {

struct Attested {
  std::string digest;      ///< the subject: the manifest digest the reference resolves to
  std::string repository;  ///< "host:5000/app"
  std::string manifest;    ///< the .att manifest's digest after the append
};

/// Signs the statement of `report` (a scan of registry image `reference` under `policy`) with
/// `signer` and appends it to the image's attestations. The subject is the digest the reference
/// resolves to now, which must be the manifest the scan read (or an index listing it): a tag
/// that moved since the scan is a util::Fatal. util::Fatal, one line, for a reference that is not
/// a registry image, and for every registry failure.
Attested AttestScan(const std::string& reference, const report::Report& report,
                    const scan::Policy& policy, const Signer& signer,
                    const image::RegistryOptions& options, const AttachOptions& attach = {});

/// What the attestations of one image say.
struct Decision {
  std::string digest;               ///< the image's manifest digest
  std::optional<Checked> accepted;  ///< the newest attestation that verified, if any
  struct Refused {
    std::string layer;  ///< the .att layer's digest
    Rejection reason;
    std::string message;
  };
  std::vector<Refused> refused;  ///< every other attestation, in manifest order
};

/// Verifies every attestation of image `digest` in `repo` against `keys` and `policy_identity`
/// (empty: any policy). util::Fatal as FetchAttestations.
Decision VerifyDigest(image::Repository& repo, const std::string& digest,
                      const std::vector<PublicKey>& keys, const std::string& policy_identity);

/// VerifyDigest for registry reference `reference` (its digest, else what its tag names now).
Decision VerifyImage(const std::string& reference, const std::vector<PublicKey>& keys,
                     const std::string& policy_identity, const image::RegistryOptions& options);

}  // namespace imgcheck::attest
