// `hangscope rules list|check FILE`: the signature rules in effect, and validation of one file;
// as text for people or, with --json, as one JSON document for scripts.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "hangscope/cli/commands.h"
#include "hangscope/common/error.h"
#include "hangscope/common/text.h"
#include "hangscope/rules/engine.h"
#include "hangscope/rules/rule.h"

namespace hangscope::cli {
namespace {

struct RulesArguments {
  std::string rules_dir;
  std::string file;
  bool json = false;
  std::size_t max_input_mib = kDefaultMaxInputBytes >> 20;
  std::size_t max_bytes() const { return max_input_mib << 20; }
};

// A JSON document on stdout; a byte that is not UTF-8 becomes U+FFFD, never an exception.
void print_json(const nlohmann::json& doc) {
  std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

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
  const auto set = rules::load_rules(rules::kSystemRulesDir, args.rules_dir, args.max_bytes());
  if (args.json) {
    nlohmann::json out = {{"rules", nlohmann::json::array()}, {"errors", set.errors}};
    for (const auto& r : set.rules) out["rules"].push_back(rule_summary(r));
    print_json(out);
  } else {
    for (const auto& e : set.errors) print_error("skipped rule: " + e);
    for (const auto& r : set.rules) {
      // Read from rule files: shown through printable().
      std::cout << printable(r.id) << "  (" << printable(r.source) << ", confidence "
                << r.confidence << ")\n  " << printable(r.title) << "\n";
    }
  }
  return set.errors.empty() ? kExitOk : kExitFailed;
}

// A rule file's verdict: the rule, or why the file is not one.
struct RuleCheck {
  std::optional<rules::Rule> rule;
  std::string error;
};

RuleCheck check_rule_file(const std::string& file, std::size_t max_bytes) {
  try {
    return {rules::read_rule_file(file, max_bytes), ""};
  } catch (const Error& e) {
    return {std::nullopt, e.what()};
  }
}

// Text, or with --json {"file", "valid", "rule" | "error"}; the exit code says the same.
int check_rule(const RulesArguments& args) {
  const auto result = check_rule_file(args.file, args.max_bytes());
  if (args.json) {
    nlohmann::json out = {{"file", args.file}, {"valid", result.rule.has_value()}};
    if (result.rule) {
      out["rule"] = rule_summary(*result.rule);
    } else {
      out["error"] = result.error;
    }
    print_json(out);
  } else if (result.rule) {
    std::cout << printable(args.file) << ": rule " << printable(result.rule->id) << " is valid ("
              << result.rule->groups.size() << " group(s), " << result.rule->facts.size()
              << " fact(s))\n";
  } else {
    print_error(result.error);
  }
  return result.rule ? kExitOk : kExitFailed;
}

}  // namespace

CommandRunner register_rules_command(CLI::App& app) {
  auto args = std::make_shared<RulesArguments>();
  app.require_subcommand(1);
  auto* list = app.add_subcommand("list", std::string("The rules in effect (built-in, ") +
                                              rules::kSystemRulesDir + ", --rules)");
  list->add_option("--rules", args->rules_dir, "Directory of extra rule files (*.json)");
  list->add_flag("--json", args->json,
                 "Print {\"rules\": [{id, title, source, confidence, groups, facts, explains}], "
                 "\"errors\": [...]}");
  auto* check = app.add_subcommand("check", "Validate one rule file");
  check->add_option("file", args->file, "The rule file")->required();
  check->add_flag("--json", args->json,
                  "Print {\"file\", \"valid\", \"rule\" or \"error\"} (exit code 0 or 1 as well)");
  for (auto* command : {list, check}) {
    command
        ->add_option("--max-input-mib", args->max_input_mib,
                     "Largest rule file read, in MiB; larger ones are refused")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str();
  }
  app.footer(
      "Examples:\n"
      "  hangscope rules list\n"
      "  hangscope rules list --rules ./my-rules --json | jq -r '.rules[].id'\n"
      "  hangscope rules check my-rule.json     # FILE:LINE: reason, exit 1, when it is wrong");
  return [args, list, check] {
    if (list->parsed()) return list_rules(*args);
    if (check->parsed()) return check_rule(*args);
    return kExitUsage;
  };
}

}  // namespace hangscope::cli
