#include "attest/statement.h"

#include "scan/build_info.h"

namespace imgcheck::attest {

nlohmann::ordered_json Predicate(const report::Report& report, const scan::Policy& policy) {
  nlohmann::ordered_json p;
  p["tool"] = {{"name", "imgcheck"},
               {"version", std::string(scan::BuildVersion())},
               {"commit", std::string(scan::BuildCommit())}};
  const rules::DataVersion& data = policy.knowledge.version();
  p["rules"] = {{"version", data.str()}, {"date", data.date}, {"digest", "sha256:" + data.digest}};
  nlohmann::ordered_json ignores = nlohmann::ordered_json::array();
  for (const rules::Ignore& i : policy.config.ignores)
    ignores.push_back({{"rule", i.rule}, {"path", i.path}, {"where", i.where}});
  const rules::Target& t = policy.target;
  p["policy"] = {
      {"identity", policy.identity},
      {"config", policy.config.path},
      {"failOn", policy.fail_on.at ? std::string(rules::SeverityName(*policy.fail_on.at)) : "none"},
      {"ignores", std::move(ignores)},
      {"target", {{"driver", t.driver ? t.driver->str() : ""}, {"sm", t.sm.value_or(0)}}}};
  size_t counts[3] = {0, 0, 0};
  bool failed = false;
  nlohmann::ordered_json findings = nlohmann::ordered_json::array();
  for (const rules::Finding& f : report.findings) {
    ++counts[static_cast<int>(f.severity)];
    failed = failed || rules::Fails(policy.fail_on, f.severity);
    if (findings.size() == kMaxPredicateFindings) continue;
    findings.push_back({{"rule", f.rule},
                        {"severity", std::string(rules::SeverityName(f.severity))},
                        {"path", f.paths.empty() ? f.env : f.paths.front()},
                        {"layer", {{"index", f.layer.index}, {"digest", f.layer.digest}}}});
  }
  p["image"] = {{"reference", report.image.reference},
                {"manifestDigest", report.image.manifest_digest},
                {"platform", report.image.platform}};
  p["verdict"] = failed ? "fail" : "pass";
  p["counts"] = {{"error", counts[2]}, {"warning", counts[1]}, {"info", counts[0]}};
  p["findingsOmitted"] = report.findings.size() - findings.size();
  p["findings"] = std::move(findings);
  p["scannedAt"] = report.timestamp;
  return p;
}

std::string StatementJson(const std::string& name, const std::string& digest,
                          const nlohmann::ordered_json& predicate) {
  nlohmann::ordered_json s;
  s["_type"] = kStatementV1;
  s["subject"] = nlohmann::ordered_json::array(
      {{{"name", name}, {"digest", {{"sha256", digest.substr(digest.find(':') + 1)}}}}});
  s["predicateType"] = kPredicateType;
  s["predicate"] = predicate;
  return s.dump();
}

util::Expected<Statement> ParseStatement(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return util::MakeError("the statement is not JSON");
  auto string_at = [](const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  Statement s;
  s.type = string_at(j, "_type");
  if (s.type != kStatementV1 && s.type != kStatementV01)
    return util::MakeError("the payload is not an in-toto Statement v1 or v0.1");
  s.predicate_type = string_at(j, "predicateType");
  auto subject = j.find("subject");
  auto predicate = j.find("predicate");
  if (s.predicate_type.empty() || subject == j.end() || !subject->is_array() ||
      predicate == j.end() || !predicate->is_object()) {
    return util::MakeError("the statement lacks subject, predicateType or predicate");
  }
  for (const auto& sub : *subject) {
    auto digest = sub.is_object() ? sub.find("digest") : sub.end();
    if (sub.is_object() && digest != sub.end() && digest->is_object()) {
      std::string hex = string_at(*digest, "sha256");
      if (!hex.empty()) s.subject_digests.push_back("sha256:" + hex);
    }
  }
  s.predicate = std::move(*predicate);
  auto policy = s.predicate.find("policy");
  if (policy != s.predicate.end() && policy->is_object())
    s.policy_identity = string_at(*policy, "identity");
  s.verdict = string_at(s.predicate, "verdict");
  return s;
}

}  // namespace imgcheck::attest
