// DSSE envelopes (secure-systems-lab/dsse v1.0.0, envelope.md and protocol.md): a payload, its
// type, and signatures over the pre-authentication encoding of both. The JSON envelope is what
// cosign stores as an attestation layer; it comes from registries, so it is read with bounds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "attest/keys.h"
#include "util/error.h"

namespace imgcheck::attest {

/// The payload type of an in-toto statement (in-toto attestation spec, envelope.md).
inline constexpr std::string_view kInTotoPayloadType = "application/vnd.in-toto+json";
/// Bounds on an envelope read from a registry: its bytes, and its signatures.
inline constexpr size_t kMaxEnvelopeBytes = size_t{4} << 20;
inline constexpr size_t kMaxSignatures = 16;

/// PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, LEN in ASCII decimal
/// (protocol.md): what is signed, so that the payload type is signed too.
std::string Pae(std::string_view type, std::string_view body);

struct Envelope {
  std::string payload_type;
  std::string payload;  ///< decoded bytes
  struct Signature {
    std::string keyid;
    std::string sig;  ///< decoded bytes (DER ECDSA)
  };
  std::vector<Signature> signatures;
};

/// Signs `payload` of `payload_type` with `signer`: the envelope's JSON text (cosign's field
/// order: payloadType, payload, signatures), base64 as RFC 4648 standard with padding.
std::string SignEnvelope(std::string_view payload_type, std::string_view payload,
                         const Signer& signer);

/// Reads an envelope's JSON text. One-line error when it is larger than kMaxEnvelopeBytes, is
/// not JSON, lacks a field, has a non-base64 payload or signature, or no or too many signatures.
util::Expected<Envelope> ParseEnvelope(std::string_view text);

}  // namespace imgcheck::attest
