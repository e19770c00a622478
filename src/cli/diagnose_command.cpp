#include <glob.h>
#include <sys/stat.h>

#include <atomic>
#include <ctime>
#include <iostream>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include "hangscope/agent/agent.h"
#include "hangscope/analysis/postmortem.h"
#include "hangscope/capture/core_capture.h"
#include "hangscope/capture/node_capture.h"
#include "hangscope/capture/sample_series.h"
#include "hangscope/cli/commands.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/common/text.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/report/report.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/sources/flight_records.h"

namespace hangscope::cli {
namespace {

struct DiagnoseArguments {
  std::vector<std::string> files;
  std::vector<std::string> flight_records;  // --flight-records DIR|GLOB
  std::vector<std::string> log_globs;       // --log GLOB (with --flight-records or --cores)
  std::vector<std::string> cores;           // --cores DIR|GLOB
  std::string core_exe;                     // --exe (with --cores)
  std::string sysroot;                      // --sysroot (with --cores)
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
  bool force = false;
  std::size_t max_input_mib = kDefaultMaxInputBytes >> 20;
  // Which options the command line gave (given_options), for the checks of plan().
  std::vector<std::string> local_only, sampling, credentials;
  bool agents_given = false;
};

// Where the snapshots come from, and what was checked before any sampling.
struct Plan {
  enum class Source { kFiles, kAgents, kLocal, kFlightRecords, kCores } source = Source::kLocal;
  std::vector<std::string> addresses;
  std::chrono::milliseconds interval{1000};
  std::string token;
  std::string dir;
  std::string where;  // for messages: "on this node", "in the snapshot files", …
};

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%SZ", &tm);
  return buffer;
}

// The bundle of `answers`, saying which nodes were named apart from another of the same name.
model::Bundle assemble(std::vector<model::NodeAnswer> answers, const Progress& progress) {
  std::vector<std::string> renamed;
  auto bundle = model::assemble_bundle(std::move(answers), &renamed);
  for (const auto& note : renamed) progress.say(note);
  return bundle;
}

model::Bundle from_files(const DiagnoseArguments& args, const Progress& progress) {
  // Files are parsed in parallel, then taken in the order given.
  struct Read {
    std::vector<model::NodeSnapshot> nodes;
    std::string error;
  };
  std::vector<Read> reads(args.files.size());
  std::atomic<std::size_t> next{0};
  auto all = args.files.size() > 1 ? progress.start("reading snapshot files", "", args.files.size())
                                   : ProgressMeter::Task();
  const auto work = [&] {
    for (std::size_t i = next++; i < args.files.size(); i = next++) {
      try {
        auto task = progress.start("reading", args.files[i]);
        reads[i].nodes =
            snapshot::read_file(args.files[i], args.max_input_mib << 20, Links::kFollow, &task);
      } catch (const std::exception& e) {  // nothing may escape a thread
        reads[i].error = e.what();
      }
      all.add_done(1);
    }
  };
  std::vector<std::thread> workers;
  const std::size_t parallel =
      std::min<std::size_t>(args.files.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t w = 1; w < parallel; ++w) workers.emplace_back(work);
  work();
  for (auto& w : workers) w.join();
  all.end();
  // A node per file and node name in it; the same name in two files is two nodes, named apart.
  std::vector<model::NodeAnswer> answers;
  for (std::size_t i = 0; i < args.files.size(); ++i) {
    const auto& file = args.files[i];
    try {
      if (!reads[i].error.empty()) throw Error(reads[i].error);
      auto& nodes = reads[i].nodes;
      if (args.files.size() <= 16) {
        progress.say("read " + std::to_string(nodes.size()) + " snapshot(s) from " + file);
      }
      const std::size_t first = answers.size();
      for (auto& node : nodes) {
        auto it = std::find_if(answers.begin() + static_cast<std::ptrdiff_t>(first), answers.end(),
                               [&](const auto& a) { return a.status.name == node.node_name; });
        if (it == answers.end()) {
          answers.push_back({{node.node_name, std::nullopt, "ok", "", 0}, file, {}});
          it = answers.end() - 1;
        }
        it->samples.push_back(std::move(node));
      }
    } catch (const Error& e) {
      // A bad file is reported (an error, even with --quiet); the other files still make the
      // report, which names it.
      answers.push_back({{file, std::nullopt, "error", e.what(), 0}, file, {}});
      print_error(e.what());
    }
  }
  return assemble(std::move(answers), progress);
}

model::Bundle from_agents(const Plan& plan, const DiagnoseArguments& args,
                          const Progress& progress) {
  const auto& addresses = plan.addresses;
  const auto interval = plan.interval;
  agent::CollectRequest request;
  request.token = plan.token;
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
  auto waiting = progress.start("waiting for the agents' answers", "", addresses.size());
  std::mutex say;
  const auto work = [&] {
    for (std::size_t i = next++; i < addresses.size(); i = next++) {
      answers[i] = agent::collect_from(addresses[i], request);
      const auto& answer = answers[i];
      const auto finished = ++done;
      waiting.add_done(1);
      if (answer.status != "ok" || addresses.size() <= 16 || finished % 256 == 0 ||
          finished == addresses.size()) {
        std::lock_guard<std::mutex> lock(say);
        progress.say(answer.address + ": " + answer.status +
                     (answer.error.empty() ? "" : " (" + answer.error + ")") + " [" +
                     std::to_string(finished) + "/" + std::to_string(addresses.size()) + "]");
      }
      for (const auto& note : answer.notes) {
        std::lock_guard<std::mutex> lock(say);
        print_warning(answer.address + ": " + note);
      }
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < std::min(kWorkers, addresses.size()); ++w) workers.emplace_back(work);
  for (auto& w : workers) w.join();
  waiting.end();
  // A node is the agent that answered: its snapshots take its name, and two agents giving one
  // name (one --node-name on two nodes) are named apart by their addresses.
  std::vector<model::NodeAnswer> nodes;
  for (auto& answer : answers) {
    const std::string name = answer.node_name.empty() ? answer.address : answer.node_name;
    nodes.push_back({{name, answer.address, answer.status, answer.error, answer.clock_offset_ns},
                     answer.address,
                     std::move(answer.snapshots)});
  }
  return assemble(std::move(nodes), progress);
}

model::Bundle from_local_node(const DiagnoseArguments& args, std::chrono::milliseconds interval,
                              const Progress& progress) {
  model::Bundle bundle;
  capture::NodeCaptureOptions options;
  options.process.locals = args.locals;
  options.process.modules = std::make_shared<elf::ModuleCache>();  // shared by the samples
  options.pids.assign(args.pids.begin(), args.pids.end());
  options.select = args.select;
  capture::SeriesPlan plan;
  plan.samples = args.samples;
  plan.interval = interval;
  plan.trigger_flight_dumps = args.trigger_fr_dump;
  plan.query_store = args.query_store;
  auto sampling = progress.start("capturing samples", "", static_cast<std::uint64_t>(args.samples));
  capture::SeriesHooks hooks;
  hooks.wait_until = capture::sleep_until_unix;
  hooks.taken = [&](const model::NodeSnapshot& sample) {
    sampling.set_done(static_cast<std::uint64_t>(sample.sample_index + 1));
    progress.say("local sample " + std::to_string(sample.sample_index + 1) + "/" +
                 std::to_string(args.samples));
  };
  // As an agent's answer would be: every string from the targets valid UTF-8.
  const auto samples = capture::capture_series(options, plan, hooks);  // never cancelled
  for (const auto& sample : *samples) {
    bundle.snapshots.push_back(snapshot::as_transmitted(sample));
  }
  bundle.nodes.push_back({bundle.snapshots.front().node_name, std::nullopt, "ok", "", 0});
  return bundle;
}

// The files one --flight-records argument names: every regular file of a directory, else the
// matches of a glob (a plain path matches itself); a pattern that matches nothing is an input
// that failed.
std::vector<sources::DumpFile> dump_files_of(const std::string& pattern) {
  std::vector<std::string> paths;
  struct stat st {};
  if (::stat(pattern.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    for (const auto& name : list_directory(pattern).value_or(std::vector<std::string>{})) {
      const std::string path = pattern + (pattern.back() == '/' ? "" : "/") + name;
      if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) paths.push_back(path);
    }
  } else {
    glob_t found{};
    if (::glob(pattern.c_str(), 0, nullptr, &found) == 0) {
      for (std::size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
    }
    ::globfree(&found);
  }
  if (paths.empty())
    return {{pattern, "", 0, "no file matches (neither a directory nor a glob with matches)"}};
  std::vector<sources::DumpFile> out;
  for (const auto& path : paths) out.push_back({path, "", 0, ""});
  return out;
}

// The last `max_bytes` of a log file, or why not (a FIFO or device is refused, never opened).
sources::DumpFile read_log_tail(const std::string& path, std::size_t max_bytes) {
  sources::DumpFile out{path, "", 0, ""};
  auto read = read_file_tail(path, "log", max_bytes);
  if (!read.text) {
    out.error = read.reason;
    return out;
  }
  out.bytes = std::move(*read.text);
  return out;
}

// The dead job's logs (--log GLOB), matched to the dumps' ranks for the signature rules. One log
// at a time (the last 4 MiB of it, which reading costs up to ~20 times until its lines are
// picked), so a glob of thousands of files never holds more than one; the lines kept across
// logs are bounded too: past 256 MiB, further logs are refused by name. A log that cannot be
// held is refused alone.
void attach_job_logs(const DiagnoseArguments& args, model::Bundle& bundle,
                     const Progress& progress) {
  constexpr std::size_t kLogTail = std::size_t{4} << 20;
  constexpr std::size_t kLogsKept = std::size_t{256} << 20;
  std::size_t kept = 0;
  for (const auto& pattern : args.log_globs) {
    for (const auto& found : dump_files_of(pattern)) {
      if (kept >= kLogsKept) {
        print_error("log " + printable(found.path) +
                    ": refused: the logs read before it keep 256 MiB of lines already");
        continue;
      }
      try {
        auto task = progress.start("reading log", found.path);
        const auto log = found.error.empty() ? read_log_tail(found.path, kLogTail) : found;
        for (const auto& note : sources::attach_logs(bundle, {log}, &kept)) {
          progress.say("log " + note);
        }
      } catch (const std::bad_alloc&) {
        print_error("log " + printable(found.path) + ": refused: out of memory while reading it");
      }
    }
  }
}

// Reads a dump file (its bytes and write time), or names why not.
void read_dump(sources::DumpFile& file, std::size_t max_bytes) {
  try {
    file.bytes = read_input_file(file.path, "flight-recorder dump", max_bytes);
    struct stat st {};
    if (::stat(file.path.c_str(), &st) == 0) {
      file.written_unix_ns =
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    }
  } catch (const Error& e) {
    file.error = e.what();
  }
}

// The post-mortem source: the ranks' flight-recorder dumps, every entry kept.
model::Bundle from_flight_records(const DiagnoseArguments& args, const Progress& progress) {
  std::vector<sources::DumpFile> files;
  for (const auto& pattern : args.flight_records) {
    for (auto& f : dump_files_of(pattern)) files.push_back(std::move(f));
  }
  const std::size_t found = files.size();
  // Each dump is read by the worker that parses it, and freed once parsed (not all at once).
  const std::size_t max_bytes = args.max_input_mib << 20;
  auto reading = progress.start("reading flight-recorder dumps", "", found);
  auto bundle = sources::postmortem_bundle(std::move(files), [&](sources::DumpFile& f) {
    read_dump(f, max_bytes);
    reading.add_done(1);  // thread-safe: the meter's lock
  });
  reading.end();
  attach_job_logs(args, bundle, progress);
  std::size_t read = 0;
  for (const auto& node : bundle.nodes) {
    if (node.status == "ok") {
      ++read;
    } else {  // an error even with --quiet; the other dumps still make the report
      // read_input_file's reasons name the file already.
      const bool named = node.error.find(node.name) != std::string::npos;
      print_error(named ? node.error : node.name + ": " + node.error);
    }
  }
  progress.say("read " + std::to_string(read) + " flight-recorder dump(s) of " +
               std::to_string(found) + " file(s)");
  return bundle;
}

// The post-mortem source from core files: each core a node of one process (named by its path),
// read like a live rank; a file that is no readable core is a node in error, named.
model::Bundle from_cores(const DiagnoseArguments& args, const Progress& progress) {
  model::Bundle bundle;
  capture::CoreOptions options;
  options.executable = args.core_exe;
  options.sysroot = args.sysroot;
  options.locals = args.locals;
  options.tasks = true;                                    // as agents capture them
  options.modules = std::make_shared<elf::ModuleCache>();  // one libpython parse for all cores
  std::size_t read = 0;
  for (const auto& pattern : args.cores) {
    for (const auto& file : dump_files_of(pattern)) {
      if (!file.error.empty()) {
        print_error(file.path + ": " + file.error);
        bundle.nodes.push_back({file.path, std::nullopt, "error", file.error, 0});
        continue;
      }
      model::NodeSnapshot node;
      node.node_name = file.path;
      struct stat st {};
      if (::stat(file.path.c_str(), &st) == 0) {
        node.capture_unix_ns =
            static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
      }
      auto task = progress.start("reading core file", file.path);
      model::ProcessRecord record = capture::core_record(file.path, options);
      task.end();
      if (!record.error.empty()) {
        print_error(record.error);
        bundle.nodes.push_back({file.path, std::nullopt, "error", record.error, 0});
        continue;
      }
      node.hostname = record.environment.count("HOSTNAME") ? record.environment["HOSTNAME"] : "";
      node.processes.push_back(std::move(record));
      bundle.snapshots.push_back(snapshot::as_transmitted(std::move(node)));
      bundle.nodes.push_back({file.path, std::nullopt, "ok", "", 0});
      ++read;
    }
  }
  attach_job_logs(args, bundle, progress);
  progress.say("read " + std::to_string(read) + " core file(s)");
  return bundle;
}

// The usage errors of the core-file source: nothing that captures or samples applies.
void check_cores_plan(const DiagnoseArguments& args, bool agents) {
  if (!args.files.empty() || agents || !args.flight_records.empty()) {
    throw UsageError(
        "--cores diagnoses core files alone: give no snapshot files, agents or --flight-records "
        "with it");
  }
  for (const auto* given : {&args.local_only, &args.credentials}) {
    if (!given->empty()) {
      throw UsageError(given->front() + " does not apply to --cores (the cores are all there is)");
    }
  }
  for (const auto& option : args.sampling) {
    if (option != "--locals" && option != "--no-locals") {
      throw UsageError(option + " does not apply to --cores (a core is one instant)");
    }
  }
}

// The usage errors of the post-mortem source: nothing that captures or samples applies.
void check_flight_records_plan(const DiagnoseArguments& args, bool agents) {
  if (!args.files.empty() || agents) {
    throw UsageError(
        "--flight-records diagnoses dumps alone: give no snapshot files or agents with it");
  }
  for (const auto* given : {&args.local_only, &args.sampling, &args.credentials}) {
    if (!given->empty()) {
      throw UsageError(given->front() +
                       " does not apply to --flight-records (the dumps are all there is)");
    }
  }
}

// Every usage error is found here, before any sampling (UsageError: exit 2), and the output
// directory is made ready (-o, --force).
Plan make_plan(const DiagnoseArguments& args) {
  Plan p;
  p.interval = duration_option("--interval", args.interval);
  if (args.agents_given && trim(args.agents).empty()) {
    throw UsageError("--agents '" + printable(args.agents) + "': names no agent");
  }
  p.addresses = agent_addresses(args.agents, args.hostfile);
  const bool agents = !p.addresses.empty();
  if (!args.files.empty() && agents) {
    throw UsageError("give snapshot files or agents (--agents, --hostfile), not both");
  }
  if (!args.cores.empty()) check_cores_plan(args, agents);
  if (!args.flight_records.empty()) check_flight_records_plan(args, agents);
  if (!args.log_globs.empty() && args.flight_records.empty() && args.cores.empty()) {
    throw UsageError(
        "--log applies to --flight-records and --cores (live ranks: give it to each agent's "
        "`hangscope collect --log`)");
  }
  if ((!args.core_exe.empty() || !args.sysroot.empty()) && args.cores.empty()) {
    throw UsageError(std::string(args.core_exe.empty() ? "--sysroot" : "--exe") +
                     " applies to --cores only");
  }
  p.source = !args.cores.empty()            ? Plan::Source::kCores
             : !args.flight_records.empty() ? Plan::Source::kFlightRecords
             : !args.files.empty()          ? Plan::Source::kFiles
             : agents                       ? Plan::Source::kAgents
                                            : Plan::Source::kLocal;
  const std::string not_here = p.source == Plan::Source::kFiles
                                   ? "snapshot files"
                                   : "agents (give it to each agent's `hangscope collect`)";
  if (p.source != Plan::Source::kLocal && !args.local_only.empty()) {
    throw UsageError(args.local_only.front() + " applies to local capture only, not to " +
                     not_here);
  }
  if (p.source == Plan::Source::kFiles && !args.sampling.empty()) {
    throw UsageError(args.sampling.front() +
                     " does not apply to snapshot files (they hold their samples)");
  }
  if (p.source != Plan::Source::kAgents && !args.credentials.empty()) {
    throw UsageError(args.credentials.front() + " applies to agents (--agents, --hostfile) only");
  }
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    throw UsageError("--tls-cert and --tls-key go together");
  }
  if (p.source == Plan::Source::kAgents) {
    try {
      agent::check_client_credentials(args.tls_ca, args.tls_cert, args.tls_key);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  if (!args.select.empty()) check_regex("--select", args.select);
  if (args.query_store && !args.locals) throw UsageError("--query-store needs --locals");
  if (p.source == Plan::Source::kAgents) p.token = load_token(args.token_file);
  p.where = p.source == Plan::Source::kCores           ? "in the core files"
            : p.source == Plan::Source::kFlightRecords ? "in the flight-recorder dumps"
            : p.source == Plan::Source::kFiles         ? "in the snapshot files"
            : p.source == Plan::Source::kAgents        ? "on the nodes of the agents"
            : args.pids.empty()                        ? "on this node"
                                                       : "among the processes given with --pid";
  p.dir = args.output.empty() ? "hangscope-" + utc_stamp() : args.output;
  prepare_output_dir(p.dir, args.force);
  return p;
}

int run_diagnose(const DiagnoseArguments& args) {
  const Progress progress(args.quiet || args.json || args.ticket);
  const Plan p = make_plan(args);
  PhaseTimer timer;
  model::Bundle bundle =
      p.source == Plan::Source::kCores           ? from_cores(args, progress)
      : p.source == Plan::Source::kFlightRecords ? from_flight_records(args, progress)
      : p.source == Plan::Source::kFiles         ? from_files(args, progress)
      : p.source == Plan::Source::kAgents        ? from_agents(p, args, progress)
                                                 : from_local_node(args, p.interval, progress);
  timer.lap("gathering");
  // The snapshots are written while the analysis runs (both only read the bundle).
  std::string bundle_failure;
  std::thread bundle_writer([&] {
    PhaseTimer writing;
    try {
      auto task = progress.start("writing the bundle");
      report::write_bundle_data(p.dir, bundle, &task);
    } catch (const std::exception& e) {  // nothing may escape a thread
      bundle_failure = e.what();
    }
    writing.lap("bundle snapshots");
  });
  ReportRequest request;
  request.dir = p.dir;
  request.where = p.where;
  request.rules_dir = args.rules_dir;
  request.output = args.ticket ? Output::kTicket : args.json ? Output::kJson : Output::kSummary;
  request.max_rule_bytes = args.max_input_mib << 20;
  int code = kExitFailed;
  try {
    code = analyse_and_report(request, bundle, progress);
  } catch (...) {
    bundle_writer.join();
    throw;
  }
  bundle_writer.join();
  if (!bundle_failure.empty()) throw Error(bundle_failure);
  return code;
}

}  // namespace

CommandRunner register_diagnose_command(CLI::App& app) {
  auto args = std::make_shared<DiagnoseArguments>();
  app.add_option("snapshots", args->files, "Snapshot files from `hangscope collect --once`");
  auto* agents = app.add_option("--agents", args->agents,
                                "Agents to ask: HOST[:PORT],... (default port 7447)");
  app.add_option("--flight-records", args->flight_records,
                 "Post-mortem: diagnose these flight-recorder dumps (pickle or JSON) of a job that "
                 "is gone: a directory (every file in it) or a glob; repeatable")
      ->take_all();
  app.add_option("--cores", args->cores,
                 "Post-mortem: diagnose these core files (kernel-written or gcore) of a job's "
                 "ranks like live ranks: a directory (every file in it) or a glob; repeatable")
      ->take_all();
  app.add_option("--exe", args->core_exe,
                 "With --cores: the program's executable, when the path the cores name does not "
                 "hold it");
  app.add_option("--sysroot", args->sysroot,
                 "With --cores: a directory holding the crashed machines' files (libraries are "
                 "opened at DIR/PATH)");
  app.add_option("--log", args->log_globs,
                 "With --flight-records or --cores: the dead job's log files (GLOB; lines by "
                 "their [rankN]: or vLLM (Worker_TPn ...) prefix, or the file name's rank) for "
                 "the signature rules")
      ->take_all();
  app.add_option("--hostfile", args->hostfile, "File with one agent HOST[:PORT] per line");
  auto* token_file =
      app.add_option("--token-file", args->token_file, "Token for the agents (or HANGSCOPE_TOKEN)");
  auto* tls_ca =
      app.add_option("--tls-ca", args->tls_ca, "CA that signed the agents' certificates (PEM)");
  auto* tls_cert = app.add_option("--tls-cert", args->tls_cert, "Client certificate (PEM)");
  auto* tls_key = app.add_option("--tls-key", args->tls_key, "Client key (PEM)");
  auto* samples = app.add_option("--samples", args->samples, "Samples per node")
                      ->check(CLI::Range(1, 100))
                      ->capture_default_str();
  auto* interval =
      app.add_option("--interval", args->interval, "Time between samples: 500ms, 2s, 1m")
          ->capture_default_str();
  app.add_option("-o,--output", args->output,
                 "Bundle directory (default ./hangscope-<UTC time>); an existing one must be "
                 "empty");
  app.add_flag("--force", args->force,
               "Empty the -o directory first when it holds a bundle of an earlier run");
  app.add_option(
         "--max-input-mib", args->max_input_mib,
         "Largest snapshot, rule or flight-recorder dump file read, in MiB; larger ones are "
         "refused")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->capture_default_str();
  auto* json = app.add_flag("--json", args->json, "Print report.json to stdout");
  app.add_flag("--ticket", args->ticket,
               "Print report.md to stdout: a GitHub issue body, ready to paste")
      ->excludes(json);
  app.add_flag("--quiet", args->quiet, "No progress on stderr");
  app.add_option("--rules", args->rules_dir, "Directory of extra signature rule files (*.json)");
  auto* locals =
      app.add_flag("--locals,!--no-locals", args->locals,
                   "Python locals of the waiting frames (peers, groups, store keys; masked)")
          ->capture_default_str();
  auto* pid = app.add_option("--pid", args->pids,
                             "Local capture: these processes instead of discovering ranks")
                  ->check(pid_validator());
  auto* trigger =
      app.add_flag("--trigger-fr-dump", args->trigger_fr_dump,
                   "Local capture: ask each rank for a fresh flight-recorder dump through its "
                   "TORCH_NCCL_DEBUG_INFO_PIPE_FILE fifo (agents: `collect --trigger-fr-dump`)");
  auto* query_store =
      app.add_flag("--query-store", args->query_store,
                   "Local capture: ask each waiting rank's c10d store which of the keys it awaits "
                   "exist (read-only; needs --locals; agents: `collect --query-store`)");
  auto* select = app.add_option(
      "--select", args->select,
      "Local capture: only processes whose command line matches this regex (RE2 syntax)");
  app.footer(
      "Examples:\n"
      "  hangscope diagnose                                 # this node, no agent needed\n"
      "  hangscope diagnose --agents node0,node1:7447 --token-file token\n"
      "  hangscope diagnose node0.json node1.json --json\n"
      "  hangscope diagnose --flight-records /tmp/fr-dumps -o postmortem  # the job is gone\n"
      "  hangscope diagnose --cores '/var/crash/core.*' -o postmortem");
  return [=] {
    args->agents_given = agents->count() > 0;
    args->local_only = given_options({pid, select, trigger, query_store});
    args->sampling = given_options({samples, interval, locals});
    args->credentials = given_options({token_file, tls_ca, tls_cert, tls_key});
    return run_diagnose(*args);
  };
}

}  // namespace hangscope::cli
