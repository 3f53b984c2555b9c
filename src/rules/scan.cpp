// Running the checks: every check family in rule ID order over one context; the rule data the
// loader stage chooses and loads consumers by.
#include "rules/scan.h"

#include <algorithm>

#include "rules/context.h"

namespace imgcheck::rules {

namespace {

// The dlopen rules as they apply to objects of one framework build: a name with "{cudnn_major}"
// (TensorFlow's dso_loader opens libcudnn.so.<the major it was built with>) gets the major from
// the framework's build facts; without such facts (or outside a framework) the name is dropped.
// A rule for one CUDA major (TensorFlow's libcufft.so.11: CUDA 12 builds) applies only to a build
// whose facts name that major; a rule for releases before one (TensorFlow 1.x's dso_loader in its
// Python extension) only to a framework whose release is known and below it.
std::vector<loader::DlopenRule> ForBuild(const std::vector<loader::DlopenRule>& rules,
                                         const catalog::Component* framework) {
  constexpr std::string_view kCudnnMajor = "{cudnn_major}";
  const catalog::BuildFacts* facts = framework ? &framework->build : nullptr;
  std::optional<Version> release = framework ? Version::Parse(framework->version) : std::nullopt;
  std::optional<Version> cudnn, cuda;
  if (facts != nullptr) {
    for (const char* key : {"cudnn_version", "cudnn"})
      if (auto it = facts->find(key); it != facts->end() && !cudnn)
        cudnn = Version::Parse(it->second);
    for (const char* key : {"cuda_version", "cuda"})
      if (auto it = facts->find(key); it != facts->end() && !cuda)
        cuda = Version::Parse(it->second);
  }
  std::vector<loader::DlopenRule> out;
  for (loader::DlopenRule rule : rules) {
    if (rule.cuda_major != 0 && (!cuda || cuda->major() != rule.cuda_major)) continue;
    if (!rule.framework_before.empty() &&
        (!release || !(*release < *Version::Parse(rule.framework_before))))
      continue;
    std::vector<loader::DlopenCall> calls;
    for (loader::DlopenCall& call : rule.calls) {
      std::vector<std::string> names;
      for (std::string& name : call.names) {
        size_t at = name.find(kCudnnMajor);
        if (at == std::string::npos) {
          names.push_back(std::move(name));
        } else if (cudnn) {
          names.push_back(name.replace(at, kCudnnMajor.size(), std::to_string(cudnn->major())));
        }
      }
      if (!names.empty()) calls.emplace_back(std::move(names));
    }
    rule.calls = std::move(calls);
    out.push_back(std::move(rule));
  }
  return out;
}

}  // namespace

loader::ConsumerRules ConsumerRulesOf(const Knowledge& knowledge) {
  loader::ConsumerRules rules;
  rules.libraries = &knowledge.libraries();
  rules.preload = &knowledge.preload();
  rules.optional = &knowledge.optional();
  rules.on_call = &knowledge.on_call();
  rules.imports = &knowledge.imports();
  rules.dlopen = [&knowledge](const catalog::Component* framework) {
    return ForBuild(knowledge.dlopen(), framework);
  };
  return rules;
}

std::vector<std::string> ImplementedRules() {
  std::vector<std::string> ids;
  for (const auto& list : {CudnnChecks(), LoaderChecks(), DriverChecks(), DataChecks()})
    for (const auto& c : list) ids.emplace_back(c.rule);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<Finding> RunChecks(const ScanInput& input) {
  Context ctx(input);
  std::vector<Check> all;
  for (auto list : {CudnnChecks(), LoaderChecks(), DriverChecks(), DataChecks()})
    all.insert(all.end(), list.begin(), list.end());
  std::sort(all.begin(), all.end(), [](const Check& a, const Check& b) { return a.rule < b.rule; });
  for (const auto& c : all) c.run(ctx);
  return std::move(ctx.findings);
}

}  // namespace imgcheck::rules
