#include "serve/front/gatekeeper.h"

#include <nlohmann/json.hpp>

#include "serve/front/json_body.h"
#include "serve/verdict.h"

namespace imgcheck::serve::front {

namespace {

constexpr std::string_view kApiVersion = "externaldata.gatekeeper.sh/v1beta1";
constexpr size_t kMaxKeys = 1000;  // a pod has a handful; this bounds the work one request asks

}  // namespace

util::Expected<std::vector<std::string>> ParseProviderRequest(std::string_view body) {
  auto parsed = ParseJsonBody(body);
  if (!parsed) return parsed.error();
  const nlohmann::json& j = *parsed;
  if (StringAt(j, "kind") != "ProviderRequest")
    return util::MakeError("the body is not a ProviderRequest");
  if (StringAt(j, "apiVersion") != kApiVersion)
    return util::MakeError("ProviderRequest apiVersion is not " + std::string(kApiVersion));
  auto req = j.find("request");
  if (req == j.end() || !req->is_object() || !req->contains("keys") || !(*req)["keys"].is_array())
    return util::MakeError("ProviderRequest without request.keys");
  std::vector<std::string> keys;
  for (const auto& k : (*req)["keys"]) {
    if (!k.is_string()) return util::MakeError("ProviderRequest key that is not a string");
    keys.push_back(k.get<std::string>());
  }
  if (keys.size() > kMaxKeys)
    return util::MakeError("ProviderRequest with more than " + std::to_string(kMaxKeys) + " keys");
  return keys;
}

std::string ProviderResponse(const std::vector<ImageResult>& images, rules::FailOn fail_on,
                             const std::string& system_error) {
  nlohmann::json items = nlohmann::json::array();
  for (const ImageResult& r : images) {
    nlohmann::json item = {{"key", r.use.image}};
    const fleet::Outcome& o = r.outcome;
    if (o.state == fleet::Outcome::State::kFailed) {
      item["error"] = o.error;
    } else if (o.state == fleet::Outcome::State::kPending) {
      item["value"] = {{"verdict", "unknown"}, {"digest", r.digest}};
    } else {
      nlohmann::json errors = nlohmann::json::array(), warnings = nlohmann::json::array();
      for (const VerdictFinding& f : o.verdict->findings) {
        if (rules::Fails(fail_on, f.severity))
          errors.push_back(FindingLine(f));
        else if (f.severity != rules::Severity::kInfo)
          warnings.push_back(FindingLine(f));
      }
      item["value"] = {{"verdict", errors.empty() ? "pass" : "fail"},
                       {"digest", r.digest},
                       {"errors", errors},
                       {"warnings", warnings}};
    }
    items.push_back(std::move(item));
  }
  nlohmann::json response = {{"idempotent", true}, {"items", std::move(items)}};
  if (!system_error.empty()) response["systemError"] = system_error;
  nlohmann::json j = {
      {"apiVersion", kApiVersion}, {"kind", "ProviderResponse"}, {"response", std::move(response)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace imgcheck::serve::front
