// What every scan of one run (or of one server's life) is judged by: the rule data, the config,
// the gate and the target machine, loaded once, and the identity that keys verdicts.
#pragma once

#include <string>
#include <vector>

#include "rules/config.h"
#include "rules/knowledge.h"
#include "rules/target.h"
#include "rules/update.h"

namespace imgcheck::scan {

/// Where the built-in rule data lives: ../share/imgcheck/rules beside the executable (an
/// installed copy), else the source tree's rules/ the build was made from.
std::string BundledRulesDir();
/// The rule data in use: $IMGCHECK_RULES_DIR when set; else the data `imgcheck rules update`
/// installed in the rules cache when it is newer, of this binary's schema and still signed by
/// a trusted publisher (SetRulesSignatureCheck; a note on stderr says when installed data is
/// passed over), else BundledRulesDir().
std::string RulesDir();
/// How RulesDir checks the signature of installed data (the CLI's, through src/attest, with
/// the keys it trusts); unset, installed data is never used.
void SetRulesSignatureCheck(rules::SignatureCheck check);
/// --rules-cache DIR: where updates are installed and looked for ("": the default,
/// $XDG_DATA_HOME/imgcheck/rules; rules::RulesCacheDir).
void SetRulesCache(const std::string& dir);
const std::string& RulesCache();
/// "sha256:HEX" of every regular file under `dir`, by relative path and content: the rule
/// data's identity (`imgcheck version`); util::Fatal when a file cannot be read.
std::string TreeDigest(const std::string& dir);
/// The rule data every caller uses, each file read once: RulesDir(), then `rules_dirs`.
rules::Knowledge LoadKnowledge(const std::vector<std::string>& rules_dirs);

/// The rule options as the user gave them (scan's and serve's --fail-on, --config, ...).
struct PolicyArgs {
  std::string fail_on;              ///< "" for the config's (else error)
  std::string config;               ///< "": .imgcheck.yaml/.yml/.json in the working directory
  std::vector<std::string> ignore;  ///< rule IDs, comma separated lists
  std::vector<std::string> rules_dirs;
  std::string driver, gpu;
  bool host = false;  ///< read this host's driver and GPU
};

struct Policy {
  std::vector<std::string> rules_dirs;
  rules::Knowledge knowledge;
  rules::Config config;
  rules::FailOn fail_on{rules::Severity::kError};
  rules::Target target;
  /// "sha256:" and the digest of the tool version, the rule data and its version
  /// (rules::DataVersion), the config and the target:
  /// verdicts computed under another identity are stale.
  std::string identity;
  /// The identity as verdict keys carry it: its first 16 hex digits.
  std::string ShortIdentity() const;
};
/// Loads the rule data, the config and the target; util::Fatal on a bad flag or file.
Policy LoadPolicy(const PolicyArgs& args);

}  // namespace imgcheck::scan
