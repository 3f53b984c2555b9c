// Signatures of OCI artifacts in cosign's layout (sigstore/cosign pkg/oci/static,
// pkg/cosign/payload): beside the artifact, the tag "sha256-<hex>.sig" names an OCI image
// manifest whose one layer is the simple-signing payload (application/vnd.dev.cosign.
// simplesigning.v1+json: the signed manifest's digest and repository), annotated with
// "dev.cosignproject.cosign/signature", the base64 ECDSA P-256 signature of SHA-256(payload).
// `cosign verify --key` reads the same. imgcheck signs its rules data this way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "attest/keys.h"
#include "image/registry.h"
#include "util/error.h"

namespace imgcheck::attest {

inline constexpr std::string_view kSimpleSigningMediaType =
    "application/vnd.dev.cosign.simplesigning.v1+json";
/// critical.type of a simple-signing payload (containers/image docs/containers-signature.5).
inline constexpr std::string_view kSimpleSigningType = "cosign container image signature";

/// "sha256-<hex>.sig" (cosign's SignatureTag).
std::string SignatureTag(const std::string& digest);

/// cosign's payload for manifest `digest` of `repository` ("host/rules"): critical.identity,
/// critical.image, critical.type, optional null.
std::string SimpleSigningPayload(const std::string& repository, const std::string& digest);

/// What a signature says, once it verified.
struct SignedBy {
  std::string key;        ///< the trusted key's name (PublicKey::name)
  std::string payload;    ///< the simple-signing payload
  std::string signature;  ///< base64, as the annotation has it
};

/// Checks that base64 `signature` signs `payload` with one of `keys`, and that the payload is
/// a simple-signing payload of manifest `digest`. One-line error otherwise.
util::Expected<SignedBy> CheckSimpleSigning(std::string_view payload, std::string_view signature,
                                            const std::string& digest,
                                            const std::vector<PublicKey>& keys);

/// Signs manifest `digest` of the artifact at `reference` (a registry reference, "docker://"
/// optional, or "oci:PATH[:REF]"): writes the tag SignatureTag(digest) beside it, replacing a
/// signature there. Returns the signature's reference. util::Fatal, one line, on failure.
std::string SignArtifact(const std::string& reference, const std::string& digest,
                         const Signer& signer, const image::RegistryOptions& options);

/// Reads the signature of manifest `digest` beside `reference` and checks it (CheckSimpleSigning).
/// util::Fatal, one line, naming `what`, when there is none, it is not in cosign's layout, or it
/// does not verify.
SignedBy VerifyArtifact(const std::string& reference, const std::string& digest,
                        const std::vector<PublicKey>& keys, const image::RegistryOptions& options,
                        const std::string& what);

/// What a verifier keeps of a signature that verified ({"payload", "signature"} as JSON), and
/// the check of it later: "" when `record` signs manifest `digest` with one of `keys`, else why
/// not (rules::SignatureCheck).
std::string SignatureRecord(const SignedBy& s);
std::string CheckSignatureRecord(const std::string& record, const std::string& digest,
                                 const std::vector<PublicKey>& keys);

/// The public keys (*.pub, SubjectPublicKeyInfo PEM) in directory `dir`, sorted by name; none
/// when it does not exist. util::Fatal, one line, for a key file that does not parse.
std::vector<PublicKey> KeysIn(const std::string& dir);

}  // namespace imgcheck::attest
