// `imgcheck rules list` and `imgcheck rules explain ID`, from the one rule table (rules.json).
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "attest/keys.h"
#include "attest/signature.h"
#include "cli/commands.h"
#include "report/escape.h"
#include "rules/knowledge.h"
#include "rules/scan.h"
#include "rules/update.h"
#include "scan/policy.h"
#include "util/error.h"

namespace imgcheck::cli {

namespace {

struct RulesArgs {
  std::vector<std::string> rules_dirs;
  std::string id;
  bool json = false;
  std::string reference;  ///< update: from where; push: to where
  std::string dir;        ///< push: the data to publish
  std::string key;        ///< push --key: the publisher's private key that signs it
  image::RegistryOptions registry;
};

int List(const RulesArgs& args) {
  rules::Knowledge k = scan::LoadKnowledge(args.rules_dirs);
  auto implemented = rules::ImplementedRules();
  if (args.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& r : k.rules())
      out.push_back({{"id", r.id},
                     {"name", r.name},
                     {"severity", rules::SeverityName(r.severity)},
                     {"summary", r.summary},
                     {"needs_target", r.needs_target}});
    std::cout << report::DumpJson(out, 2) << "\n";
    return 0;
  }
  // Rule files given with --rules are input like any other: the text goes out through Visible.
  std::ostringstream text;
  text << std::left;
  for (const auto& r : k.rules())
    text << std::setw(6) << r.id << " " << std::setw(30) << r.name << " " << std::setw(8)
         << rules::SeverityName(r.severity) << " " << r.summary
         << (r.needs_target.empty() ? "" : " [needs --" + r.needs_target + "]") << "\n";
  text << "\nrules data " << k.version().str() << " (schema " << k.version().schema << ") from "
       << scan::RulesDir() << "\n";
  std::cout << report::VisibleLines(text.str());
  return 0;
}

int Explain(const RulesArgs& args) {
  rules::Knowledge k = scan::LoadKnowledge(args.rules_dirs);
  const rules::RuleInfo* r = k.Rule(args.id);
  if (!r) {
    std::string hint = k.SuggestRule(args.id);
    throw util::Fatal("unknown rule '" + args.id + "'" +
                      (hint.empty() ? "" : "; did you mean " + hint + "?") +
                      " (imgcheck rules list shows them all)");
  }
  std::ostringstream text;
  text << r->id << " " << r->name << " (" << rules::SeverityName(r->severity) << " by default)\n\n"
       << r->summary << "\n\nWhy it breaks at run time:\n  " << r->breaks
       << "\n\nWhat users see:\n";
  for (const auto& e : r->errors) text << "  " << e << "\n";
  text << "\nFix:\n  " << r->remediation << "\n";
  if (!r->needs_target.empty())
    text << "\nNeeds a target " << r->needs_target << " (--" << r->needs_target
         << " or --host); silent without one.\n";
  text << "\nSource: " << r->source << "\n";
  std::cout << report::VisibleLines(text.str());
  return 0;
}

// `rules update [REF]`: pulls, verifies (the publisher's signature, then the data) and
// installs the published data; the data in use changes only when all of it is there and valid.
int Update(const RulesArgs& args) {
  std::string ref = args.reference.empty() ? rules::kDefaultRulesReference : args.reference;
  std::vector<attest::PublicKey> keys = RulesKeys();
  if (keys.empty())
    throw util::Fatal("no key to check rules data with: " + scan::BundledRulesDir() +
                      " has no *.pub and no --rules-key was given");
  image::Artifact a =
      image::PullArtifact(ref, rules::kRulesArtifact, rules::kMaxRulesLayer, args.registry);
  // The signature of the manifest pulled (by its digest): a tag moved since is not signed.
  attest::SignedBy by = attest::VerifyArtifact(ref, a.manifest_digest, keys, args.registry,
                                               "the rules data of " + a.describe);
  std::string cache = rules::RulesCacheDir(scan::RulesCache());
  rules::DataVersion v = rules::InstallRules(a, cache, attest::SignatureRecord(by));
  std::cout << "installed rules data " << v.str() << " from " << a.describe << " ("
            << a.manifest_digest << "), signed by " << by.key << ", into " << cache << "\n";
  std::string note;
  rules::ChooseRulesDir(cache, scan::BundledRulesDir(), RulesSignatureCheck(), &note);
  if (!note.empty()) std::cout << "note: " << note << "; the bundled data stays in use\n";
  return 0;
}

// `rules push DIR REF [--key KEY]`: publishes DIR (a whole, valid data set) as the rules
// artifact, signed in cosign's layout when a key is given.
int Push(const RulesArgs& args) {
  std::optional<attest::Signer> signer;
  if (!args.key.empty()) signer = attest::LoadSigner(args.key);  // a bad key fails first
  rules::PackedRules p = rules::PackRules(args.dir);
  std::string digest =
      image::PushArtifact(args.reference, rules::kRulesArtifact, p.config, p.layer, args.registry);
  std::cout << "pushed rules data " << p.version.str() << " to " << args.reference << " (" << digest
            << ")\n";
  if (signer) {
    std::cout << "signed it as "
              << attest::SignArtifact(args.reference, digest, *signer, args.registry) << "\n";
  }
  return 0;
}

}  // namespace

Runner DefineRules(CLI::App& sub) {
  auto args = std::make_shared<RulesArgs>();
  sub.require_subcommand(1);
  // `rules list --rules DIR` as well as `rules --rules DIR list`: list/explain hand --rules up.
  sub.fallthrough();
  AddRulesArg(sub, args->rules_dirs);
  auto mode = std::make_shared<std::string>();
  CLI::App* list =
      sub.add_subcommand("list", "list every rule: ID, name, default severity, summary");
  list->add_flag("--json", args->json, "as JSON");
  list->callback([mode] { *mode = "list"; });
  CLI::App* explain =
      sub.add_subcommand("explain", "explain one rule: what, why it breaks, the fix");
  explain->add_option("id", args->id, "rule ID or name (IC001, cudnn-version-mismatch)")
      ->required();
  explain->callback([mode] { *mode = "explain"; });
  CLI::App* update = sub.add_subcommand(
      "update", "install the newest published rules data (an OCI artifact) without a rebuild");
  update
      ->add_option("reference", args->reference,
                   std::string("where from: a registry reference or oci:PATH[:REF] (default ") +
                       rules::kDefaultRulesReference + ")")
      ->capture_default_str();
  update->callback([mode] { *mode = "update"; });
  CLI::App* push = sub.add_subcommand("push", "publish a rules directory as an OCI artifact");
  push->add_option("dir", args->dir, "the rules directory (with version.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  push->add_option("reference", args->reference, "a registry reference or oci:PATH[:REF]")
      ->required();
  push->add_option("--key", args->key,
                   "the publisher's private key (PKCS#8 PEM): sign the artifact in cosign's "
                   "layout (tag sha256-HEX.sig), as `rules update` requires")
      ->check(CLI::ExistingFile);
  push->callback([mode] { *mode = "push"; });
  for (CLI::App* c : {update, push}) {
    c->add_option("--creds", args->registry.credentials.creds,
                  "[HOST=]USER:PASS for the registry (HOST= binds it to that registry)");
    c->add_option("--authfile", args->registry.credentials.authfile,
                  "an auth file (docker config.json or containers auth.json) to read");
    c->add_flag("--tls-verify", args->registry.tls_verify,
                "check the registry's TLS certificate (--tls-verify=false to skip)");
    c->add_option("--cert-dir", args->registry.cert_dir,
                  "directory of *.crt CAs and a client pair");
    c->add_option("--ca-cert", args->registry.ca_cert, "a CA certificate bundle to trust");
  }
  return [args, mode]() -> int {
    if (*mode == "explain") return Explain(*args);
    if (*mode == "update") return Update(*args);
    if (*mode == "push") return Push(*args);
    return List(*args);
  };
}

}  // namespace imgcheck::cli
