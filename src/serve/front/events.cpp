#include "serve/front/events.h"

#include <nlohmann/json.hpp>

#include "image/manifest.h"
#include "serve/front/json_body.h"

namespace imgcheck::serve::front {

namespace {

bool IsManifestType(std::string_view t) {
  return t == image::media::kOciManifest || t == image::media::kOciIndex ||
         t == image::media::kDockerManifest || t == image::media::kDockerList;
}

// "http://127.0.0.1:5000/v2/x/manifests/sha256:..." -> "127.0.0.1:5000".
std::string UrlHost(const std::string& url) {
  size_t start = url.find("://");
  if (start == std::string::npos) return "";
  start += 3;
  size_t end = url.find('/', start);
  return url.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

util::Expected<std::vector<PushedManifest>> ParseRegistryEvents(std::string_view body) {
  auto parsed = ParseJsonBody(body);
  if (!parsed) return parsed.error();
  const nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("events") || !j["events"].is_array())
    return util::MakeError("the body is not a registry notification envelope");
  std::vector<PushedManifest> out;
  for (const auto& e : j["events"]) {
    if (!e.is_object() || StringAt(e, "action") != "push") continue;
    auto target = e.find("target");
    if (target == e.end() || !target->is_object() ||
        !IsManifestType(StringAt(*target, "mediaType")))
      continue;
    PushedManifest p;
    p.repository = StringAt(*target, "repository");
    p.digest = StringAt(*target, "digest");
    p.tag = StringAt(*target, "tag");
    if (auto req = e.find("request"); req != e.end() && req->is_object())
      p.host = StringAt(*req, "host");
    if (p.host.empty()) p.host = UrlHost(StringAt(*target, "url"));
    if (p.repository.empty() || p.digest.empty() || p.host.empty()) continue;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace imgcheck::serve::front
