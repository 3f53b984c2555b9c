// serve --trust-key: the verdict of a digest this server never scanned, from a signed attestation
// of the current policy identity (src/attest), found in about the time a manifest fetch takes.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "attest/keys.h"
#include "attest/statement.h"
#include "image/registry.h"
#include "image/registry_http.h"
#include "rules/config.h"
#include "serve/metrics.h"
#include "serve/verdict.h"

namespace imgcheck::serve::trust {

struct AttestationOptions {
  std::vector<attest::PublicKey> keys;  ///< --trust-key: empty, attestations are not consulted
  image::RegistryOptions registry;      ///< as the scans': credentials only to their host
  rules::FailOn fail_on{rules::Severity::kError};  ///< the gate (the policy's)
  /// --verify-attestations-by-scan: a verdict from an attestation still gets a scan, in the
  /// background, which replaces it.
  bool verify_by_scan = false;
};

/// The verdict a verified statement gives for `digest` (`reference` names it pinned): its
/// listed findings, and when the statement says "fail" but lists none that fails `gate` (cut by
/// the predicate's bound), one error finding that says so. Source "attestation"; its report
/// is an imgcheck-report/1 document that ParseVerdict reads back from the shared store.
Verdict VerdictOfStatement(const attest::Statement& s, const std::string& digest,
                           const std::string& reference, const std::string& key,
                           rules::FailOn gate);

class Attestations {
 public:
  /// The registry clients it makes share warm connections per registry for its lifetime
  /// (options.registry.connections, made here when not given).
  Attestations(AttestationOptions options, Metrics& metrics)
      : options_(std::move(options)), metrics_(metrics) {
    if (!options_.registry.connections)
      options_.registry.connections = std::make_shared<image::ConnectionShares>();
  }
  bool enabled() const { return !options_.keys.empty(); }
  bool verify_by_scan() const { return options_.verify_by_scan; }
  /// The full policy identity (scan::Policy::identity) statements must carry; set again when
  /// SIGHUP reloads the policy.
  void SetIdentity(const std::string& identity);
  /// The verdict of the newest valid attestation of `digest` in the repository of `pinned`
  /// ("host/repo@sha256:..."); null when none verifies or the registry fails (each refusal is
  /// counted by reason, a registry failure as "unreadable").
  std::shared_ptr<const Verdict> Find(const std::string& digest, const std::string& pinned);

 private:
  AttestationOptions options_;
  Metrics& metrics_;
  std::mutex mu_;
  std::string identity_;  ///< under mu_
};

}  // namespace imgcheck::serve::trust
