// `imgcheck verify IMAGE --key PUB`: the verdict of a registry image from its signed
// attestations (scan --attest), without scanning it. Exit 0: an attestation by a trusted key
// says pass under the policy asked for; 1: it says fail; 2: no attestation verifies.
#include <iostream>

#include "attest/attest.h"
#include "cli/commands.h"
#include "cli/rule_args.h"
#include "report/escape.h"
#include "util/error.h"

namespace imgcheck::cli {

namespace {

struct VerifyArgs {
  ImageArgs image;
  std::vector<std::string> keys;
  scan::PolicyArgs rules;
  bool any_policy = false;
  std::string format = "text";
};

enum class VerifyFormat : uint8_t { kText, kJson };
inline constexpr std::array<util::FormatInfo<VerifyFormat>, 2> kVerifyFormats = {{
    {VerifyFormat::kText, "text", "the verdict and each refused attestation, one line each"},
    {VerifyFormat::kJson, "json", "the digest, the accepted statement's verdict, the refusals"},
}};

nlohmann::ordered_json DecisionJson(const std::string& reference, const attest::Decision& d) {
  nlohmann::ordered_json j;
  j["image"] = reference;
  j["digest"] = d.digest;
  if (d.accepted) {
    const attest::Statement& s = d.accepted->statement;
    j["verdict"] = s.verdict;
    j["key"] = d.accepted->key;
    j["policy"] = s.policy_identity;
    j["predicate"] = s.predicate;
  } else {
    j["verdict"] = nullptr;
  }
  j["refused"] = nlohmann::ordered_json::array();
  for (const auto& r : d.refused)
    j["refused"].push_back(
        {{"layer", r.layer}, {"reason", attest::RejectionName(r.reason)}, {"message", r.message}});
  return j;
}

int Verify(const VerifyArgs& args) {
  VerifyFormat format = FormatOf(kVerifyFormats, args.format);
  std::vector<attest::PublicKey> keys;
  for (const auto& k : args.keys) keys.push_back(attest::LoadPublicKey(k));
  std::string identity;
  if (!args.any_policy) identity = scan::LoadPolicy(args.rules).identity;
  image::RegistryOptions registry = ToLoadOptions(args.image).registry;
  attest::Decision d = attest::VerifyImage(args.image.reference, keys, identity, registry);
  if (format == VerifyFormat::kJson) {
    std::cout << report::DumpJson(DecisionJson(args.image.reference, d), 2) << "\n";
  } else {
    std::string text;
    for (const auto& r : d.refused)
      text += "refused " + r.layer + ": " + std::string(attest::RejectionName(r.reason)) + ": " +
              r.message + "\n";
    if (d.accepted) {
      text += args.image.reference + " " + d.digest + ": " +
              (d.accepted->statement.verdict == "pass" ? "PASS" : "FAIL") +
              " (attested, signed by " + d.accepted->key + ", policy " +
              d.accepted->statement.policy_identity + ")\n";
    }
    std::cout << report::VisibleLines(text);
  }
  if (!d.accepted) {
    std::string why =
        d.refused.empty() ? "none is attached" : "the last one: " + d.refused.back().message;
    throw util::Fatal("no valid attestation of " + args.image.reference + " (" + d.digest +
                      "): " + why);
  }
  return d.accepted->statement.verdict == "pass" ? 0 : 1;
}

}  // namespace

Runner DefineVerify(CLI::App& sub) {
  auto args = std::make_shared<VerifyArgs>();
  sub.add_option("image", args->image.reference, "a registry image (REF or docker://REF)")
      ->required();
  sub.add_option("--key", args->keys,
                 "a trusted public key (PEM SubjectPublicKeyInfo, as cosign.pub; repeatable)")
      ->required()
      ->check(CLI::ExistingFile);
  AddFormatOption(sub, args->format, kVerifyFormats);
  AddRuleArgs(sub, args->rules);
  sub.add_option("--policy-from", args->rules.config,
                 "the config file whose policy the attestation must have been made under "
                 "(the same as --config)");
  sub.add_flag("--any-policy", args->any_policy,
               "accept an attestation made under any policy identity");
  AddPullArgs(sub, args->image);
  return [args]() -> int { return Verify(*args); };
}

}  // namespace imgcheck::cli
