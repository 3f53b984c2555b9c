#include "attest/dsse.h"

#include <nlohmann/json.hpp>

#include "image/registry_auth.h"

namespace imgcheck::attest {

std::string Pae(std::string_view type, std::string_view body) {
  std::string out = "DSSEv1 " + std::to_string(type.size()) + " ";
  out.append(type);
  out += " " + std::to_string(body.size()) + " ";
  out.append(body);
  return out;
}

std::string SignEnvelope(std::string_view payload_type, std::string_view payload,
                         const Signer& signer) {
  std::string sig = signer.Sign(Pae(payload_type, payload));
  nlohmann::ordered_json j;
  j["payloadType"] = payload_type;
  j["payload"] = image::Base64Encode(payload);
  j["signatures"] = nlohmann::ordered_json::array(
      {{{"keyid", signer.KeyId()}, {"sig", image::Base64Encode(sig)}}});
  return j.dump();
}

util::Expected<Envelope> ParseEnvelope(std::string_view text) {
  if (text.size() > kMaxEnvelopeBytes) {
    return util::MakeError("the envelope is " + std::to_string(text.size()) +
                           " bytes, more than the " + std::to_string(kMaxEnvelopeBytes) +
                           " allowed");
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return util::MakeError("the envelope is not JSON");
  auto text_field = [&j](const char* name) -> const nlohmann::json* {
    auto it = j.find(name);
    return it != j.end() && it->is_string() ? &*it : nullptr;
  };
  const nlohmann::json* type = text_field("payloadType");
  const nlohmann::json* payload = text_field("payload");
  auto sigs = j.find("signatures");
  if (type == nullptr || payload == nullptr || sigs == j.end() || !sigs->is_array())
    return util::MakeError("the envelope lacks payloadType, payload or signatures");
  Envelope e;
  e.payload_type = type->get<std::string>();
  if (!image::Base64Decode(payload->get_ref<const std::string&>(), e.payload))
    return util::MakeError("the envelope's payload is not base64");
  if (sigs->empty()) return util::MakeError("the envelope has no signature");
  if (sigs->size() > kMaxSignatures) {
    return util::MakeError("the envelope has " + std::to_string(sigs->size()) +
                           " signatures, more than the " + std::to_string(kMaxSignatures) +
                           " allowed");
  }
  for (const auto& s : *sigs) {
    Envelope::Signature out;
    auto sig = s.is_object() ? s.find("sig") : s.end();
    if (!s.is_object() || sig == s.end() || !sig->is_string() ||
        !image::Base64Decode(sig->get_ref<const std::string&>(), out.sig)) {
      return util::MakeError("an envelope signature is not base64");
    }
    auto keyid = s.find("keyid");
    if (keyid != s.end() && keyid->is_string()) out.keyid = keyid->get<std::string>();
    e.signatures.push_back(std::move(out));
  }
  return e;
}

}  // namespace imgcheck::attest
