// `imgcheck rules list` and `imgcheck rules explain ID`, from the one rule table (rules.json).
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "report/escape.h"
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
