#include "serve/trust/attested.h"

#include <nlohmann/json.hpp>

#include "attest/attest.h"
#include "serve/log.h"
#include "util/error.h"

namespace imgcheck::serve::trust {

Verdict VerdictOfStatement(const attest::Statement& s, const std::string& digest,
                           const std::string& reference, const std::string& key,
                           rules::FailOn gate) {
  Verdict v;
  v.digest = digest;
  v.reference = reference;
  v.source = "attestation";
  auto findings = s.predicate.find("findings");
  if (findings != s.predicate.end() && findings->is_array()) {
    for (const auto& f : *findings) {
      if (!f.is_object()) continue;
      auto severity = rules::ParseSeverity(f.value("severity", ""));
      if (!severity) continue;
      VerdictFinding vf;
      vf.rule = f.value("rule", "");
      vf.severity = *severity;
      vf.path = f.value("path", "");
      vf.message = "attested by " + key;
      v.findings.push_back(std::move(vf));
    }
  }
  if (s.verdict == "fail" && !v.Fails(gate)) {
    v.findings.push_back({"attestation", "attested-fail", rules::Severity::kError,
                          "the attested verdict is fail; its failing findings were cut from the "
                          "statement",
                          "", "scan the image for the full report"});
  }
  nlohmann::json report = {{"schema", "imgcheck-report/1"},
                           {"verdict_source", "attestation"},
                           {"attestation_key", key},
                           {"image", {{"reference", reference}, {"manifest_digest", digest}}},
                           {"findings", nlohmann::json::array()}};
  for (const VerdictFinding& f : v.findings) {
    report["findings"].push_back(
        {{"rule", f.rule},
         {"name", f.name},
         {"severity", std::string(rules::SeverityName(f.severity))},
         {"message", f.message},
         {"paths", f.path.empty() ? nlohmann::json::array() : nlohmann::json::array({f.path})},
         {"remediation", f.remediation}});
  }
  v.report = report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return v;
}

void Attestations::SetIdentity(const std::string& identity) {
  std::lock_guard lock(mu_);
  identity_ = identity;
}

std::shared_ptr<const Verdict> Attestations::Find(const std::string& digest,
                                                  const std::string& pinned) {
  std::string identity;
  {
    std::lock_guard lock(mu_);
    identity = identity_;
  }
  attest::Decision d;
  try {
    image::Repository repo(pinned, options_.registry);
    d = attest::VerifyDigest(repo, digest, options_.keys, identity);
  } catch (const util::Fatal& e) {
    metrics_.AttestationRejected("unreadable");
    Log("attestations of " + pinned + " unreadable: " + e.what());
    return nullptr;
  }
  for (const auto& r : d.refused) metrics_.AttestationRejected(attest::RejectionName(r.reason));
  if (!d.accepted) return nullptr;
  const attest::Statement& s = d.accepted->statement;
  metrics_.AttestationVerdict(s.verdict);
  return std::make_shared<const Verdict>(
      VerdictOfStatement(s, digest, pinned, d.accepted->key, options_.fail_on));
}

}  // namespace imgcheck::serve::trust
