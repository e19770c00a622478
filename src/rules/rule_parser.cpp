// Rule files: JSON text → Rule, with errors that name the file, the line and the reason.
#include <re2/re2.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/error.h"
#include "hangscope/common/text.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/rules/rule.h"

namespace hangscope::rules {
namespace {

using nlohmann::json;

const std::set<std::string> kStates = {"running", "waiting", "stopped", "uninterruptible",
                                       "dead",    "missing", "unknown"};
const std::set<std::string> kWaitKinds = {"collective", "store", "rendezvous", "channel", "ring",
                                          "lock",       "sleep", "cpu",        "other"};
// What a template may say of a group: {group} or {group.FIELD} (engine.cpp fills them).
const std::set<std::string> kGroupFields = {"count", "where", "nodes", "members"};

// "^[a-z0-9]+(-[a-z0-9]+)*$", checked by hand.
bool is_kebab_case(const std::string& id) {
  if (id.empty() || id.front() == '-' || id.back() == '-') return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool word = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!word && !(c == '-' && id[i + 1] != '-')) return false;
  }
  return true;
}

// An RE2 pattern compiled once; nullptr with `error` set when RE2 refuses it.
Regex compile(const std::string& pattern, std::string& error) {
  RE2::Options options;
  options.set_log_errors(false);  // the error is reported with the file and line instead
  auto re = std::make_shared<const RE2>(pattern, options);
  if (!re->ok()) {
    error = re->error();
    return nullptr;
  }
  return re;
}

// A frame pattern's `function_regex`: RE2 searched in a name (linear time, docs/rules.md).
class RegexTest : public model::FunctionTest {
 public:
  explicit RegexTest(Regex re) : re_(std::move(re)) {}
  bool operator()(std::string_view name) const override {
    return RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *re_);
  }

 private:
  Regex re_;
};

// Reads one rule; `fail` throws with the line of the key it is about.
class RuleReader {
 public:
  RuleReader(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  Rule read() {
    json doc;
    try {
      doc = json::parse(text_);
    } catch (const json::parse_error& e) {
      throw Error(printable(source_) + ":" + std::to_string(line_at(e.byte == 0 ? 0 : e.byte - 1)) +
                  ": not valid JSON: " + printable(strip_prefix(e.what())));
    } catch (const json::exception& e) {  // out_of_range 406: a number beyond double
      throw Error(printable(source_) + ":" + std::to_string(line_of_quoted(e.what())) +
                  ": not valid JSON: " + printable(strip_prefix(e.what())));
    }
    if (!doc.is_object()) fail("", "a rule file holds one JSON object");
    check_keys(
        doc, "",
        {"id", "title", "description", "confidence", "groups", "facts", "diverged", "waiting",
         "summary", "evidence", "remedies", "references", "explains", "show_facts"});
    Rule rule;
    rule.source = source_;
    rule.id = string(doc, "id", true);
    if (!is_kebab_case(rule.id)) fail("id", "the id must be kebab-case: " + printable(rule.id));
    rule.title = string(doc, "title", true);
    rule.description = string(doc, "description", false);
    if (doc.contains("confidence")) {
      if (!doc["confidence"].is_number()) fail("confidence", "confidence must be a number");
      rule.confidence = doc["confidence"].get<double>();
      if (rule.confidence < 0 || rule.confidence > 1) {
        fail("confidence", "confidence must be between 0 and 1");
      }
    }
    if (!doc.contains("groups") || !doc["groups"].is_object() || doc["groups"].empty()) {
      fail("groups", "`groups` must be an object with at least one group");
    }
    for (const auto& [name, spec] : doc["groups"].items()) rule.groups.push_back(group(name, spec));
    if (doc.contains("facts")) {
      if (!doc["facts"].is_array()) fail("facts", "`facts` must be a list");
      for (const auto& f : doc["facts"]) rule.facts.push_back(fact(f));
    }
    rule.diverged = string(doc, "diverged", true);
    rule.waiting = string(doc, "waiting", false);
    for (const auto* name : {&rule.diverged, &rule.waiting}) {
      if (name->empty()) continue;
      const auto found = std::find_if(rule.groups.begin(), rule.groups.end(),
                                      [&](const GroupSpec& g) { return g.name == *name; });
      const char* key = *name == rule.diverged ? "diverged" : "waiting";
      if (found == rule.groups.end()) fail(key, "no group named `" + *name + "`");
      if (found->processes != "ranks") {
        fail(key, std::string("`") + key + "` must name a group of ranks, `" + *name +
                      "` holds other processes");
      }
    }
    rule.summary = string(doc, "summary", true);
    check_placeholders(rule.summary, "summary", rule.groups);
    rule.evidence = strings(doc, "evidence");
    for (const auto& e : rule.evidence) check_placeholders(e, "evidence", rule.groups);
    rule.remedies = strings(doc, "remedies");
    rule.references = strings(doc, "references");
    rule.explains = strings(doc, "explains");
    for (const auto& id : rule.explains) {
      if (!analysis::verdict_ids::is_builtin(id)) {
        fail("explains",
             "rule `" + printable(rule.id) + "` explains `" + printable(id) +
                 "`, which is no built-in verdict's id (the verdict ids: docs/rules.md)");
      }
    }
    rule.show_facts = strings(doc, "show_facts");
    for (const auto& shown : rule.show_facts) {
      if (!model::fact_keys::is_known_fact_prefix(shown)) {
        fail("show_facts", "`" + printable(shown) +
                               "` names no fact hangscope records (the fact "
                               "keys: docs/rules.md)");
      }
    }
    return rule;
  }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& reason) const {
    throw Error(printable(source_) + ":" + std::to_string(line_of_key(key)) + ": " +
                printable(reason));
  }

  std::size_t line_at(std::size_t byte) const {
    byte = std::min(byte, text_.size());
    return 1 + static_cast<std::size_t>(
                   std::count(text_.begin(), text_.begin() + static_cast<long>(byte), '\n'));
  }

  // The line of the first `"key":` in the text (1 when absent).
  std::size_t line_of_key(const std::string& key) const {
    if (key.empty()) return 1;
    const auto at = text_.find("\"" + key + "\"");
    return at == std::string::npos ? 1 : line_at(at);
  }

  // The line of the text a message quotes ("number overflow parsing '1e999'"); 1 when none.
  std::size_t line_of_quoted(const std::string& message) const {
    const auto open = message.find('\'');
    const auto close = open == std::string::npos ? open : message.find('\'', open + 1);
    if (close == std::string::npos || close == open + 1) return 1;
    const auto at = text_.find(message.substr(open + 1, close - open - 1));
    return at == std::string::npos ? 1 : line_at(at);
  }

  static std::string strip_prefix(const std::string& what) {
    const auto colon = what.find(": ");
    return colon == std::string::npos ? what : what.substr(colon + 2);
  }

  void check_keys(const json& object, const std::string& where,
                  std::initializer_list<const char*> known) const {
    for (const auto& item : object.items()) {
      const std::string& key = item.key();  // (clang 14 lambdas cannot capture a binding)
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
        fail(key, "unknown key `" + key + "`" + (where.empty() ? "" : " in " + where));
      }
    }
  }

  std::string string(const json& object, const char* key, bool required) const {
    if (!object.contains(key)) {
      if (required) fail("", std::string("missing `") + key + "`");
      return "";
    }
    if (!object[key].is_string()) fail(key, std::string("`") + key + "` must be a string");
    return object[key].get<std::string>();
  }

  std::vector<std::string> strings(const json& object, const char* key) const {
    std::vector<std::string> out;
    if (!object.contains(key)) return out;
    const auto& list = object[key];
    if (!list.is_array()) fail(key, std::string("`") + key + "` must be a list of strings");
    for (const auto& item : list) {
      if (!item.is_string()) fail(key, std::string("`") + key + "` must be a list of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  // Every {…} of a template must name a group, optionally with a known field.
  void check_placeholders(const std::string& text, const char* key,
                          const std::vector<GroupSpec>& groups) const {
    for (auto open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
      const auto close = text.find('}', open);
      if (close == std::string::npos) {
        fail(key, std::string("`") + key + "` has a `{` without its `}`");
      }
      const std::string inside = text.substr(open + 1, close - open - 1);
      const auto dot = inside.find('.');
      const std::string group = inside.substr(0, dot);
      const bool known_group = std::any_of(groups.begin(), groups.end(),
                                           [&](const GroupSpec& g) { return g.name == group; });
      const bool known_field =
          dot == std::string::npos || kGroupFields.count(inside.substr(dot + 1));
      if (!known_group || !known_field) {
        fail(key,
             "unknown placeholder `{" + printable(inside) + "}` in `" + key +
                 "`: use {GROUP} or {GROUP.count|where|nodes|members} with a group of the rule");
      }
    }
  }

  FramePattern frame(const json& spec, const std::string& group) const {
    if (!spec.is_object()) fail(group, "frame patterns in `" + group + "` must be objects");
    check_keys(spec, "a frame pattern of `" + group + "`",
               {"function", "function_regex", "file", "native"});
    FramePattern p;
    if (auto function = string(spec, "function", false); !function.empty()) {
      p.functions.push_back(std::move(function));
    }
    p.name_match = FramePattern::NameMatch::kQualname;
    p.function_regex = string(spec, "function_regex", false);
    p.file = string(spec, "file", false);
    p.file_match = FramePattern::FileMatch::kSuffix;
    p.native = string(spec, "native", false);
    if (p.empty()) fail(group, "an empty frame pattern in `" + group + "` would match every frame");
    if (!p.function_regex.empty()) {
      std::string why;
      auto re = compile(p.function_regex, why);
      if (!re) {
        fail("function_regex",
             "bad function_regex `" + printable(p.function_regex) + "` (RE2 syntax): " + why);
      }
      p.function_test = std::make_shared<const RegexTest>(std::move(re));
    }
    return p;
  }

  PostMortemSpec post_mortem(const std::string& name, const json& spec) const {
    if (!spec.is_object()) fail("post_mortem", "`post_mortem` of `" + name + "` must be an object");
    check_keys(spec, "`post_mortem` of group `" + name + "`", {"log", "not_log"});
    PostMortemSpec p{strings(spec, "log"), strings(spec, "not_log")};
    if (p.log.empty() && p.not_log.empty()) {
      fail("post_mortem", "`post_mortem` of group `" + name + "` has no condition");
    }
    return p;
  }

  GroupSpec group(const std::string& name, const json& spec) const {
    if (!spec.is_object()) fail(name, "group `" + name + "` must be an object");
    check_keys(spec, "group `" + name + "`",
               {"frames", "not_frames", "states", "wait_kinds", "log", "require", "processes",
                "post_mortem"});
    GroupSpec g;
    g.name = name;
    for (const char* list : {"frames", "not_frames"}) {
      if (!spec.contains(list)) continue;
      if (!spec[list].is_array()) fail(list, std::string("`") + list + "` must be a list");
      for (const auto& f : spec[list]) {
        (std::string(list) == "frames" ? g.frames : g.not_frames).push_back(frame(f, name));
      }
    }
    g.states = strings(spec, "states");
    for (const auto& s : g.states) {
      if (!kStates.count(s)) fail("states", "unknown rank state `" + s + "`");
    }
    g.wait_kinds = strings(spec, "wait_kinds");
    for (const auto& k : g.wait_kinds) {
      if (!kWaitKinds.count(k)) fail("wait_kinds", "unknown wait kind `" + k + "`");
    }
    g.log = strings(spec, "log");
    if (spec.contains("require")) {
      g.require = string(spec, "require", false);
      if (g.require != "some" && g.require != "all" && g.require != "none" && g.require != "any") {
        fail("require", "`require` must be some, all, none or any");
      }
    }
    if (spec.contains("processes")) {
      g.processes = string(spec, "processes", false);
      if (g.processes != "ranks" && g.processes != "others") {
        fail("processes", "`processes` must be ranks or others");
      }
    }
    if (spec.contains("post_mortem")) g.post_mortem = post_mortem(name, spec["post_mortem"]);
    if (g.frames.empty() && g.states.empty() && g.wait_kinds.empty() && g.log.empty()) {
      fail(name, "group `" + name + "` has no condition: it would hold every rank");
    }
    return g;
  }

  FactSpec fact(const json& spec) const {
    if (!spec.is_object()) fail("facts", "each fact must be an object");
    check_keys(spec, "a fact",
               {"name", "env", "equals", "in", "nodes_at_least", "package", "fact", "at_least",
                "below", "matches", "expect"});
    FactSpec f;
    f.name = string(spec, "name", true);
    f.env = string(spec, "env", false);
    if (spec.contains("equals")) f.equals = string(spec, "equals", false);
    f.in = strings(spec, "in");
    if (spec.contains("nodes_at_least")) {
      if (!spec["nodes_at_least"].is_number_integer()) {
        fail("nodes_at_least", "`nodes_at_least` must be an integer");
      }
      f.nodes_at_least = spec["nodes_at_least"].get<int>();
    }
    if (spec.contains("expect")) {
      if (!spec["expect"].is_boolean()) fail("expect", "`expect` must be true or false");
      f.expect = spec["expect"].get<bool>();
    }
    f.package = string(spec, "package", false);
    f.at_least = string(spec, "at_least", false);
    f.below = string(spec, "below", false);
    f.fact = string(spec, "fact", false);
    if (!f.fact.empty() && !model::fact_keys::is_known_fact_key(f.fact)) {
      fail("fact", "fact `" + printable(f.name) + "` reads `" + printable(f.fact) +
                       "`, which no capture records (the fact keys: docs/rules.md)");
    }
    f.matches = string(spec, "matches", false);
    if (!f.matches.empty()) {
      std::string why;
      f.matches_re = compile(f.matches, why);
      if (!f.matches_re) {
        fail("matches", "bad regex `" + printable(f.matches) + "` (RE2 syntax): " + why);
      }
    }
    const int kinds =
        !f.env.empty() + f.nodes_at_least.has_value() + !f.package.empty() + !f.fact.empty();
    if (kinds != 1) {
      fail("facts",
           "fact `" + f.name + "` needs exactly one of `env`, `nodes_at_least`, `package`, `fact`");
    }
    return f;
  }

  const std::string& text_;
  const std::string& source_;
};

}  // namespace

Rule parse_rule(const std::string& text, const std::string& source) {
  return RuleReader(text, source).read();
}

}  // namespace hangscope::rules
