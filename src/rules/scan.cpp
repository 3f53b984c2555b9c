// Running the checks: every check family in rule ID order over one context.
#include "rules/scan.h"

#include <algorithm>

#include "rules/context.h"

namespace imgcheck::rules {

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
