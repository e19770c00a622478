#include <sys/stat.h>

#include <atomic>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "hangscope/agent/agent.h"
#include "hangscope/capture/node_capture.h"
#include "hangscope/cli/commands.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/error.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/report/report.h"
#include "hangscope/snapshot/codec.h"

namespace hangscope::cli {
namespace {

struct DiagnoseArguments {
  std::vector<std::string> files;
  std::string agents;
  std::string hostfile;
  std::string token_file;
  std::string tls_ca, tls_cert, tls_key;
  int samples = 3;
  std::string interval = "1s";
  std::string output;
  bool json = false;
  bool quiet = false;
  bool locals = true;
  std::vector<int> pids;
  std::string select;
  std::string rules_dir;
  bool trigger_fr_dump = false;
  bool query_store = false;
  bool ticket = false;
};

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%SZ", &tm);
  return buffer;
}

class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet) {}
  void say(const std::string& line) const {
    if (!quiet_) std::cerr << "hangscope: " << line << "\n";
  }

 private:
  bool quiet_;
};

analysis::Bundle from_files(const DiagnoseArguments& args, const Progress& progress) {
  // Files are parsed in parallel, then taken in the order given.
  struct Read {
    std::vector<capture::NodeSnapshot> nodes;
    std::string error;
  };
  std::vector<Read> reads(args.files.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < args.files.size(); i = next++) {
      try {
        reads[i].nodes = snapshot::read_file(args.files[i]);
      } catch (const Error& e) {
        reads[i].error = e.what();
      }
    }
  };
  std::vector<std::thread> workers;
  const std::size_t parallel =
      std::min<std::size_t>(args.files.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t w = 1; w < parallel; ++w) workers.emplace_back(work);
  work();
  for (auto& w : workers) w.join();
  analysis::Bundle bundle;
  for (std::size_t i = 0; i < args.files.size(); ++i) {
    const auto& file = args.files[i];
    try {
      if (!reads[i].error.empty()) throw Error(reads[i].error);
      auto& nodes = reads[i].nodes;
      if (args.files.size() <= 16) {
        progress.say("read " + std::to_string(nodes.size()) + " snapshot(s) from " + file);
      }
      for (auto& node : nodes) {
        if (std::none_of(bundle.nodes.begin(), bundle.nodes.end(),
                         [&](const auto& n) { return n.name == node.node_name; })) {
          bundle.nodes.push_back({node.node_name, std::nullopt, "ok", "", 0});
        }
        bundle.snapshots.push_back(std::move(node));
      }
    } catch (const Error& e) {
      // A bad file is reported; the other files still make the report.
      bundle.nodes.push_back({file, std::nullopt, "error", e.what(), 0});
      progress.say(std::string("skipped ") + e.what());
    }
  }
  return bundle;
}

analysis::Bundle from_agents(const std::vector<std::string>& addresses,
                             const DiagnoseArguments& args, std::chrono::milliseconds interval,
                             const Progress& progress) {
  agent::CollectRequest request;
  request.token = load_token(args.token_file);
  request.tls_ca = args.tls_ca;
  request.tls_cert = args.tls_cert;
  request.tls_key = args.tls_key;
  request.samples = args.samples;
  request.interval = interval;
  request.locals = args.locals;
  // Every node takes sample 0 at the same moment, a little ahead to absorb the fan-out.
  request.start = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  request.deadline = std::chrono::milliseconds(30000) + interval * args.samples;
  progress.say("asking " + std::to_string(addresses.size()) + " agent(s) for " +
               std::to_string(args.samples) + " sample(s)");
  // A fixed pool of workers takes the agents one by one: at most kWorkers are asked at once,
  // and a slow agent holds up only its own worker.
  constexpr std::size_t kWorkers = 128;
  std::vector<agent::AgentAnswer> answers(addresses.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::mutex say;
  const auto work = [&] {
    for (std::size_t i = next++; i < addresses.size(); i = next++) {
      answers[i] = agent::collect_from(addresses[i], request);
      const auto& answer = answers[i];
      const auto finished = ++done;
      if (answer.status != "ok" || addresses.size() <= 16 || finished % 256 == 0 ||
          finished == addresses.size()) {
        std::lock_guard<std::mutex> lock(say);
        progress.say(answer.address + ": " + answer.status +
                     (answer.error.empty() ? "" : " (" + answer.error + ")") + " [" +
                     std::to_string(finished) + "/" + std::to_string(addresses.size()) + "]");
      }
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < std::min(kWorkers, addresses.size()); ++w) workers.emplace_back(work);
  for (auto& w : workers) w.join();
  analysis::Bundle bundle;
  for (auto& answer : answers) {
    const std::string name = answer.node_name.empty() ? answer.address : answer.node_name;
    bundle.nodes.push_back(
        {name, answer.address, answer.status, answer.error, answer.clock_offset_ns});
    for (auto& s : answer.snapshots) bundle.snapshots.push_back(std::move(s));
  }
  return bundle;
}

analysis::Bundle from_local_node(const DiagnoseArguments& args, std::chrono::milliseconds interval,
                                 const Progress& progress) {
  analysis::Bundle bundle;
  capture::NodeCaptureOptions options;
  options.process.locals = args.locals;
  options.process.modules = std::make_shared<elf::ModuleCache>();  // shared by the samples
  options.pids.assign(args.pids.begin(), args.pids.end());
  options.select = args.select;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < args.samples; ++i) {
    std::this_thread::sleep_until(start + i * interval);
    options.trigger_flight_dumps = args.trigger_fr_dump && i == args.samples - 1;
    options.query_store = args.query_store && i == args.samples - 1;
    bundle.snapshots.push_back(capture::capture_node(options));
    bundle.snapshots.back().sample_index = i;
    progress.say("local sample " + std::to_string(i + 1) + "/" + std::to_string(args.samples));
  }
  bundle.nodes.push_back({bundle.snapshots.front().node_name, std::nullopt, "ok", "", 0});
  return bundle;
}

int run_diagnose(const DiagnoseArguments& args) {
  const Progress progress(args.quiet || args.json || args.ticket);
  try {
    const auto interval = parse_duration(args.interval);
    if (!interval)
      throw Error("--interval " + args.interval + ": expected a duration like 500ms, 2s or 1m");
    const auto addresses = agent_addresses(args.agents, args.hostfile);
    if (!args.files.empty() && !addresses.empty()) {
      throw Error("give snapshot files or agents, not both");
    }
    PhaseTimer timer;
    analysis::Bundle bundle = !args.files.empty() ? from_files(args, progress)
                              : !addresses.empty()
                                  ? from_agents(addresses, args, *interval, progress)
                                  : from_local_node(args, *interval, progress);
    const std::string dir = args.output.empty() ? "hangscope-" + utc_stamp() : args.output;
    timer.lap("gathering");
    // The snapshots are written while the analysis runs (both only read the bundle).
    report::make_bundle_dirs(dir);
    std::string bundle_failure;
    std::thread bundle_writer([&] {
      PhaseTimer writing;
      try {
        report::write_bundle_data(dir, bundle);
      } catch (const Error& e) {
        bundle_failure = e.what();
      }
      writing.lap("bundle snapshots");
    });
    int code = kExitFailed;
    try {
      code = analyse_and_report(dir, bundle, args.rules_dir,
                                args.ticket ? Output::kTicket
                                : args.json ? Output::kJson
                                            : Output::kSummary,
                                [&](const std::string& s) { progress.say(s); });
    } catch (...) {
      bundle_writer.join();
      throw;
    }
    bundle_writer.join();
    if (!bundle_failure.empty()) throw Error(bundle_failure);
    return code;
  } catch (const Error& e) {
    std::cerr << "hangscope: error: " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace

CommandRunner register_diagnose_command(CLI::App& app) {
  auto args = std::make_shared<DiagnoseArguments>();
  app.add_option("snapshots", args->files, "Snapshot files from `hangscope collect --once`");
  app.add_option("--agents", args->agents, "Agents to ask: HOST[:PORT],... (default port 7447)");
  app.add_option("--hostfile", args->hostfile, "File with one agent HOST[:PORT] per line");
  app.add_option("--token-file", args->token_file, "Token for the agents (or HANGSCOPE_TOKEN)");
  app.add_option("--tls-ca", args->tls_ca, "CA that signed the agents' certificates (PEM)");
  app.add_option("--tls-cert", args->tls_cert, "Client certificate (PEM)");
  app.add_option("--tls-key", args->tls_key, "Client key (PEM)");
  app.add_option("--samples", args->samples, "Samples per node")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--interval", args->interval, "Time between samples: 500ms, 2s, 1m")
      ->capture_default_str();
  app.add_option("-o,--output", args->output, "Bundle directory (default ./hangscope-<UTC time>)");
  auto* json = app.add_flag("--json", args->json, "Print report.json to stdout");
  app.add_flag("--ticket", args->ticket,
               "Print report.md to stdout: a GitHub issue body, ready to paste")
      ->excludes(json);
  app.add_flag("--quiet", args->quiet, "No progress on stderr");
  app.add_option("--rules", args->rules_dir, "Directory of extra signature rule files (*.json)");
  app.add_flag("--locals,!--no-locals", args->locals,
               "Python locals of the waiting frames (peers, groups, store keys; masked)")
      ->capture_default_str();
  app.add_option("--pid", args->pids,
                 "Local capture: these processes instead of discovering ranks");
  app.add_flag("--trigger-fr-dump", args->trigger_fr_dump,
               "Local capture: ask each rank for a fresh flight-recorder dump through its "
               "TORCH_NCCL_DEBUG_INFO_PIPE_FILE fifo (agents: `collect --trigger-fr-dump`)");
  app.add_flag("--query-store", args->query_store,
               "Local capture: ask each waiting rank's c10d store which of the keys it awaits "
               "exist (read-only; needs --locals; agents: `collect --query-store`)");
  app.add_option("--select", args->select,
                 "Local capture: only processes whose command line matches this regex");
  app.footer(
      "Examples:\n"
      "  hangscope diagnose                                 # this node, no agent needed\n"
      "  hangscope diagnose --agents node0,node1:7447 --token-file token\n"
      "  hangscope diagnose node0.json node1.json --json");
  return [args] { return run_diagnose(*args); };
}

}  // namespace hangscope::cli
