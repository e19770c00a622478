// `hangscope watch`: the options, their usage checks (before any node is contacted), the stop
// signals, and the watcher (watch/watcher.h) that does the rest.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <ctime>
#include <memory>
#include <thread>

#include "hangscope/agent/agent.h"
#include "hangscope/capture/process_selection.h"
#include "hangscope/cli/commands.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/error.h"
#include "hangscope/common/text.h"
#include "hangscope/watch/watcher.h"

namespace hangscope::cli {
namespace {

struct WatchArguments {
  std::string agents;
  std::string hostfile;
  std::string token_file;
  std::string tls_ca, tls_cert, tls_key;
  int samples = 3;
  std::string interval = "1s";
  bool locals = true;
  std::string rules_dir;
  capture::ProcessSelection selection;  // --pid, --select (this node only)
  std::string after;
  std::string poll = "2s";
  std::string output = "hangscope-watch";
  std::string on_hang;
  bool once = false;
  std::string timeout;
  std::string metrics;
  std::string metrics_token_file;
  std::string metrics_tls_cert, metrics_tls_key;
  bool insecure = false;
  std::size_t keep = 50;
  bool quiet = false;
  bool agents_given = false;
  std::vector<std::string> local_only, credentials, metrics_only;
};

// SIGINT and SIGTERM set `stop` (blocked in every thread, taken by one that waits for them)
// for as long as it lives.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, &previous_);
    thread_ = std::thread([this] {
      const timespec step{0, 200'000'000};
      while (!done_) {
        if (sigtimedwait(&signals_, nullptr, &step) > 0) stop = true;
      }
    });
  }
  ~StopSignals() {
    done_ = true;
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  std::atomic<bool> stop{false};

 private:
  sigset_t signals_{}, previous_{};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Every usage error is found here, before any node is contacted (exit 2).
watch::WatchOptions make_options(const WatchArguments& args) {
  watch::WatchOptions o;
  if (args.agents_given && trim(args.agents).empty()) {
    throw UsageError("--agents '" + printable(args.agents) + "': names no agent");
  }
  o.agents = agent_addresses(args.agents, args.hostfile);
  const bool agents = !o.agents.empty();
  if (agents && !args.local_only.empty()) {
    throw UsageError(args.local_only.front() +
                     " applies to this node only, not to agents (give it to each agent's "
                     "`hangscope collect`)");
  }
  if (!agents && !args.credentials.empty()) {
    throw UsageError(args.credentials.front() + " applies to agents (--agents, --hostfile) only");
  }
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    throw UsageError("--tls-cert and --tls-key go together");
  }
  if (agents) {
    try {
      agent::check_client_credentials(args.tls_ca, args.tls_cert, args.tls_key);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    o.request.token = load_token(args.token_file);
    o.request.tls_ca = args.tls_ca;
    o.request.tls_cert = args.tls_cert;
    o.request.tls_key = args.tls_key;
  }
  if (!args.selection.select.empty()) check_regex("--select", args.selection.select);
  o.poll = duration_option("--poll", args.poll);
  if (o.poll < std::chrono::milliseconds(100)) throw UsageError("--poll: at least 100ms");
  if (o.poll > std::chrono::seconds(10)) {
    throw UsageError("--poll " + args.poll + ": at most 10s (an agent observes 10 s at once)");
  }
  o.after = args.after.empty() ? std::chrono::milliseconds(5 * 60 * 1000)
                               : duration_option("--after", args.after);
  o.after_given = !args.after.empty();
  if (o.after < 2 * o.poll) {
    throw UsageError("--after " + (args.after.empty() ? std::string("5m") : args.after) +
                     " is shorter than twice --poll " + args.poll +
                     ": a stall needs two polls to be seen");
  }
  if (!args.timeout.empty()) o.timeout = duration_option("--timeout", args.timeout);
  const auto interval = duration_option("--interval", args.interval);
  o.request.samples = args.samples;
  o.request.interval = interval;
  o.request.locals = args.locals;
  o.local.samples = args.samples;
  o.local.interval = interval;
  o.local.locals = args.locals;
  o.local.selection = args.selection;
  o.observe.selection = args.selection;
  if (args.output.empty()) throw UsageError("-o: an empty directory name");
  o.dir = args.output;
  o.on_hang = args.on_hang;
  o.once = args.once;
  o.keep = args.keep;
  o.rules_dir = args.rules_dir;
  o.max_rule_bytes = kDefaultMaxInputBytes;
  if (!args.metrics.empty()) {
    watch::MetricsOptions m;
    const bool has_host = args.metrics.find(':') != std::string::npos;
    m.endpoint = has_host ? args.metrics : "127.0.0.1:" + args.metrics;
    if (!args.metrics_token_file.empty()) {
      m.token = load_token(args.metrics_token_file);
      m.token_file = args.metrics_token_file;
    }
    m.tls_cert = args.metrics_tls_cert;
    m.tls_key = args.metrics_tls_key;
    m.insecure = args.insecure;
    try {
      watch::check_metrics_options(m);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    o.metrics = m;
  } else if (!args.metrics_only.empty()) {
    throw UsageError(args.metrics_only.front() + " applies to --metrics only");
  }
  return o;
}

}  // namespace

CommandRunner register_watch_command(CLI::App& app) {
  auto args = std::make_shared<WatchArguments>();
  auto* agents = app.add_option("--agents", args->agents,
                                "Agents to watch: HOST[:PORT],... (default port 7447; default: "
                                "this node, in-process)");
  app.add_option("--hostfile", args->hostfile, "File with one agent HOST[:PORT] per line");
  auto* token_file =
      app.add_option("--token-file", args->token_file, "Token for the agents (or HANGSCOPE_TOKEN)");
  auto* tls_ca =
      app.add_option("--tls-ca", args->tls_ca, "CA that signed the agents' certificates (PEM)");
  auto* tls_cert = app.add_option("--tls-cert", args->tls_cert, "Client certificate (PEM)");
  auto* tls_key = app.add_option("--tls-key", args->tls_key, "Client key (PEM)");
  app.add_option("--after", args->after,
                 "No progress for this long while a rank waits makes a job an incident (default "
                 "5m, or half the job's collective timeout when shorter)");
  app.add_option("--poll", args->poll, "Observation period (nothing is stopped)")
      ->capture_default_str();
  app.add_option("-o,--output", args->output,
                 "Incident directory, created if missing; each incident a bundle in "
                 "DIR/<UTC time>-<job>/")
      ->capture_default_str();
  app.add_option("--on-hang", args->on_hang,
                 "Command run (sh -c, 60 s limit) once per incident, with HANGSCOPE_BUNDLE, "
                 "HANGSCOPE_JOB, HANGSCOPE_VERDICT and HANGSCOPE_SUMMARY set");
  app.add_flag("--once", args->once, "Exit 3 after the first incident");
  app.add_option("--timeout", args->timeout, "Exit 0 when no incident happened by then");
  auto* metrics = app.add_option("--metrics", args->metrics,
                                 "Serve Prometheus metrics at [HOST:]PORT/metrics (host "
                                 "default 127.0.0.1)");
  auto* metrics_token = app.add_option(
      "--metrics-token-file", args->metrics_token_file,
      "Scrapers must present this token (HTTP basic auth password); needed off loopback unless "
      "TLS or --insecure");
  auto* metrics_cert = app.add_option("--metrics-tls-cert", args->metrics_tls_cert,
                                      "Serve the metrics over HTTPS with this certificate (PEM)");
  auto* metrics_key =
      app.add_option("--metrics-tls-key", args->metrics_tls_key, "The certificate's key (PEM)");
  auto* insecure =
      app.add_flag("--insecure", args->insecure, "Serve metrics off loopback without token or TLS");
  app.add_option("--keep", args->keep, "Incident directories kept (the oldest go first)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000}))
      ->capture_default_str();
  app.add_option("--samples", args->samples, "Samples per node when confirming a stall")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--interval", args->interval, "Time between those samples")->capture_default_str();
  app.add_flag("--locals,!--no-locals", args->locals,
               "Python locals of the waiting frames in the confirming samples")
      ->capture_default_str();
  app.add_option("--rules", args->rules_dir, "Directory of extra signature rule files (*.json)");
  auto* pid = app.add_option("--pid", args->selection.pids, "This node only: watch these processes")
                  ->check(pid_validator());
  auto* select = app.add_option("--select", args->selection.select,
                                "This node only: processes whose command line matches this regex");
  app.add_flag("--quiet", args->quiet, "No status line or progress on stderr");
  app.footer(
      "Examples:\n"
      "  hangscope watch                                    # this node's jobs\n"
      "  hangscope watch --hostfile agents --token-file token -o /var/lib/hangscope/watch\n"
      "  hangscope watch --after 10m --on-hang 'notify-team \"$HANGSCOPE_SUMMARY\"'\n"
      "  hangscope watch --once --after 2m --metrics 9464\n"
      "Exit codes: 0 stopped (SIGTERM/SIGINT) or --timeout without incident, 1 no node reachable "
      "at start, 2 bad usage, 3 --once after an incident");
  return [=] {
    args->agents_given = agents->count() > 0;
    args->local_only = given_options({pid, select});
    args->credentials = given_options({token_file, tls_ca, tls_cert, tls_key});
    args->metrics_only = given_options({metrics_token, metrics_cert, metrics_key, insecure});
    (void)metrics;
    const auto options = make_options(*args);
    StopSignals signals;  // first: every thread started later inherits the blocked signals
    const Progress progress(args->quiet);
    return watch::watch(options, progress, signals.stop);
  };
}

}  // namespace hangscope::cli
