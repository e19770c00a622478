#include <ctime>
#include <iostream>
#include <memory>
#include <thread>

#include "hangscope/agent/agent.h"
#include "hangscope/capture/process_selection.h"
#include "hangscope/cli/commands.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/common/text.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/report/report.h"
#include "hangscope/sources/sources.h"

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
  capture::ProcessSelection selection;  // --pid, --select (local capture)
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
  if (!args.selection.select.empty()) check_regex("--select", args.selection.select);
  if (args.query_store && !args.locals) throw UsageError("--query-store needs --locals");
  if (p.source == Plan::Source::kAgents) p.token = load_token(args.token_file);
  p.where = p.source == Plan::Source::kCores           ? "in the core files"
            : p.source == Plan::Source::kFlightRecords ? "in the flight-recorder dumps"
            : p.source == Plan::Source::kFiles         ? "in the snapshot files"
            : p.source == Plan::Source::kAgents        ? "on the nodes of the agents"
            : args.selection.pids.empty()              ? "on this node"
                                                       : "among the processes given with --pid";
  p.dir = args.output.empty() ? "hangscope-" + utc_stamp() : args.output;
  prepare_output_dir(p.dir, args.force);
  return p;
}

// The bundle from the source the plan chose (sources/sources.h says how each makes one).
model::Bundle gather(const Plan& p, const DiagnoseArguments& args, const Progress& progress) {
  const std::size_t max_input_bytes = args.max_input_mib << 20;
  switch (p.source) {
    case Plan::Source::kCores:
      return sources::from_cores(
          {args.cores, args.core_exe, args.sysroot, args.locals, args.log_globs}, progress);
    case Plan::Source::kFlightRecords:
      return sources::from_flight_records(args.flight_records, args.log_globs, max_input_bytes,
                                          progress);
    case Plan::Source::kFiles:
      return sources::from_snapshot_files(args.files, max_input_bytes, progress);
    case Plan::Source::kAgents: {
      agent::CollectRequest request;
      request.token = p.token;
      request.tls_ca = args.tls_ca;
      request.tls_cert = args.tls_cert;
      request.tls_key = args.tls_key;
      request.samples = args.samples;
      request.interval = p.interval;
      request.locals = args.locals;
      return sources::from_agents(p.addresses, request, progress);
    }
    case Plan::Source::kLocal:
      break;
  }
  sources::LocalSampling sampling;
  sampling.samples = args.samples;
  sampling.interval = p.interval;
  sampling.locals = args.locals;
  sampling.selection = args.selection;
  sampling.evidence.trigger_flight_dumps = args.trigger_fr_dump;
  sampling.evidence.query_store = args.query_store;
  return sources::from_local_node(sampling, progress);
}

int run_diagnose(const DiagnoseArguments& args) {
  const Progress progress(args.quiet || args.json || args.ticket);
  const Plan p = make_plan(args);
  PhaseTimer timer;
  model::Bundle bundle = gather(p, args, progress);
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
  auto* pid = app.add_option("--pid", args->selection.pids,
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
      "--select", args->selection.select,
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
