// What a registry (or the user) sends that the registry transport parses: a WWW-Authenticate
// header, a token server's answer, base64, image references, and a redirect's Location resolved
// against the request URL (the input's two NUL-separated parts).
#include <string>

#include "fuzz_input.h"
#include "image/registry_auth.h"
#include "image/registry_http.h"
#include "image/registry_reference.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = fuzz::Bytes(data, size);
  image::ParseChallenges(input);
  image::ParseTokenResponse(input);
  std::string decoded;
  if (image::Base64Decode(input, decoded)) image::Base64Encode(decoded);
  if (util::Expected<image::Reference> ref = image::ParseReference(input)) {
    ref->String();
    ref->ApiHost();
  }
  image::UrlEscape(input);
  std::vector<std::string_view> urls = fuzz::SplitFiles(input, 2);
  std::string base(urls[0]);
  image::UrlOrigin(base);
  if (urls.size() == 2) image::UrlOrigin(image::ResolveUrl(base, std::string(urls[1])));
  return 0;
}
