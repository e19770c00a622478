// `hangscope rules list|check FILE`: the signature rules in effect, and validation of one file;
// as text for people or, with --json, as one JSON document for scripts.
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
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
  bool json = false;
};

// What a script needs of a rule: which it is, where it came from, what it matches.
nlohmann::json rule_summary(const rules::Rule& rule) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : rule.groups) groups.push_back(g.name);
  nlohmann::json facts = nlohmann::json::array();
  for (const auto& f : rule.facts) facts.push_back(f.name);
  return {{"id", rule.id},
          {"title", rule.title},
          {"source", rule.source},
          {"confidence", rule.confidence},
          {"groups", groups},
          {"facts", facts},
          {"explains", rule.explains}};
}

int list_rules(const RulesArguments& args) {
  const auto set = rules::load_rules("/etc/hangscope/rules.d", args.rules_dir);
  if (args.json) {
    nlohmann::json out = {{"rules", nlohmann::json::array()}, {"errors", set.errors}};
    for (const auto& r : set.rules) out["rules"].push_back(rule_summary(r));
    std::cout << out.dump(2) << "\n";
  } else {
    for (const auto& e : set.errors) std::cerr << "hangscope: skipped rule: " << e << "\n";
    for (const auto& r : set.rules) {
      std::cout << r.id << "  (" << r.source << ", confidence " << r.confidence << ")\n  "
                << r.title << "\n";
    }
  }
  return set.errors.empty() ? kExitOk : kExitFailed;
}

// rules check --json: {"file", "valid", "rule" | "error"}; the exit code says the same.
int check_rule_json(const RulesArguments& args, const std::string* text) {
  nlohmann::json out = {{"file", args.file}};
  try {
    if (!text) throw Error(args.file + ": cannot be read");
    out["rule"] = rule_summary(rules::parse_rule(*text, args.file));
    out["valid"] = true;
  } catch (const Error& e) {
    out["valid"] = false;
    out["error"] = e.what();
  }
  std::cout << out.dump(2) << "\n";
  return out["valid"].get<bool>() ? kExitOk : kExitFailed;
}

int check_rule(const RulesArguments& args) {
  std::ifstream in(args.file);
  if (!in && args.json) return check_rule_json(args, nullptr);
  if (!in) {
    std::cerr << "hangscope: error: " << args.file << ": cannot be read\n";
    return kExitFailed;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (args.json) {
    const std::string contents = text.str();
    return check_rule_json(args, &contents);
  }
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
  list->add_flag("--json", args->json,
                 "Print {\"rules\": [{id, title, source, confidence, groups, facts, explains}], "
                 "\"errors\": [...]}");
  auto* check = app.add_subcommand("check", "Validate one rule file");
  check->add_option("file", args->file, "The rule file")->required();
  check->add_flag("--json", args->json,
                  "Print {\"file\", \"valid\", \"rule\" or \"error\"} (exit code 0 or 1 as well)");
  return [args, list, check] {
    if (list->parsed()) return list_rules(*args);
    if (check->parsed()) return check_rule(*args);
    return kExitUsage;
  };
}

}  // namespace hangscope::cli
