#include "hangscope/rules/engine.h"

#include <re2/re2.h>

#include <algorithm>
#include <map>
#include <set>

#include "hangscope/analysis/call_tree.h"
#include "hangscope/analysis/postmortem.h"
#include "hangscope/analysis/rank_set.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/model/package_version.h"

namespace hangscope::rules {
namespace {

using analysis::Job;
using analysis::RankEntry;
using model::Frame;

// What a group condition looks at in a rank or another process.
struct Member {
  const model::ProcessRecord* process = nullptr;  // latest sample
  std::string state;                              // rank state name ("waiting", …)
  const waits::WaitPoint* wait = nullptr;
};

std::string state_of(char process_state) {
  switch (process_state) {
    case 'R':
      return "running";
    case 'T':
    case 't':
      return "stopped";
    case 'D':
      return "uninterruptible";
    case 'Z':
    case 'X':
      return "dead";
    default:
      return "waiting";
  }
}

// The frames a rule looks at: every thread running Python (every thread without Python).
std::vector<const Frame*> frames_of(const model::ProcessRecord* p) {
  std::vector<const Frame*> out;
  if (p == nullptr || !p->dump) return out;
  const auto& threads = p->dump->threads;
  const bool any_python = std::any_of(threads.begin(), threads.end(),
                                      [](const auto& t) { return !t.python_frames.empty(); });
  for (const auto& t : threads) {
    if (any_python && t.python_frames.empty()) continue;
    const auto& frames = t.frames.empty() ? t.native_frames : t.frames;
    for (const auto& f : frames) out.push_back(&f);
  }
  return out;
}

std::vector<std::string> matching_log_lines(const model::ProcessRecord* p,
                                            const std::string& needle) {
  std::vector<std::string> out;
  if (p == nullptr) return out;
  for (const auto& log : p->logs) {
    for (const auto& line : log.lines) {
      if (line.find(needle) != std::string::npos) out.push_back(line);
    }
  }
  return out;
}

// A rank known post-mortem only: its flight-recorder dump and the dead job's logs, no stack.
bool post_mortem_only(const model::ProcessRecord* p) {
  return p != nullptr && p->identity.source == model::IdentitySource::kFlightRecorder &&
         (!p->dump || p->dump->threads.empty());
}

bool has_log(const model::ProcessRecord* p) {
  return std::any_of(p->logs.begin(), p->logs.end(),
                     [](const auto& log) { return !log.lines.empty(); });
}

bool in_post_mortem_group(const PostMortemSpec& spec, const model::ProcessRecord* p) {
  if (!has_log(p)) return false;  // no log: nothing says where the rank was
  const auto logged = [&](const std::string& needle) {
    return !matching_log_lines(p, needle).empty();
  };
  return std::all_of(spec.log.begin(), spec.log.end(), logged) &&
         std::none_of(spec.not_log.begin(), spec.not_log.end(), logged);
}

// Where a post-mortem member was, as far as its log tells: no stack says more.
std::string post_mortem_where(const GroupSpec& g, const model::ProcessRecord* p) {
  for (const auto& needle : g.post_mortem->log) {
    const auto lines = matching_log_lines(p, needle);
    if (!lines.empty())
      return "unknown (post-mortem, no stack; its log: \"" + lines.front() + "\")";
  }
  return "unknown (post-mortem, no stack)";
}

bool in_group(const GroupSpec& g, const Member& m) {
  if (m.process == nullptr) return false;
  // A rank without a stack post-mortem is judged by the fingerprints its log carries, when the
  // rule says which; a live rank never is (its stack is the authority).
  if (g.post_mortem && post_mortem_only(m.process)) {
    return in_post_mortem_group(*g.post_mortem, m.process);
  }
  if (!g.states.empty() && std::find(g.states.begin(), g.states.end(), m.state) == g.states.end()) {
    return false;
  }
  if (!g.wait_kinds.empty() &&
      (m.wait == nullptr ||
       std::find(g.wait_kinds.begin(), g.wait_kinds.end(),
                 std::string(waits::to_string(m.wait->kind))) == g.wait_kinds.end())) {
    return false;
  }
  const auto frames = frames_of(m.process);
  const auto any_frame = [&](const FramePattern& p) {
    return std::any_of(frames.begin(), frames.end(), [&](const Frame* f) { return p.matches(*f); });
  };
  if (!std::all_of(g.frames.begin(), g.frames.end(), any_frame)) return false;
  if (std::any_of(g.not_frames.begin(), g.not_frames.end(), any_frame)) return false;
  for (const auto& needle : g.log) {
    if (matching_log_lines(m.process, needle).empty()) return false;
  }
  return true;
}

Member member_of(const RankEntry& rank) {
  if (rank.history.empty() || !rank.rank) return {};
  return {rank.latest(), std::string(to_string(rank.state)), &rank.wait};
}

// "rank 3 (pp 1, tp 1, node1 pid 812)".
std::string describe_rank(const RankEntry& r) {
  std::string roles;
  if (const auto* p = r.latest()) {
    const auto& id = p->identity;
    for (const auto& [name, value] : {std::pair{"pp", id.pp}, {"tp", id.tp}, {"dp", id.dp}}) {
      if (value) roles += std::string(name) + " " + std::to_string(*value) + ", ";
    }
  }
  const std::string pid = r.pid != 0 ? " pid " + std::to_string(r.pid) : "";  // 0: a dump's
  return "rank " + std::to_string(*r.rank) + " (" + roles + r.node + pid + ")";
}

// "EngineCore_DP0 pid 812 (node0)".
std::string describe_other(const analysis::OtherProcess& o) {
  const auto& p = *o.process;
  const std::string name = !p.identity.title.empty() ? p.identity.title : p.comm;
  return name + " pid " + std::to_string(p.pid) + " (" + o.node + ")";
}

struct GroupMatch {
  std::set<int> ranks;
  std::set<std::string> nodes;
  std::string where;                 // the first member's wait point
  std::vector<std::string> members;  // for people, in rank order
  const model::ProcessRecord* first = nullptr;
  bool empty() const { return members.empty(); }
};

void add_member(GroupMatch& g, const std::string& node, const waits::WaitPoint& wait,
                const model::ProcessRecord* p, std::string description) {
  g.nodes.insert(node);
  if (g.where.empty()) g.where = wait.describe();
  if (g.first == nullptr) g.first = p;
  g.members.push_back(std::move(description));
}

enum class Truth { kTrue, kFalse, kUnknown };

// Whether a fact's value meets the spec: equals, in, matches, and the range (numbers and
// versions compare alike).
bool value_holds(const FactSpec& fact, const std::string& value) {
  if (fact.equals && value != *fact.equals) return false;
  if (!fact.in.empty() && std::find(fact.in.begin(), fact.in.end(), value) == fact.in.end()) {
    return false;
  }
  if (!fact.matches.empty() && (!fact.matches_re || !RE2::PartialMatch(value, *fact.matches_re))) {
    return false;
  }
  if (!fact.at_least.empty() && model::compare_versions(value, fact.at_least) < 0) return false;
  if (!fact.below.empty() && model::compare_versions(value, fact.below) >= 0) return false;
  return true;
}

Truth evaluate_fact(const FactSpec& fact, const Job& job, const GroupMatch& diverged) {
  if (fact.nodes_at_least) {
    // Post-mortem a rank's "node" is its dump file: the nodes are not known.
    if (std::any_of(job.ranks.begin(), job.ranks.end(),
                    [](const auto& r) { return post_mortem_only(r.latest()); })) {
      return Truth::kUnknown;
    }
    std::set<std::string> nodes;
    for (const auto& r : job.ranks) {
      if (!r.history.empty()) nodes.insert(r.node);
    }
    const bool some_unknown =
        (!job.missing.empty() && job.missing_state == analysis::RankState::kUnknown) ||
        std::any_of(job.ranks.begin(), job.ranks.end(),
                    [](const auto& r) { return r.state == analysis::RankState::kUnknown; });
    if (static_cast<int>(nodes.size()) >= *fact.nodes_at_least) return Truth::kTrue;
    return some_unknown ? Truth::kUnknown : Truth::kFalse;
  }
  if (!fact.package.empty()) {
    // Known only where the version was found; a package without metadata stays unknown.
    for (int rank : diverged.ranks) {
      const auto* r = job.find(rank);
      const auto* p = r ? r->latest() : nullptr;
      if (p == nullptr) continue;
      const auto it =
          p->facts.find(model::fact_keys::version(model::normalize_package_name(fact.package)));
      if (it == p->facts.end()) continue;
      const bool in_range =
          (fact.at_least.empty() || model::compare_versions(it->second, fact.at_least) >= 0) &&
          (fact.below.empty() || model::compare_versions(it->second, fact.below) < 0);
      return in_range ? Truth::kTrue : Truth::kFalse;
    }
    return Truth::kUnknown;
  }
  if (!fact.fact.empty()) {
    for (int rank : diverged.ranks) {
      const auto* r = job.find(rank);
      const auto* p = r ? r->latest() : nullptr;
      if (p == nullptr) continue;
      const auto it = p->facts.find(fact.fact);
      if (it == p->facts.end()) continue;  // not captured for this rank: unknown, not false
      return value_holds(fact, it->second) ? Truth::kTrue : Truth::kFalse;
    }
    return Truth::kUnknown;
  }
  for (int rank : diverged.ranks) {
    const auto* r = job.find(rank);
    const auto* p = r ? r->latest() : nullptr;
    if (p == nullptr || p->environment_source.empty()) continue;  // environment not read
    const auto it = p->environment.find(fact.env);
    if (it == p->environment.end()) return Truth::kFalse;
    if (fact.equals) return it->second == *fact.equals ? Truth::kTrue : Truth::kFalse;
    if (!fact.in.empty()) {
      return std::find(fact.in.begin(), fact.in.end(), it->second) != fact.in.end() ? Truth::kTrue
                                                                                    : Truth::kFalse;
    }
    return Truth::kTrue;  // present
  }
  return Truth::kUnknown;
}

std::string join_members(const std::vector<std::string>& members) {
  constexpr std::size_t kShown = 8;
  std::string out;
  for (std::size_t i = 0; i < members.size() && i < kShown; ++i) {
    out += (i ? ", " : "") + members[i];
  }
  if (members.size() > kShown) out += " and " + std::to_string(members.size() - kShown) + " more";
  return out;
}

std::string fill(std::string text, const std::map<std::string, GroupMatch>& groups) {
  for (const auto& [name, g] : groups) {
    const std::string set = analysis::compress_ranks(g.ranks);
    std::string nodes;
    for (const auto& n : g.nodes) nodes += (nodes.empty() ? "" : ", ") + n;
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"{" + name + "}", set},
             {"{" + name + ".count}", std::to_string(g.ranks.size())},
             {"{" + name + ".where}", g.where},
             {"{" + name + ".nodes}", nodes},
             {"{" + name + ".members}", join_members(g.members)}}) {
      for (auto at = text.find(key); at != std::string::npos;
           at = text.find(key, at + value.size())) {
        text.replace(at, key.size(), value);
      }
    }
  }
  return text;
}

}  // namespace

std::optional<analysis::Verdict> evaluate(const Rule& rule, const Job& job,
                                          const std::vector<analysis::OtherProcess>& others) {
  std::map<std::string, GroupMatch> groups;
  std::size_t captured = 0;
  for (const auto& r : job.ranks) captured += r.history.empty() ? 0 : 1;
  for (const auto& spec : rule.groups) {
    GroupMatch& g = groups[spec.name];
    std::size_t candidates = captured;
    if (spec.processes == "others") {
      candidates = 0;
      for (const auto& o : others) {
        if (o.process == nullptr ||
            (!o.process->identity.job.empty() && o.process->identity.job != job.key)) {
          continue;
        }
        ++candidates;
        if (in_group(spec, {o.process, state_of(o.process->state), &o.wait})) {
          add_member(g, o.node, o.wait, o.process, describe_other(o));
        }
      }
    } else {
      for (const auto& r : job.ranks) {
        if (!in_group(spec, member_of(r))) continue;
        g.ranks.insert(*r.rank);
        if (g.where.empty() && spec.post_mortem && post_mortem_only(r.latest())) {
          g.where = post_mortem_where(spec, r.latest());
        }
        add_member(g, r.node, r.wait, r.latest(), describe_rank(r));
      }
    }
    const bool ok = spec.require == "none"  ? g.empty()
                    : spec.require == "all" ? candidates > 0 && g.members.size() == candidates
                    : spec.require == "any" ? true
                                            : !g.empty();
    if (!ok) return std::nullopt;
  }
  const auto& diverged = groups[rule.diverged];
  if (diverged.ranks.empty()) return std::nullopt;
  analysis::Verdict v;
  v.id = rule.id;
  v.kind = analysis::VerdictKind::kSignature;
  v.title = rule.title;
  v.job = job.key;
  v.confidence = rule.confidence;
  v.diverged_ranks = analysis::RankSet(diverged.ranks);
  if (!rule.waiting.empty()) {
    v.waiting_ranks = analysis::RankSet(groups[rule.waiting].ranks) - v.diverged_ranks;
  }
  for (const auto& fact : rule.facts) {
    const Truth t = evaluate_fact(fact, job, diverged);
    if (t == Truth::kUnknown) {
      v.confidence = std::max(0.1, v.confidence - 0.1);
      v.evidence.push_back("fact unknown (not read as false): " + fact.name);
      continue;
    }
    if ((t == Truth::kTrue) != fact.expect) return std::nullopt;
    v.evidence.push_back("fact: " + fact.name + (fact.expect ? "" : " (false, as the bug needs)"));
  }
  v.summary = fill(rule.summary, groups);
  std::vector<std::string> written;  // the rule's own evidence first, in its order
  for (const auto& e : rule.evidence) {
    // A line about a group that holds nobody ("require": "any") is left out.
    const bool about_nobody = std::any_of(groups.begin(), groups.end(), [&](const auto& g) {
      return g.second.empty() && (e.find("{" + g.first + "}") != std::string::npos ||
                                  e.find("{" + g.first + ".") != std::string::npos);
    });
    if (!about_nobody) written.push_back(fill(e, groups));
  }
  v.evidence.insert(v.evidence.begin(), written.begin(), written.end());
  for (const auto& spec : rule.groups) {
    const auto& g = groups[spec.name];
    if (g.empty()) continue;
    const std::string who = spec.processes == "others" ? join_members(g.members)
                            : g.ranks.size() == 1      ? "rank " + analysis::compress_ranks(g.ranks)
                                                  : "ranks " + analysis::compress_ranks(g.ranks);
    v.evidence.push_back(spec.name + ": " + who + " in " + g.where);
    auto needles = spec.log;
    if (spec.post_mortem && post_mortem_only(g.first)) needles = spec.post_mortem->log;
    for (const auto& needle : needles) {
      const auto lines = matching_log_lines(g.first, needle);
      if (!lines.empty())
        v.evidence.push_back("log of " + g.members.front() + ": " + lines.front());
    }
  }
  // The facts the rule asks to show, per rank of the verdict (caches, versions, …).
  // (The groups' ranks: captured ones, as many as the job has.)
  const auto shown = (v.diverged_ranks | v.waiting_ranks).list();
  for (const auto& prefix : rule.show_facts) {
    for (int rank : shown) {
      const auto* r = job.find(rank);
      const auto* p = r ? r->latest() : nullptr;
      if (p == nullptr) continue;
      bool any = false;
      for (const auto& [key, value] : p->facts) {
        if (key.rfind(prefix, 0) != 0) continue;
        any = true;
        v.evidence.push_back("rank " + std::to_string(rank) + " (" + r->node + ") " + key + ": " +
                             value);
      }
      if (!any)
        v.evidence.push_back("rank " + std::to_string(rank) + " (" + r->node + "): no " + prefix);
    }
  }
  v.remedies = rule.remedies;
  v.references = rule.references;
  v.evidence.push_back("rule " + rule.id + " (" + rule.source + ")");
  return v;
}

std::vector<analysis::Verdict> signature_verdicts(const std::vector<Rule>& rules,
                                                  const std::vector<analysis::Job>& jobs,
                                                  const std::vector<analysis::OtherProcess>& others,
                                                  std::vector<analysis::Verdict>& generic) {
  std::vector<analysis::Verdict> signatures;
  for (const auto& job : jobs) {
    for (const auto& rule : rules) {
      auto v = evaluate(rule, job, others);
      if (!v) continue;
      for (auto& g : generic) {
        if (g.job == job.key && g.explained_by.empty() &&
            std::find(rule.explains.begin(), rule.explains.end(), g.id) != rule.explains.end()) {
          g.explained_by = rule.id;
        }
      }
      signatures.push_back(std::move(*v));
    }
  }
  return signatures;
}

}  // namespace hangscope::rules
