// `hangscope rules list|check FILE`: the signature rules in effect, and validation of one file.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "hangscope/cli/commands.h"
#include "hangscope/common/error.h"
#include "hangscope/rules/engine.h"
#include "hangscope/rules/rule.h"

namespace hangscope::cli {
namespace {

struct RulesArguments {
  std::string rules_dir;
  std::string file;
};

int list_rules(const RulesArguments& args) {
  const auto set = rules::load_rules("/etc/hangscope/rules.d", args.rules_dir);
  for (const auto& e : set.errors) std::cerr << "hangscope: skipped rule: " << e << "\n";
  for (const auto& r : set.rules) {
    std::cout << r.id << "  (" << r.source << ", confidence " << r.confidence << ")\n  " << r.title
              << "\n";
  }
  return set.errors.empty() ? kExitOk : kExitFailed;
}

int check_rule(const RulesArguments& args) {
  std::ifstream in(args.file);
  if (!in) {
    std::cerr << "hangscope: error: " << args.file << ": cannot be read\n";
    return kExitFailed;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const auto rule = rules::parse_rule(text.str(), args.file);
    std::cout << args.file << ": rule " << rule.id << " is valid (" << rule.groups.size()
              << " group(s), " << rule.facts.size() << " fact(s))\n";
    return kExitOk;
  } catch (const Error& e) {
    std::cerr << "hangscope: error: " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace

analysis::Analysis analyze_with_rules(const analysis::Bundle& bundle, const std::string& rules_dir,
                                      const std::function<void(const std::string&)>& say) {
  auto result = analysis::analyze(bundle);
  const auto set = rules::load_rules("/etc/hangscope/rules.d", rules_dir);
  for (const auto& e : set.errors) say("skipped rule: " + e);
  rules::apply_rules(set.rules, result);
  return result;
}

CommandRunner register_rules_command(CLI::App& app) {
  auto args = std::make_shared<RulesArguments>();
  app.require_subcommand(1);
  auto* list =
      app.add_subcommand("list", "The rules in effect (built-in, /etc/hangscope/rules.d, --rules)");
  list->add_option("--rules", args->rules_dir, "Directory of extra rule files (*.json)");
  auto* check = app.add_subcommand("check", "Validate one rule file");
  check->add_option("file", args->file, "The rule file")->required();
  return [args, list, check] {
    if (list->parsed()) return list_rules(*args);
    if (check->parsed()) return check_rule(*args);
    return kExitUsage;
  };
}

}  // namespace hangscope::cli
