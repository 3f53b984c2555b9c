// The in-toto Statement (in-toto attestation spec v1, statement.md) of one scan: its subject is
// the image's manifest digest, its predicate the verdict and what a policy needs to act on it.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "report/report.h"
#include "scan/policy.h"
#include "util/error.h"

namespace imgcheck::attest {

/// Statement _type values: v1 is written; v0.1, which cosign attest writes, is read too.
inline constexpr std::string_view kStatementV1 = "https://in-toto.io/Statement/v1";
inline constexpr std::string_view kStatementV01 = "https://in-toto.io/Statement/v0.1";
/// The predicate's type: imgcheck's verdict, version 1 of its fields (docs/admission.md).
inline constexpr std::string_view kPredicateType =
    "https://github.com/imgcheck/imgcheck/attestation/verdict/v1";
/// Findings listed in a predicate; the rest are counted in findingsOmitted.
inline constexpr size_t kMaxPredicateFindings = 200;

/// The predicate of a scan's report under `policy`: tool, rules data, policy identity, verdict
/// ("pass" or "fail", as scan's exit code), counts by severity, and each finding's rule,
/// severity, main path and layer (the first kMaxPredicateFindings of them).
nlohmann::ordered_json Predicate(const report::Report& report, const scan::Policy& policy);

/// The statement's JSON text: subject `name` (the repository, as cosign names it) with
/// `digest` ("sha256:HEX"), of kPredicateType.
std::string StatementJson(const std::string& name, const std::string& digest,
                          const nlohmann::ordered_json& predicate);

/// What a verifier reads from a statement.
struct Statement {
  std::string type;                          ///< _type
  std::string predicate_type;                ///< predicateType
  std::vector<std::string> subject_digests;  ///< "sha256:HEX" of each subject with a sha256
  nlohmann::json predicate;                  ///< an object
  /// predicate.policy.identity and predicate.verdict ("" when absent or not strings).
  std::string policy_identity, verdict;
};

/// Reads a statement's JSON text; one-line error when it is not JSON, not a Statement v1 or
/// v0.1, or lacks subject, predicateType or an object predicate.
util::Expected<Statement> ParseStatement(std::string_view text);

}  // namespace imgcheck::attest
