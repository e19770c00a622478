#include "hangscope/report/report.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace hangscope::report {
namespace {

std::string rank_state(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
    case 'I':
      return "waiting";
    case 'T':
    case 't':
      return "stopped";
    case 'D':
      return "uninterruptible";
    case 'Z':
    case 'X':
      return "dead";
    default:
      return "unknown";
  }
}

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// The innermost Python frame of the thread that runs Python code (the main thread first).
nlohmann::json python_call_site(const capture::ProcessRecord& process) {
  if (!process.dump) return nullptr;
  std::vector<const capture::ThreadDump*> threads;
  for (const auto& t : process.dump->threads) threads.push_back(&t);
  std::stable_sort(threads.begin(), threads.end(), [&](auto* a, auto* b) {
    return (a->tid == process.pid) > (b->tid == process.pid);
  });
  for (const auto* t : threads) {
    for (const auto& f : t->python_frames) {
      return {{"function", f.function}, {"qualname", f.qualname}, {"file", f.file},
              {"line", f.line},         {"kind", "other"},        {"thread", t->tid}};
    }
  }
  return nullptr;
}

nlohmann::json log_lines(const capture::ProcessRecord& process) {
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& log : process.logs) {
    for (const auto& line : log.lines) lines.push_back(line);
  }
  return lines;
}

// The latest sample of each node.
std::vector<const capture::NodeSnapshot*> latest_samples(const Bundle& bundle) {
  std::map<std::string, const capture::NodeSnapshot*> latest;
  for (const auto& s : bundle.snapshots) {
    auto& slot = latest[s.node_name];
    if (slot == nullptr || s.sample_index >= slot->sample_index) slot = &s;
  }
  std::vector<const capture::NodeSnapshot*> out;
  for (const auto& [name, s] : latest) out.push_back(s);
  return out;
}

}  // namespace

nlohmann::json report_json(const Bundle& bundle) {
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json processes = nlohmann::json::array();
  for (const auto* node : latest_samples(bundle)) {
    for (const auto& p : node->processes) {
      const auto& id = p.identity;
      if (id.role == "rank") {
        ranks.push_back(
            {{"rank", optional_json(id.rank)},
             {"local_rank", optional_json(id.local_rank)},
             {"world_size", optional_json(id.world_size)},
             {"node", node->node_name},
             {"pid", p.pid},
             {"job", id.job},
             {"tp", optional_json(id.tp)},
             {"pp", optional_json(id.pp)},
             {"dp", optional_json(id.dp)},
             {"identity_source", id.source},
             {"identity_sources", id.sources},
             {"title", id.title},
             {"state", p.error.empty() ? rank_state(p.state) : "unknown"},
             {"progressing", nullptr},
             {"stuck_since", nullptr},
             {"wait_point", python_call_site(p)},
             {"class", nullptr},
             {"log_lines", log_lines(p)},
             {"error", p.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.error)}});
      } else {
        processes.push_back(
            {{"role", id.role},
             {"node", node->node_name},
             {"pid", p.pid},
             {"comm", p.comm},
             {"job", id.job},
             {"helper_of", p.helper_of ? nlohmann::json(p.helper_of) : nlohmann::json(nullptr)},
             {"wait_point", python_call_site(p)}});
      }
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) {
                     const auto key = [](const nlohmann::json& r) {
                       return std::make_tuple(r["job"].get<std::string>(),
                                              r["rank"].is_null() ? 1 << 30 : r["rank"].get<int>(),
                                              r["node"].get<std::string>(), r["pid"].get<int>());
                     };
                     return key(a) < key(b);
                   });
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : bundle.nodes) {
    nodes.push_back(
        {{"name", n.name},
         {"address", n.address ? nlohmann::json(*n.address) : nlohmann::json(nullptr)},
         {"status", n.status},
         {"reachable", n.status == "ok" || n.status == "refused" || n.status == "error"},
         {"error", n.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(n.error)}});
  }
  return {{"schema", "hangscope.report/v1"},    {"verdicts", nlohmann::json::array()},
          {"ranks", std::move(ranks)},          {"processes", std::move(processes)},
          {"classes", nlohmann::json::array()}, {"nodes", std::move(nodes)},
          {"samples", bundle.snapshots.size()}};
}

std::string report_markdown(const nlohmann::json& report) {
  std::ostringstream md;
  md << "# hangscope report\n\n";
  md << "## Nodes\n\n| node | address | status | error |\n|---|---|---|---|\n";
  for (const auto& n : report["nodes"]) {
    md << "| " << n["name"].get<std::string>() << " | "
       << (n["address"].is_null() ? "-" : n["address"].get<std::string>()) << " | "
       << n["status"].get<std::string>() << " | "
       << (n["error"].is_null() ? "" : n["error"].get<std::string>()) << " |\n";
  }
  md << "\n## Ranks\n\n| job | rank | node | pid | tp/pp/dp | identity | state | Python call site "
        "|\n"
        "|---|---|---|---|---|---|---|---|\n";
  const auto num = [](const nlohmann::json& v) {
    return v.is_null() ? std::string("?") : std::to_string(v.get<int>());
  };
  for (const auto& r : report["ranks"]) {
    std::string site = "-";
    if (!r["wait_point"].is_null()) {
      const auto& w = r["wait_point"];
      site = w["qualname"].get<std::string>() + " (" + w["file"].get<std::string>() + ":" +
             std::to_string(w["line"].get<int>()) + ")";
    }
    md << "| " << r["job"].get<std::string>() << " | " << num(r["rank"]) << " | "
       << r["node"].get<std::string>() << " | " << r["pid"] << " | " << num(r["tp"]) << "/"
       << num(r["pp"]) << "/" << num(r["dp"]) << " | " << r["identity_source"].get<std::string>()
       << " | " << r["state"].get<std::string>() << " | " << site << " |\n";
  }
  if (!report["processes"].empty()) {
    md << "\n## Other processes\n\n| role | node | pid | command | job |\n|---|---|---|---|---|\n";
    for (const auto& p : report["processes"]) {
      md << "| " << p["role"].get<std::string>() << " | " << p["node"].get<std::string>() << " | "
         << p["pid"] << " | " << p["comm"].get<std::string>() << " | "
         << p["job"].get<std::string>() << " |\n";
    }
  }
  md << "\n"
     << (report["verdicts"].empty() ? "No verdict: the correlation of ranks is not built yet; "
                                      "the rank table above is what was found.\n"
                                    : "");
  return md.str();
}

}  // namespace hangscope::report
