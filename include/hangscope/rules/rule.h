// Signature rules for known hangs: data files (JSON) that match rank groups by frames, states,
// wait kinds and log lines, check facts (three-valued), and name the verdict, evidence,
// remedies and references. docs/rules.md documents the format.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/common/files.h"
#include "hangscope/model/frame_pattern.h"

namespace re2 {
class RE2;
}

namespace hangscope::rules {

// A rule's regular expression, compiled once when its file is parsed (RE2: linear time in
// the text, no lookaround or backreferences; docs/rules.md). Shared by copies of the rule.
using Regex = std::shared_ptr<const re2::RE2>;

// One frame pattern of a rule: the model's (model/frame_pattern.h), read from the rule's JSON
// as docs/rules.md says: `function` (Python co_name / qualname tail, or native symbol, exactly:
// NameMatch::kQualname), `function_regex` (RE2, searched in the function or qualname), `file`
// (suffix of the Python file: FileMatch::kSuffix), `native` (substring of a native symbol).
using FramePattern = model::FramePattern;

// What places a rank known post-mortem only (its flight-recorder dump and logs, no stack) in a
// group, instead of the group's other conditions: each `log` substring in some line of its
// logs, no `not_log` substring in any, and a log at all.
struct PostMortemSpec {
  std::vector<std::string> log;
  std::vector<std::string> not_log;
};

// Which ranks of a job belong to a group: all conditions must hold.
struct GroupSpec {
  std::string name;
  std::vector<FramePattern> frames;      // each matches some frame of the rank's stack
  std::vector<FramePattern> not_frames;  // none matches any frame
  std::vector<std::string> states;       // rank states (empty: any)
  std::vector<std::string> wait_kinds;   // wait point kinds (empty: any)
  std::vector<std::string> log;          // each is a substring of some log line of the rank
  std::string require = "some";          // some | all | none | any: how many must be in it
  std::string processes = "ranks";       // ranks | others (non-rank processes: EngineCore, …)
  std::optional<PostMortemSpec> post_mortem;  // none: no stackless post-mortem rank is a member
};

// A fact the rule needs; true, false or unknown when evaluated.
struct FactSpec {
  std::string name;  // for people: "custom all-reduce enabled"
  std::string env;   // an environment variable of the diverged ranks
  std::optional<std::string> equals;
  std::vector<std::string> in;
  std::optional<int> nodes_at_least;  // the job's ranks span at least N nodes
  std::string package;                // a package version of the diverged ranks (facts/versions)
  std::string fact;                   // any captured fact of the diverged ranks ("shm.free_bytes")
  std::string at_least, below;        // a version / number range (inclusive, exclusive)
  std::string matches;                // RE2 regex the fact's value must contain
  Regex matches_re;                   // matches compiled
  bool expect = true;                 // the truth value the rule needs
};

struct Rule {
  std::string id;
  std::string title;
  std::string description;
  double confidence = 0.9;
  std::vector<GroupSpec> groups;
  std::vector<FactSpec> facts;
  std::string diverged;  // group name
  std::string waiting;   // group name, may be empty
  std::string summary;   // template: {group}, {group.count}, {group.where}, {group.nodes},
                         // {group.members} (ranks with pp/tp/dp and node; processes for others)
  std::vector<std::string> evidence;
  std::vector<std::string> remedies;
  std::vector<std::string> references;
  std::vector<std::string> explains;    // generic verdict ids this rule explains
  std::vector<std::string> show_facts;  // fact key prefixes shown per rank ("cache.flashinfer")
  std::string source;                   // "builtin:<file>" or the file path
};

// Parses one rule file's text; throws hangscope::Error "SOURCE:LINE: reason".
Rule parse_rule(const std::string& text, const std::string& source);

// Reads and parses one rule file (a regular file of at most max_bytes); throws
// hangscope::Error naming the file and the reason ("FILE:LINE: reason" for its content).
Rule read_rule_file(const std::string& path, std::size_t max_bytes = kDefaultMaxInputBytes);

// The rules in effect: built-in < files in /etc/hangscope/rules.d < `extra_dir`; a later rule
// with the same id replaces an earlier one. A bad file is skipped and named in `errors`.
struct RuleSet {
  std::vector<Rule> rules;
  std::vector<std::string> errors;
};
// The administrator's rule directory, read by every command that applies rules.
inline constexpr const char* kSystemRulesDir = "/etc/hangscope/rules.d";
RuleSet load_rules(const std::string& system_dir = kSystemRulesDir,
                   const std::string& extra_dir = "",
                   std::size_t max_bytes = kDefaultMaxInputBytes);

// The built-in rule files: (file name, text), compiled into the binary.
const std::vector<std::pair<std::string, std::string>>& builtin_rule_files();

}  // namespace hangscope::rules
