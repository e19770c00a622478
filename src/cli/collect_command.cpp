// `hangscope collect`: the agent (a gRPC server on this node), or one capture into a file.
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "hangscope/agent/agent.h"
#include "hangscope/capture/node_capture.h"
#include "hangscope/capture/process_selection.h"
#include "hangscope/capture/sample_series.h"
#include "hangscope/cli/commands.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/error.h"
#include "hangscope/common/text.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/sources/sources.h"

namespace hangscope::cli {
namespace {

struct CollectArguments {
  bool once = false;
  std::string output;
  int samples = 1;
  std::string interval = "1s";
  std::string listen = "127.0.0.1:7447";
  std::string token_file;
  bool insecure = false;
  std::string tls_cert, tls_key, tls_ca;
  capture::ProcessSelection selection;  // --pid, --select, --node-name
  capture::ExtraEvidence evidence;      // --log, --trigger-fr-dump, --query-store
  bool locals = false;
  std::vector<std::string> replay;
  // Which options the command line gave (given_options), for check_options().
  std::vector<std::string> once_only, agent_only;
};

// Usage errors (exit 2), found before anything is captured or served.
void check_options(const CollectArguments& args) {
  if (args.once && !args.agent_only.empty()) {
    throw UsageError(args.agent_only.front() + " applies to the agent, not to --once");
  }
  if (!args.once && !args.once_only.empty()) {
    throw UsageError(args.once_only.front() + " applies to --once only");
  }
  duration_option("--interval", args.interval);
  if (!args.selection.select.empty()) check_regex("--select", args.selection.select);
  if (args.once) {
    check_output_file(args.output);
    return;
  }
  try {
    parse_address(args.listen, agent::kDefaultPort, true);
  } catch (const UsageError& e) {
    throw UsageError("--listen '" + printable(args.listen) + "': " + e.what());
  }
  try {
    agent::check_tls_combination(args.tls_cert, args.tls_key, args.tls_ca);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// What `collect --once` says as it samples: the log, not the diagnose status line.
class LogFeedback final : public sources::Feedback {
 public:
  void say(const std::string& line) const override { spdlog::info("{}", printable(line)); }
  void error(const std::string& message) const override { print_error(message); }
  void warning(const std::string& message) const override { print_warning(message); }
  ProgressMeter::Task start(std::string, std::string, std::uint64_t) const override { return {}; }
  ProgressMeter* meter() const override { return nullptr; }
};

int collect_once(const CollectArguments& args) {
  sources::LocalSampling sampling;
  sampling.samples = args.samples;
  sampling.interval = duration_option("--interval", args.interval);
  sampling.locals = args.locals;
  sampling.selection = args.selection;
  sampling.evidence = args.evidence;
  const auto samples = sources::sample_local_node(sampling, LogFeedback());
  snapshot::write_file(args.output, samples);
  std::cerr << "hangscope: wrote " << samples.size() << " sample(s) of node "
            << samples.front().node_name << " (" << samples.front().processes.size()
            << " processes) to " << args.output << "\n";
  return kExitOk;
}

int run_collect(const CollectArguments& args) {
  check_options(args);
  if (args.once) return collect_once(args);
  agent::AgentOptions options;
  // "[::1]" and "host" get the default port; the agent binds exactly this address.
  options.listen = parse_address(args.listen, agent::kDefaultPort, true);
  options.token = load_token(args.token_file);
  options.token_file = args.token_file;
  options.insecure = args.insecure;
  options.tls_cert = args.tls_cert;
  options.tls_key = args.tls_key;
  options.tls_ca = args.tls_ca;
  options.selection = args.selection;
  options.evidence = args.evidence;
  options.replay_files = args.replay;
  if (const char* calls = std::getenv("HANGSCOPE_REPLAY_BUSY_CALLS")) {
    options.replay_busy_calls = std::strtol(calls, nullptr, 10);
  }
  if (const char* ms = std::getenv("HANGSCOPE_AGENT_SELF_CHECK_MS")) {
    options.self_check_interval = std::chrono::milliseconds(std::strtoll(ms, nullptr, 10));
  }
  return agent::serve(options);
}

}  // namespace

CommandRunner register_collect_command(CLI::App& app) {
  auto args = std::make_shared<CollectArguments>();
  auto* once =
      app.add_flag("--once", args->once, "Capture this node now into a file instead of serving");
  app.add_option("-o,--output", args->output, "Snapshot file (--once): .pb = binary, else JSON")
      ->needs(once);
  auto* samples = app.add_option("--samples", args->samples, "Samples (--once)")
                      ->check(CLI::Range(1, 100))
                      ->capture_default_str();
  auto* interval =
      app.add_option("--interval", args->interval, "Time between samples (--once): 500ms, 2s, 1m")
          ->capture_default_str();
  auto* listen = app.add_option("--listen", args->listen,
                                "Address to serve on: HOST:PORT, [IPv6]:PORT (port 1-65535, or "
                                "0 for a free one)")
                     ->capture_default_str();
  auto* token_file =
      app.add_option("--token-file", args->token_file,
                     "File holding the token clients must present (or set HANGSCOPE_TOKEN)");
  auto* insecure = app.add_flag("--insecure", args->insecure,
                                "Allow a non-loopback listener without authentication");
  auto* tls_cert = app.add_option("--tls-cert", args->tls_cert, "Server certificate (PEM)");
  auto* tls_key = app.add_option("--tls-key", args->tls_key, "Server key (PEM)");
  auto* tls_ca =
      app.add_option("--tls-ca", args->tls_ca, "CA of required client certificates (PEM)");
  app.add_option("--node-name", args->selection.node_name, "Name of this node (default: hostname)");
  app.add_option("--pid", args->selection.pids,
                 "Capture these processes instead of discovering ranks")
      ->check(pid_validator());
  app.add_option(
      "--select", args->selection.select,
      "Only processes whose command line (a retitled process's title), name or executable "
      "path matches this regex (RE2 syntax; agent and --once)");
  auto* locals = app.add_flag("--locals", args->locals, "Python locals (--once)");
  app.add_flag("--trigger-fr-dump", args->evidence.trigger_flight_dumps,
               "Ask each rank for a fresh flight-recorder dump through its "
               "TORCH_NCCL_DEBUG_INFO_PIPE_FILE fifo (last sample; waits up to 5 s)");
  app.add_flag("--query-store", args->evidence.query_store,
               "Ask each waiting rank's c10d store (MASTER_ADDR:MASTER_PORT) which of the keys it "
               "awaits exist: read-only CHECKs (last sample; --once: implies --locals; agent: "
               "when the client asks for locals, as diagnose does by default)");
  auto* replay = app.add_option(
      "--replay", args->replay,
      "Serve these recorded snapshot files instead of capturing: file i on the --listen "
      "port + i, one simulated node each (benchmarks, tests)");
  app.add_option("--log", args->evidence.log_globs,
                 "Extra log files (glob); lines are given to ranks by their \"pid=N\" prefix");
  app.footer(
      "Examples:\n"
      "  hangscope collect                                  # agent on 127.0.0.1:7447\n"
      "  hangscope collect --listen 0.0.0.0:7447 --token-file /etc/hangscope/token\n"
      "  hangscope collect --once -o node0.json --samples 3 --interval 2s");
  app.callback([args] {
    if (args->once && args->output.empty()) throw CLI::ValidationError("--once needs -o FILE");
  });
  return [=] {
    args->once_only = given_options({samples, interval, locals});
    args->agent_only =
        given_options({listen, token_file, insecure, tls_cert, tls_key, tls_ca, replay});
    return run_collect(*args);
  };
}

}  // namespace hangscope::cli
