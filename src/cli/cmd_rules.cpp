// `imgcheck rules list` and `imgcheck rules explain ID`, from the one rule table (rules.json).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "rules/knowledge.h"
#include "rules/scan.h"
#include "util/error.h"

namespace imgcheck::cli {

namespace {

struct RulesArgs {
  std::vector<std::string> rules_dirs;
  std::string id;
  bool json = false;
};

int List(const RulesArgs& args) {
  rules::Knowledge k = LoadKnowledge(args.rules_dirs);
  auto implemented = rules::ImplementedRules();
  if (args.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& r : k.rules())
      out.push_back({{"id", r.id},
                     {"name", r.name},
                     {"severity", rules::SeverityName(r.severity)},
                     {"summary", r.summary},
                     {"needs_target", r.needs_target}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& r : k.rules()) {
    std::string severity(rules::SeverityName(r.severity));
    std::printf("%-6s %-30s %-8s %s%s\n", r.id.c_str(), r.name.c_str(), severity.c_str(),
                r.summary.c_str(),
                r.needs_target.empty() ? "" : (" [needs --" + r.needs_target + "]").c_str());
  }
  return 0;
}

int Explain(const RulesArgs& args) {
  rules::Knowledge k = LoadKnowledge(args.rules_dirs);
  const rules::RuleInfo* r = k.Rule(args.id);
  if (!r) {
    std::string hint = k.SuggestRule(args.id);
    throw util::Fatal("unknown rule '" + args.id + "'" +
                      (hint.empty() ? "" : "; did you mean " + hint + "?") +
                      " (imgcheck rules list shows them all)");
  }
  std::cout << r->id << " " << r->name << " (" << rules::SeverityName(r->severity)
            << " by default)\n\n"
            << r->summary << "\n\nWhy it breaks at run time:\n  " << r->breaks
            << "\n\nWhat users see:\n";
  for (const auto& e : r->errors) std::cout << "  " << e << "\n";
  std::cout << "\nFix:\n  " << r->remediation << "\n";
  if (!r->needs_target.empty())
    std::cout << "\nNeeds a target " << r->needs_target << " (--" << r->needs_target
              << " or --host); silent without one.\n";
  std::cout << "\nSource: " << r->source << "\n";
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
  return [args, mode]() -> int { return *mode == "explain" ? Explain(*args) : List(*args); };
}

}  // namespace imgcheck::cli
