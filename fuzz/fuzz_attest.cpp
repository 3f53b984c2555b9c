// An attestation as verify reads one from a registry: the list of a .att manifest or of a
// referrers index, a Sigstore bundle (a referrer's layer), the DSSE envelope (an .att layer, or
// the bundle's), and the statement an envelope carries.
#include "attest/bundle.h"
#include "attest/dsse.h"
#include "attest/statement.h"
#include "fuzz_input.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes = fuzz::Bytes(data, size);
  for (const auto& [type, key] :
       {std::pair{"application/vnd.oci.image.manifest.v1+json", "layers"},
        std::pair{"application/vnd.oci.image.index.v1+json", "manifests"}}) {
    try {
      attest::ListOf({type, "", std::string(bytes)}, key, "fuzz list");
    } catch (const util::Fatal&) {
    }
  }
  util::Expected<std::string> inner = attest::BundleEnvelope(bytes);
  for (std::string_view text : {bytes, inner ? std::string_view(*inner) : std::string_view()}) {
    util::Expected<attest::Envelope> e = attest::ParseEnvelope(text);
    if (e) attest::ParseStatement(e->payload);
  }
  return 0;
}
