#include "hangscope/watch/findings.h"

#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/watch/incidents.h"

namespace hangscope::watch {
namespace {

// The largest watch.json read back: its history holds at most 200,000 rank readings.
constexpr std::size_t kMaxWatchFileBytes = std::size_t{256} << 20;

std::string readings_text(const std::vector<RankReading>& ranks) {
  std::vector<std::string> parts;
  for (const auto& r : ranks) parts.push_back(rank_reading_text(r));
  return join(parts, ", ", 6);
}

// The verdict watch itself makes when a rank exited while its peers waited.
analysis::Verdict rank_dead_verdict(const Finding& f) {
  analysis::Verdict v;
  v.id = analysis::verdict_ids::kRankDead;
  v.kind = analysis::VerdictKind::kGeneric;
  v.title = "A rank exited while its peers wait";
  v.confidence = 0.9;
  v.job = f.job;
  if (f.dead.rank) v.diverged_ranks.insert(*f.dead.rank);
  for (const auto& w : f.waiting) {
    if (w.rank) v.waiting_ranks.insert(*w.rank);
  }
  const std::string how = f.dead.exit.empty() ? "exited" : "exited (" + f.dead.exit + ")";
  const std::string where = f.where_waiting.empty() ? "" : " in " + f.where_waiting;
  v.summary = "Rank " + (f.dead.rank ? std::to_string(*f.dead.rank) : std::string("?")) + " (" +
              f.dead.node + " pid " + std::to_string(f.dead.pid) + ") " + how + " while " +
              readings_text(f.waiting) + " waited" + where +
              "; they wait for it until their timeout.";
  v.evidence.push_back(
      "watch saw " + rank_reading_text(f.dead) + " in one poll and gone (" +
      (f.dead.exit.empty() ? "its exit status was not seen: it was reaped" : f.dead.exit) +
      ") in the next, while its peers stood in their wait with no collective "
      "completed (watch.json holds every poll)");
  if (!f.dead.where.empty()) v.evidence.push_back("its last stack: " + f.dead.where);
  v.remedies.push_back(
      "find why the process exited: its log's last lines, the kernel log (`dmesg`: OOM killer, "
      "segfault), the launcher's log");
  v.processes.push_back(
      {f.dead.node, f.dead.pid, "rank", f.job, f.dead.rank, "", std::nullopt, "diverged"});
  for (const auto& w : f.waiting) {
    if (v.processes.size() >= 16) break;
    v.processes.push_back({w.node, w.pid, "rank", f.job, w.rank, "", std::nullopt, "waiting"});
  }
  return v;
}

// Where the waiting ranks wait, as the confirming capture (native stacks too) shows it: a store
// wait called from user code has no Python frame of its own for the observations to name.
std::string where_they_wait(const JobEvent& e, const analysis::Analysis& analysis) {
  for (const auto& job : analysis.jobs) {
    if (job.key != e.job) continue;
    for (const auto& w : e.waiting) {
      for (const auto& entry : job.ranks) {
        if (entry.node == w.node && entry.pid == w.pid && !entry.wait.primitive.empty()) {
          return entry.wait.describe();
        }
      }
    }
  }
  for (const auto& w : e.waiting) {
    if (!w.where.empty()) return w.where;
  }
  return "";
}

// A field of watch.json: hangscope::Error naming it when it is missing or of another type.
template <typename T>
T field(const nlohmann::json& j, const char* name, const std::string& in) {
  if (!j.is_object() || !j.contains(name)) throw Error(in + ": no \"" + name + "\"");
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(in + ": \"" + name + "\" is not " + (std::is_integral_v<T> ? "a number" : "text"));
  }
}

template <typename T>
T optional_field(const nlohmann::json& j, const char* name, const std::string& in, T otherwise) {
  if (!j.is_object() || !j.contains(name) || j.at(name).is_null()) return otherwise;
  return field<T>(j, name, in);
}

}  // namespace

std::string rank_reading_text(const RankReading& r) {
  return (r.rank ? "rank " + std::to_string(*r.rank) : std::string("a process")) + " (" + r.node +
         " pid " + std::to_string(r.pid) + ")";
}

std::string_view to_string(Finding::Kind kind) {
  return kind == Finding::Kind::kRankDead ? "rank-dead" : "hang";
}

Finding finding_of(const JobEvent& event, const analysis::Analysis& found) {
  Finding f;
  f.job = event.job;
  if (event.kind == JobEvent::Kind::kRankDead) {
    f.kind = Finding::Kind::kRankDead;
    f.dead = event.dead;
    f.waiting = event.waiting;
    f.where_waiting = where_they_wait(event, found);
  }
  return f;
}

bool about_job(const analysis::Verdict& v, const std::string& job) {
  if (v.job == job || std::find(v.jobs.begin(), v.jobs.end(), job) != v.jobs.end()) return true;
  return std::any_of(v.processes.begin(), v.processes.end(),
                     [&](const auto& p) { return p.job == job || p.group == job; });
}

const analysis::Verdict* verdict_for(const analysis::Analysis& analysis, const std::string& job) {
  for (const auto& v : analysis.verdicts) {
    if (about_job(v, job)) return &v;
  }
  return nullptr;
}

const analysis::Verdict* apply_finding(analysis::Analysis& analysis, const Finding& finding) {
  if (finding.kind == Finding::Kind::kRankDead) {
    analysis.verdicts.insert(analysis.verdicts.begin(), rank_dead_verdict(finding));
  } else {
    std::stable_partition(analysis.verdicts.begin(), analysis.verdicts.end(),
                          [&](const analysis::Verdict& v) { return about_job(v, finding.job); });
  }
  const auto* lead = verdict_for(analysis, finding.job);
  if (lead != nullptr) analysis.conclusion = lead->summary;
  return lead;
}

nlohmann::json rank_reading_json(const RankReading& r) {
  nlohmann::json j = {{"node", valid_utf8(r.node)}, {"pid", r.pid}, {"state", r.state}};
  j["rank"] = r.rank ? nlohmann::json(*r.rank) : nlohmann::json(nullptr);
  if (!r.where.empty()) j["where"] = valid_utf8(r.where);
  if (!r.evidence.empty()) j["evidence"] = valid_utf8(r.evidence);
  if (r.sequence) j["sequence"] = *r.sequence;
  if (!r.exit.empty()) j["exit"] = valid_utf8(r.exit);
  return j;
}

RankReading rank_reading_from_json(const nlohmann::json& j, const std::string& in) {
  RankReading r;
  r.node = field<std::string>(j, "node", in);
  r.pid = field<pid_t>(j, "pid", in);
  r.state = optional_field<std::string>(j, "state", in, "");
  if (j.contains("rank") && !j.at("rank").is_null()) r.rank = field<int>(j, "rank", in);
  r.where = optional_field<std::string>(j, "where", in, "");
  r.evidence = optional_field<std::string>(j, "evidence", in, "");
  if (j.contains("sequence") && !j.at("sequence").is_null()) {
    r.sequence = field<std::uint64_t>(j, "sequence", in);
  }
  r.exit = optional_field<std::string>(j, "exit", in, "");
  return r;
}

nlohmann::json finding_json(const Finding& finding) {
  nlohmann::json j = {{"kind", std::string(to_string(finding.kind))},
                      {"job", valid_utf8(finding.job)}};
  if (finding.kind == Finding::Kind::kRankDead) {
    j["dead"] = rank_reading_json(finding.dead);
    auto& waiting = j["waiting"] = nlohmann::json::array();
    for (const auto& w : finding.waiting) waiting.push_back(rank_reading_json(w));
    j["where_waiting"] = valid_utf8(finding.where_waiting);
  }
  return j;
}

Finding finding_from_json(const nlohmann::json& j) {
  Finding f;
  const std::string in = "\"finding\"";
  const auto kind = field<std::string>(j, "kind", in);
  if (kind == to_string(Finding::Kind::kRankDead)) {
    f.kind = Finding::Kind::kRankDead;
  } else if (kind != to_string(Finding::Kind::kHang)) {
    throw Error(in + ": kind \"" + printable(kind) + "\" is none of hang, rank-dead");
  }
  f.job = field<std::string>(j, "job", in);
  if (f.kind == Finding::Kind::kRankDead) {
    f.dead = rank_reading_from_json(j.at("dead"), in + ".dead");
    if (!j.contains("waiting") || !j.at("waiting").is_array()) {
      throw Error(in + ": no \"waiting\" list");
    }
    for (const auto& w : j.at("waiting")) {
      f.waiting.push_back(rank_reading_from_json(w, in + ".waiting"));
    }
    f.where_waiting = optional_field<std::string>(j, "where_waiting", in, "");
  }
  return f;
}

std::optional<Finding> read_finding(const std::string& dir) {
  const std::string path = dir + "/" + std::string(kWatchFile);
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  const auto text = read_input_file(path, "watch file", kMaxWatchFileBytes);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error("watch file " + printable(path) + ": not JSON (" + e.what() + ")");
  }
  if (!doc.is_object() || !doc.contains("finding")) return std::nullopt;
  try {
    return finding_from_json(doc.at("finding"));
  } catch (const Error& e) {
    throw Error("watch file " + printable(path) + ": " + e.what());
  }
}

}  // namespace hangscope::watch
