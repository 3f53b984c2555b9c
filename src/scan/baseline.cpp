#include "scan/baseline.h"

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/file.h"
#include "util/json_scan.h"

namespace imgcheck::scan {

Baseline LoadBaseline(const std::string& path) {
  util::Expected<std::string> text = util::ReadFile(path, kMaxBaselineBytes);
  if (!text) throw util::Fatal("--baseline: " + text.error().message);
  return ParseBaseline(*text, path);
}

Baseline ParseBaseline(std::string_view text, const std::string& path) {
  auto refuse = [&path](const std::string& why) {
    return util::Fatal("--baseline: " + path + ": " + why);
  };
  // The nesting and the number of values checked before the parser allocates for them.
  util::JsonShape shape = util::ScanJson(text);
  if (shape.depth > kMaxBaselineDepth)
    throw refuse("nests deeper than " + std::to_string(kMaxBaselineDepth));
  if (shape.values > kMaxBaselineValues)
    throw refuse("holds more than " + std::to_string(kMaxBaselineValues) + " values");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw refuse("not JSON");
  if (!j.is_object() || j.value("schema", nlohmann::json()) != "imgcheck-report/1" ||
      !j.contains("findings") || !j["findings"].is_array())
    throw refuse("not an imgcheck JSON report (scan --format json)");
  Baseline b;
  b.path = path;
  for (const nlohmann::json& f : j["findings"]) {
    if (!f.is_object() || !f.contains("fingerprint") || !f["fingerprint"].is_string())
      throw refuse(
          "a finding without a fingerprint (an older imgcheck's report: scan the "
          "baseline image again)");
    b.fingerprints.insert(f["fingerprint"].get<std::string>());
  }
  return b;
}

void MarkBaseline(const std::set<std::string>& fingerprints,
                  std::vector<rules::Finding>& findings) {
  for (rules::Finding& f : findings) f.baseline = fingerprints.count(f.fingerprint) > 0;
}

}  // namespace imgcheck::scan
