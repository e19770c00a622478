#include <ctime>

#include "hangscope/analysis/rank_set.h"
#include "hangscope/report/dump_format.h"
#include "hangscope/report/report.h"
#include "hangscope/version.h"
#include "json_values.h"

namespace hangscope::report {
namespace {

using analysis::RankEntry;
using analysis::RankSet;
using nlohmann::json;

// A rank set with more ranks than this that its job has no entry for (missing, unknown, outside
// the job) is given as ranges only: its list is null (docs/report.md). The ranks with an entry
// are bounded by the input; the others by nothing but a claimed world size. The missing ranks of
// a job get an entry each in `ranks` up to this many.
constexpr std::uint64_t kListedRanks = 4096;

// [[first, last], …]: every rank set, whatever its size.
json ranges_json(const RankSet& ranks) {
  json out = json::array();
  for (const auto& i : ranks.intervals()) out.push_back(json::array({i.first, i.last}));
  return out;
}

// [ranks] unless more than kListedRanks of them have no entry in the job (`present`), else null
// (the ranges say it).
json list_json(const RankSet& ranks, const RankSet& present) {
  return (ranks - present).size() <= kListedRanks ? json(ranks.list()) : json(nullptr);
}

// Every entry of the job's `ranks` in report.json, in rank order: the ranks present, and the
// missing ones when they are few (`fn` gets a RankEntry made for each of those).
template <typename Fn>
void for_each_listed(const analysis::Job& job, Fn&& fn) {
  const bool listed = job.missing.size() <= kListedRanks;
  const auto missing = listed ? job.missing.list() : std::vector<int>{};
  auto m = missing.begin();
  for (const auto& r : job.ranks) {
    for (; m != missing.end() && (!r.rank || *m < *r.rank); ++m) fn(job.absent_entry(*m));
    fn(r);
  }
  for (; m != missing.end(); ++m) fn(job.absent_entry(*m));
}

json call_site_json(const std::optional<waits::CallSite>& site) {
  if (!site) return nullptr;
  return {{"function", site->function},
          {"qualname", site->qualname},
          {"file", site->file},
          {"line", site->line}};
}

json wait_point_json(const waits::WaitPoint& w, bool captured) {
  if (!captured) return nullptr;
  json out = call_site_json(w.python);
  if (out.is_null()) out = {{"function", w.primitive}, {"qualname", ""}, {"file", ""}, {"line", 0}};
  out["kind"] = std::string(to_string(w.kind));
  out["operation"] = w.operation;
  out["primitive"] = w.primitive;
  out["thread"] = w.tid;
  out["caller"] = call_site_json(w.caller);
  json arguments = json::object();
  if (!w.frame_locals.empty()) {
    for (const auto& [name, value] : w.frame_locals.front()) arguments[name] = value;
  }
  out["arguments"] = std::move(arguments);
  out["call"] = w.arguments();
  out["text"] = w.describe();
  return out;
}

json log_lines(const model::ProcessRecord* process) {
  json lines = json::array();
  if (process == nullptr) return lines;
  for (const auto& log : process->logs) {
    for (const auto& line : log.lines) lines.push_back(line);
  }
  return lines;
}

// What decided a rank's progress (docs/analysis.md, "Progress evidence").
json progress_evidence_json(const analysis::Progress& p) {
  const bool numbers = p.sequence_last.has_value();
  return {
      {"probes", p.probes},
      {"probes_outside", p.probes_outside},
      {"sequence_group", numbers && !p.sequence_group.empty() ? json(p.sequence_group) : json()},
      {"sequence_first", numbers && !p.sequence_group.empty() ? json(*p.sequence_first) : json()},
      {"sequence_last", numbers && !p.sequence_group.empty() ? json(*p.sequence_last) : json()},
      {"undecided", p.undecided.empty() ? json() : json(p.undecided)},
  };
}

// `present`: the ranks of its job's entries.
json rank_json(const RankEntry& r, const RankSet& present) {
  const auto* p = r.latest();
  const bool captured = p != nullptr;
  json out = {
      {"rank", json_or_null(r.rank)},
      {"node", captured ? json(r.node) : json(nullptr)},
      {"pid", captured && r.pid != 0 ? json(r.pid) : json(nullptr)},  // 0: known from a dump
      {"job", r.job},
      {"state", std::string(to_string(r.state))},
      {"state_source", r.state_from_stack ? "stack" : "process"},
      {"progressing", json_or_null(r.progress.progressing)},
      {"progress", r.progress.detail},
      {"evidence", progress_evidence_json(r.progress)},
      {"stuck_since", r.stuck_since_ns ? json(utc_time(*r.stuck_since_ns)) : json(nullptr)},
      {"stuck_since_source", r.stuck_since_ns ? json(r.stuck_since_source) : json(nullptr)},
      {"wait_point",
       wait_point_json(r.wait, captured && p->dump.has_value() && !p->dump->threads.empty())},
      {"waits_for", list_json(r.waits_for, present)},
      {"waits_for_ranges", ranges_json(r.waits_for)},
      {"waits_for_reason", r.waits_for_reason},
      {"membership", r.membership.empty() ? json(nullptr) : json(r.membership)},
      {"group", r.group.empty() ? json(nullptr) : json(r.group)},
      {"class", r.class_id ? json(r.class_id) : json(nullptr)},
      {"tcp_peers", r.tcp_known ? json(r.tcp_peers) : json(nullptr)},
      {"missing_tcp_peers", r.tcp_known ? json(r.missing_tcp_peers) : json(nullptr)},
  };
  if (captured) {
    const auto& id = p->identity;
    out["local_rank"] = json_or_null(id.local_rank);
    out["world_size"] = json_or_null(id.world_size);
    out["tp"] = json_or_null(id.tp);
    out["pp"] = json_or_null(id.pp);
    out["dp"] = json_or_null(id.dp);
    out["identity_source"] = std::string(model::to_string(id.source));
    out["identity_sources"] = id.sources;
    out["title"] = id.title;
    out["log_lines"] = log_lines(p);
    out["facts"] = p->facts.get();
    out["collectives"] = r.collectives;
    if (p->flight_record) {
      const auto& fr = *p->flight_record;
      out["flight_recorder"] = {{"path", fr.path},       {"format", fr.format},
                                {"version", fr.version}, {"fresh", fr.fresh},
                                {"error", fr.error},     {"written_unix_ns", fr.written_unix_ns}};
    } else {
      out["flight_recorder"] = nullptr;
    }
    out["error"] = p->error.empty() ? json(nullptr) : json(p->error);
    out["distributed"] = p->dump && p->dump->distributed
                             ? distributed_to_json(*p->dump->distributed)
                             : json(nullptr);
  } else {
    out["distributed"] = nullptr;
    for (const char* key : {"local_rank", "world_size", "tp", "pp", "dp"}) out[key] = nullptr;
    out["identity_source"] = "inferred";
    out["identity_sources"] = json::object();
    out["title"] = "";
    out["log_lines"] = json::array();
    out["facts"] = json::object();
    out["collectives"] = json::array();
    out["flight_recorder"] = nullptr;
    out["error"] = nullptr;
  }
  return out;
}

json verdict_json(const analysis::Verdict& v, const analysis::Analysis& analysis) {
  static const RankSet kNone;
  const RankSet* entries = &kNone;  // the ranks of its job's entries
  for (const auto& job : analysis.jobs) {
    if (job.key == v.job) entries = &job.present;
  }
  const RankSet& present = *entries;
  json processes = json::array();
  for (const auto& p : v.processes) {
    processes.push_back({{"node", p.node},
                         {"pid", p.pid},
                         {"role", p.role},
                         {"job", p.job.empty() ? json(nullptr) : json(p.job)},
                         {"rank", json_or_null(p.rank)},
                         {"group", p.group.empty() ? json(nullptr) : json(p.group)},
                         {"group_rank", json_or_null(p.group_rank)},
                         {"side", p.side}});
  }
  json out = {{"id", v.id},
              {"kind", std::string(to_string(v.kind))},
              {"title", v.title},
              {"confidence", v.confidence},
              {"job", v.job},
              {"diverged_ranks", list_json(v.diverged_ranks, present)},
              {"diverged_ranges", ranges_json(v.diverged_ranks)},
              {"waiting_ranks", list_json(v.waiting_ranks, present)},
              {"waiting_ranges", ranges_json(v.waiting_ranks)},
              {"summary", v.summary},
              {"evidence", v.evidence},
              {"remedies", v.remedies},
              {"references", v.references},
              {"explained_by", v.explained_by.empty() ? json(nullptr) : json(v.explained_by)},
              {"membership", v.membership.empty() ? json(nullptr) : json(v.membership)},
              {"processes", std::move(processes)}};
  if (!v.jobs.empty()) out["jobs"] = v.jobs;
  return out;
}

}  // namespace

std::string utc_time(std::int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1000000000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

namespace {

// One process at the front of a serving chain (docs/report.md, "serving").
json serving_process_json(const analysis::ServingProcess& s) {
  json out = {{"role", model::to_string(s.role)},
              {"node", s.node},
              {"pid", s.process->pid},
              {"title", s.title.empty() ? json(nullptr) : json(s.title)},
              {"progressing", json_or_null(s.progressing)},
              {"progress", s.progress.empty() ? json(nullptr) : json(s.progress)}};
  if (s.role == model::ProcessRole::kEngine) {
    out["activity"] = s.activity;
    out["waits_in"] = s.waits_in;
  } else if (s.role == model::ProcessRole::kApi) {
    const bool read = s.tasks > 0;
    out["tasks"] = s.tasks;
    out["pending_requests"] = read ? json(s.pending_requests) : json(nullptr);
    out["stuck_requests"] = read ? json(s.stuck_requests) : json(nullptr);
    out["output_handlers"] = read ? json(s.output_handlers) : json(nullptr);
    out["requests_wait_in"] = s.requests_wait_in.empty() ? json(nullptr) : json(s.requests_wait_in);
    out["link"] = s.link.empty() ? json(nullptr) : json(s.link);
  } else {
    out["waits_in"] = s.wait.describe();
  }
  return out;
}

json serving_json(const analysis::ServingChain& chain) {
  json apis = json::array(), engines = json::array(), coordinators = json::array();
  for (const auto& s : chain.api_servers) apis.push_back(serving_process_json(s));
  for (const auto& s : chain.engines) engines.push_back(serving_process_json(s));
  for (const auto& s : chain.coordinators) coordinators.push_back(serving_process_json(s));
  return {
      {"framework", chain.framework},
      {"job", chain.job.empty() ? json(nullptr) : json(chain.job)},
      {"job_link", chain.job_link.empty() ? json(nullptr) : json(chain.job_link)},
      {"api_servers", std::move(apis)},
      {"engines", std::move(engines)},
      {"coordinators", std::move(coordinators)},
      {"awaited_workers", chain.awaited.list()},
      {"awaited_reason", chain.awaited_reason.empty() ? json(nullptr) : json(chain.awaited_reason)},
      {"roots", chain.roots.list()},
      {"chain", chain.links}};
}

json report_json(const model::Bundle& bundle, const analysis::Analysis& analysis, bool with_ranks) {
  json verdicts = json::array();
  for (const auto& v : analysis.verdicts) verdicts.push_back(verdict_json(v, analysis));
  json ranks = json::array();
  json classes = json::array();
  json jobs = json::array();
  for (const auto& job : analysis.jobs) {
    std::size_t listed = 0;
    for_each_listed(job, [&](const RankEntry& r) {
      ++listed;
      if (with_ranks) ranks.push_back(rank_json(r, job.present));
    });
    for (const auto& c : job.classes) {
      classes.push_back({{"id", c.id},
                         {"job", job.key},
                         {"ranks", c.ranks},
                         {"rank_set", analysis::compress_ranks(c.ranks)},
                         {"state", c.state},
                         {"signature", c.description},
                         {"key", c.key}});
    }
    jobs.push_back(
        {{"job", job.key},
         {"world_size", json_or_null(job.world_size)},
         {"ranks", listed},
         {"present", job.ranks.size()},
         {"missing_count", job.missing.size()},
         {"missing_ranges", ranges_json(job.missing)},
         {"missing_state",
          job.missing.empty() ? json(nullptr) : json(std::string(to_string(job.missing_state)))},
         {"missing_listed", job.missing.size() <= kListedRanks}});
  }
  json processes = json::array();
  for (const auto& o : analysis.others) {
    const auto& p = *o.process;
    processes.push_back({{"role", model::to_string(p.identity.role)},
                         {"serving_role", json_or_null(analysis::serving_role(analysis, p))},
                         {"node", o.node},
                         {"pid", p.pid},
                         {"comm", p.comm},
                         {"job", p.identity.job},
                         {"helper_of", p.helper_of ? json(p.helper_of) : json(nullptr)},
                         {"state", std::string(1, p.state)},
                         {"wait_point", wait_point_json(o.wait, p.dump.has_value())}});
  }
  json serving = json::array();
  for (const auto& chain : analysis.serving) serving.push_back(serving_json(chain));
  json nodes = json::array();
  for (const auto& n : bundle.nodes) {
    nodes.push_back({{"name", n.name},
                     {"address", n.address ? json(*n.address) : json(nullptr)},
                     {"status", model::to_string(n.status)},
                     {"reachable", n.status != model::NodeState::kUnreachable},
                     {"error", n.error.empty() ? json(nullptr) : json(n.error)},
                     {"clock_offset_ms", static_cast<double>(n.clock_offset_ns) / 1e6}});
  }
  return {{"schema", "hangscope.report/v1"},
          {"conclusion", analysis.conclusion},
          {"verdicts", std::move(verdicts)},
          {"diagnostics", analysis.diagnostics},
          {"ranks", std::move(ranks)},
          {"processes", std::move(processes)},
          {"serving", std::move(serving)},
          {"classes", std::move(classes)},
          {"jobs", std::move(jobs)},
          {"nodes", std::move(nodes)},
          {"samples", bundle.snapshots.size()},
          {"capture",
           {{"hangscope", kVersion},
            {"samples_per_node", analysis.samples},
            {"interval_seconds", analysis.interval_seconds}}}};
}

}  // namespace

json report_json(const model::Bundle& bundle, const analysis::Analysis& analysis) {
  return report_json(bundle, analysis, true);
}

void write_report_json(std::ostream& out, const model::Bundle& bundle,
                       const analysis::Analysis& analysis) {
  // The rank entries (most of the document) are written one by one, never held as one tree:
  // 32,768 ranks would take gigabytes as nlohmann values.
  auto doc = report_json(bundle, analysis, false);
  const std::string placeholder = "hangscope-ranks-placeholder";
  doc["ranks"] = placeholder;
  // Strings from targets, files and peers are valid UTF-8 by then (snapshot codec); any byte
  // that still is not becomes U+FFFD instead of an exception.
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  const std::string text = doc.dump(2, ' ', false, kReplace);
  const auto at = text.find("\"" + placeholder + "\"");
  out << text.substr(0, at) << "[";
  bool first = true;
  for (const auto& job : analysis.jobs) {
    for_each_listed(job, [&](const RankEntry& r) {
      out << (first ? "\n    " : ",\n    ")
          << rank_json(r, job.present).dump(-1, ' ', false, kReplace);
      first = false;
    });
  }
  out << (first ? "]" : "\n  ]") << text.substr(at + placeholder.size() + 2) << "\n";
}

}  // namespace hangscope::report
