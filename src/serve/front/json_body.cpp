#include "serve/front/json_body.h"

#include <string>

#include "util/json_scan.h"

namespace imgcheck::serve::front {

util::Expected<nlohmann::json> ParseJsonBody(std::string_view body) {
  util::JsonShape shape = util::ScanJson(body);  // before the parser allocates anything
  if (shape.depth > kMaxJsonDepth)
    return util::MakeError("the body nests deeper than " + std::to_string(kMaxJsonDepth));
  if (shape.values > kMaxJsonValues)
    return util::MakeError("the body holds more than " + std::to_string(kMaxJsonValues) +
                           " values");
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return util::MakeError("the body is not JSON");
  return j;
}

std::string StringAt(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string JsonPointer(const std::vector<std::string>& tokens) {
  nlohmann::json::json_pointer pointer;
  for (const std::string& t : tokens) pointer /= t;  // escaped by to_string
  return pointer.to_string();
}

}  // namespace imgcheck::serve::front
