// The rules in effect: built-in files, then /etc/hangscope/rules.d, then --rules DIR.
#include <algorithm>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/rules/rule.h"

namespace hangscope::rules {
namespace {

// The *.json files of a directory, sorted; none when it does not exist.
std::vector<std::string> rule_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& name : list_directory(dir).value_or(std::vector<std::string>{})) {
    if (name.size() > 5 && name.substr(name.size() - 5) == ".json") out.push_back(dir + "/" + name);
  }
  return out;
}

void add_or_replace(std::vector<Rule>& rules, Rule rule) {
  for (auto& r : rules) {
    if (r.id == rule.id) {
      r = std::move(rule);
      return;
    }
  }
  rules.push_back(std::move(rule));
}

void load_dir(const std::string& dir, std::size_t max_bytes, RuleSet& set) {
  for (const auto& path : rule_files(dir)) {
    try {
      add_or_replace(set.rules, read_rule_file(path, max_bytes));
    } catch (const Error& e) {
      set.errors.push_back(e.what());
    }
  }
}

}  // namespace

Rule read_rule_file(const std::string& path, std::size_t max_bytes) {
  return parse_rule(read_input_file(path, "rule file", max_bytes), path);
}

RuleSet load_rules(const std::string& system_dir, const std::string& extra_dir,
                   std::size_t max_bytes) {
  RuleSet set;
  for (const auto& [name, text] : builtin_rule_files()) {
    try {
      add_or_replace(set.rules, parse_rule(text, "builtin:" + name));
    } catch (const Error& e) {
      set.errors.push_back(e.what());  // a test keeps this list empty
    }
  }
  if (!system_dir.empty()) load_dir(system_dir, max_bytes, set);
  if (!extra_dir.empty()) {
    if (list_directory(extra_dir)) {
      load_dir(extra_dir, max_bytes, set);
    } else {
      set.errors.push_back("--rules " + printable(extra_dir) +
                           ": not a readable directory of rule files");
    }
  }
  return set;
}

}  // namespace hangscope::rules
