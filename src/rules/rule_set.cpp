// The rules in effect: built-in files, then /etc/hangscope/rules.d, then --rules DIR.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
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

void load_dir(const std::string& dir, RuleSet& set) {
  for (const auto& path : rule_files(dir)) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      set.errors.push_back(path + ": cannot be read");
      continue;
    }
    try {
      add_or_replace(set.rules, parse_rule(text.str(), path));
    } catch (const Error& e) {
      set.errors.push_back(e.what());
    }
  }
}

}  // namespace

RuleSet load_rules(const std::string& system_dir, const std::string& extra_dir) {
  RuleSet set;
  for (const auto& [name, text] : builtin_rule_files()) {
    try {
      add_or_replace(set.rules, parse_rule(text, "builtin:" + name));
    } catch (const Error& e) {
      set.errors.push_back(e.what());  // a test keeps this list empty
    }
  }
  if (!system_dir.empty()) load_dir(system_dir, set);
  if (!extra_dir.empty()) {
    if (list_directory(extra_dir)) {
      load_dir(extra_dir, set);
    } else {
      set.errors.push_back(extra_dir + ": not a readable directory of rule files");
    }
  }
  return set;
}

}  // namespace hangscope::rules
