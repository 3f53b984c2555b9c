// `imgcheck verify IMAGE --key PUB`: the verdict of a registry image from its signed
// attestations (scan --attest), without scanning it. For an index, the verdict of one
// platform's image (--platform, the host's by default) or of all of them. Exit 0: an
// attestation by a trusted key says pass under the policy asked for (for every platform asked
// for); 1: one says fail; 2: an image asked for has no attestation that verifies.
#include <sys/utsname.h>

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
  std::string platform;  ///< --platform: os/arch[/variant] or "all"; "": the host's
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

// linux/ARCH of this machine, in Go's GOARCH names as image indexes have them.
std::string HostPlatform() {
  utsname u{};
  std::string arch = uname(&u) == 0 ? u.machine : "x86_64";
  if (arch == "x86_64") arch = "amd64";
  if (arch == "aarch64") arch = "arm64";
  return "linux/" + arch;
}

nlohmann::ordered_json DecisionJson(const std::string& reference, const std::string& platform,
                                    const attest::Decision& d) {
  nlohmann::ordered_json j;
  j["image"] = reference;
  if (!platform.empty()) j["platform"] = platform;
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

// One line per refused attestation and per image's verdict ("not attested" when it has none).
std::string DecisionText(const std::string& ref, const attest::ImageDecision& all) {
  std::string text;
  for (const auto& [platform, d] : all.images) {
    std::string what = ref + (platform.empty() ? "" : " " + platform) + " " + d.digest;
    for (const auto& r : d.refused)
      text += what + ": refused " + r.layer + ": " + std::string(attest::RejectionName(r.reason)) +
              ": " + r.message + "\n";
    if (d.accepted) {
      text += what + ": " + (d.accepted->statement.verdict == "pass" ? "PASS" : "FAIL") +
              " (attested, signed by " + d.accepted->key + ", policy " +
              d.accepted->statement.policy_identity + ")\n";
    } else if (d.refused.empty()) {
      text += what + ": not attested\n";
    }
  }
  return text;
}

int Verify(const VerifyArgs& args) {
  VerifyFormat format = FormatOf(kVerifyFormats, args.format);
  std::vector<attest::PublicKey> keys;
  for (const auto& k : args.keys) keys.push_back(attest::LoadPublicKey(k));
  std::string identity;
  if (!args.any_policy) identity = scan::LoadPolicy(args.rules).identity;
  image::RegistryOptions registry = ToLoadOptions(args.image).registry;
  const std::string& ref = args.image.reference;
  attest::ImageDecision all = attest::VerifyImage(
      ref, args.platform.empty() ? HostPlatform() : args.platform, keys, identity, registry);
  if (format == VerifyFormat::kJson) {
    nlohmann::ordered_json j;
    if (all.index) {
      j["image"] = ref;
      j["index"] = all.root;
      j["platforms"] = nlohmann::ordered_json::array();
      for (const auto& i : all.images)
        j["platforms"].push_back(DecisionJson(ref, i.platform, i.decision));
    } else {
      j = DecisionJson(ref, "", all.images.front().decision);
    }
    std::cout << report::DumpJson(j, 2) << "\n";
  } else {
    std::cout << report::VisibleLines(DecisionText(ref, all));
  }
  // Every image asked for must have a verdict: a platform nobody attested is not a pass.
  std::vector<const attest::ImageDecision::Platform*> missing;
  bool failed = false;
  for (const auto& i : all.images) {
    if (!i.decision.accepted) missing.push_back(&i);
    failed = failed || (i.decision.accepted && i.decision.accepted->statement.verdict != "pass");
  }
  if (!missing.empty()) {
    const auto& [platform, d] = *missing.front();
    std::string what = ref + (platform.empty() ? "" : " for " + platform) + " (" + d.digest + ")";
    std::string more = missing.size() > 1
                           ? "; and " + std::to_string(missing.size() - 1) + " more platform(s)"
                           : "";
    if (d.refused.empty()) throw util::Fatal(what + " is not attested: none is attached" + more);
    throw util::Fatal("no valid attestation of " + what +
                      ": the last one: " + d.refused.back().message + more);
  }
  return failed ? 1 : 0;
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
  sub.add_option("--platform", args->platform,
                 "for an index: the os/arch[/variant] image to verify (default: this host's), "
                 "or all: every platform must be attested and pass");
  AddPullArgs(sub, args->image);
  return [args]() -> int { return Verify(*args); };
}

}  // namespace imgcheck::cli
