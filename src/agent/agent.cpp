#include "hangscope/agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include "agent_parts.h"
#include "hangscope/agent/accept_probe.h"
#include "hangscope/capture/sample_series.h"
#include "hangscope/common/address.h"
#include "hangscope/common/clock.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/facts/network.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/v1/agent.grpc.pb.h"
#include "hangscope/version.h"
#include "replay.h"

namespace hangscope::agent {
namespace {

class AgentService final : public v1::Agent::Service {
 public:
  explicit AgentService(const AgentOptions& options) : options_(options) {}

  grpc::Status Info(grpc::ServerContext* context, const v1::InfoRequest*,
                    v1::InfoReply* reply) override {
    if (auto denied = authenticate(*context, "Info")) return *denied;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    reply->set_node_name(options_.selection.node_name_or(host));
    reply->set_hostname(host);
    reply->set_agent_version(kVersion);
    reply->set_clock_unix_ns(unix_now_ns());
    return grpc::Status::OK;
  }

  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest*,
                      v1::HealthReply* reply) override {
    if (auto denied = authenticate(*context, "Health")) return *denied;
    reply->set_serving(true);
    return grpc::Status::OK;
  }

  grpc::Status Capture(grpc::ServerContext* context, const v1::CaptureRequest* request,
                       v1::CaptureReply* reply) override {
    if (auto denied = authenticate(*context, "Capture")) return *denied;
    std::string clamped;
    const int samples = parts::clamp_samples(*request, &clamped);
    if (!clamped.empty()) reply->add_notes(clamped);
    const std::int64_t now = unix_now_ns();
    if (auto refused =
            parts::check_capture(*request, samples, now, options_.selection.pids, *context)) {
      return *refused;
    }
    capture::NodeCaptureOptions options;
    options.process = options_.capture;
    options.process.locals = request->locals();
    options.process.modules = modules_;  // parsed libraries stay parsed between requests
    options.selection = selection_for(*request);
    options.evidence = options_.evidence;
    // A few requests may wait; more are refused as busy rather than piling up threads.
    const QueueSlot slot(queued_);
    if (slot.count() > AgentLimits::kMaxQueuedCaptures) {
      spdlog::warn("Capture: refused {} (busy: {} captures queued)", context->peer(),
                   slot.count() - 1);
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          "agent busy: " + std::to_string(slot.count() - 1) + " captures are queued; try again");
    }
    // Sample i is due at start + i * interval on the agent's clock (every node samples at the
    // same moments), with probes of the ranks' Python threads between samples.
    // check_request bounded start and the whole span, so nothing overflows.
    capture::SeriesPlan plan;
    plan.samples = samples;
    plan.interval = std::chrono::nanoseconds(request->interval_ns());
    plan.start_unix_ns = parts::sampling_start(request->start_unix_ns(), now);
    capture::SeriesHooks hooks;
    hooks.wait_until = [&](std::int64_t due) { return sleep_until_due(due, *context); };
    // One capture at a time on a node: no target is ever traced by two requests at once.
    // The lock is held for a stopped sample only, never while a request probes or waits.
    hooks.capture = [this](const capture::NodeCaptureOptions& o) {
      std::lock_guard<std::mutex> lock(capture_mutex_);
      return capture::capture_node(o);
    };
    auto series = capture::capture_series(options, plan, hooks);
    if (!series) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    for (const auto& node : *series) snapshot::encode(node, *reply->add_snapshots());
    spdlog::info("capture: {} sample(s) for {}", samples, context->peer());
    return grpc::Status::OK;
  }

  grpc::Status Observe(grpc::ServerContext* context, const v1::ObserveRequest* request,
                       v1::ObserveReply* reply) override {
    if (auto denied = authenticate(*context, "Observe")) return *denied;
    std::int64_t window = static_cast<std::int64_t>(
        std::min<std::uint64_t>(request->window_ns(), AgentLimits::kMaxObserveWindowNs));
    if (request->window_ns() > static_cast<std::uint64_t>(AgentLimits::kMaxObserveWindowNs)) {
      reply->add_notes("asked for a window of " + std::to_string(request->window_ns() / 1'000'000) +
                       " ms; this agent observes at most 10 s at once");
    }
    const int probes = static_cast<int>(std::min<std::uint32_t>(
        request->probes(), static_cast<std::uint32_t>(AgentLimits::kMaxObserveProbes)));
    if (auto refused =
            parts::check_pids(request->pids(), options_.selection.pids, "Observe", *context)) {
      return *refused;
    }
    // One observation at a time: a second watcher waits for the first one's window.
    std::unique_lock<std::timed_mutex> lock(observe_mutex_, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::nanoseconds(window) + std::chrono::seconds(5))) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "agent busy: another observation is running");
    }
    capture::ObserveOptions options;
    options.selection = selection_for(*request);
    options.window = std::chrono::nanoseconds(window);
    options.probes = probes;
    std::optional<std::array<model::NodeSnapshot, 2>> samples;
    try {
      samples = observer_.observe(options,
                                  [&](std::int64_t due) { return sleep_until_due(due, *context); });
    } catch (const Error& e) {
      return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
    }
    if (!samples) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    for (const auto& node : *samples) snapshot::encode(node, *reply->add_snapshots());
    spdlog::debug("observe: {} process(es) for {}", (*samples)[1].processes.size(),
                  context->peer());
    return grpc::Status::OK;
  }

 private:
  // Sleeps until `due` (agent clock) in short steps; false when the caller went away.
  static bool sleep_until_due(std::int64_t due, const grpc::ServerContext& context) {
    constexpr std::int64_t kStepNs = 100'000'000;
    for (std::int64_t wait = due - unix_now_ns(); wait > 0; wait = due - unix_now_ns()) {
      if (context.IsCancelled()) return false;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(wait, kStepNs)));
    }
    return !context.IsCancelled();
  }

  // The agent's selection, with the pids a request names instead of its own when it names any
  // (check_pids allowed them).
  template <typename Request>
  capture::ProcessSelection selection_for(const Request& request) const {
    capture::ProcessSelection selection = options_.selection;
    if (!request.pids().empty()) {
      selection.pids.assign(request.pids().begin(), request.pids().end());
    }
    return selection;
  }

  // Counts the requests waiting for or holding the capture, for as long as it lives.
  class QueueSlot {
   public:
    explicit QueueSlot(std::atomic<int>& queued) : queued_(queued), count_(++queued) {}
    ~QueueSlot() { --queued_; }
    QueueSlot(const QueueSlot&) = delete;
    QueueSlot& operator=(const QueueSlot&) = delete;
    int count() const { return count_; }

   private:
    std::atomic<int>& queued_;
    int count_;
  };

  std::optional<grpc::Status> authenticate(const grpc::ServerContext& context, const char* method) {
    return parts::authenticate(context, options_.token, method);
  }

  const AgentOptions& options_;
  std::shared_ptr<elf::ModuleCache> modules_ = std::make_shared<elf::ModuleCache>();
  std::mutex capture_mutex_;
  std::atomic<int> queued_{0};
  capture::NodeObserver observer_;  // its described processes stay open between observations
  std::timed_mutex observe_mutex_;
};

// Who listens on a TCP port of this network namespace: "pid 812 (hangscope)", or "" when no
// process of ours can be seen holding it (another user's process, another namespace).
std::string port_holder(int port) {
  std::set<std::uint64_t> inodes;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    const auto read = read_file(table);
    if (!read.text) continue;
    try {
      for (const auto& socket : facts::parse_proc_net_tcp(*read.text)) {
        if (socket.state == model::SocketState::kListen && socket.local_port == port) {
          inodes.insert(socket.inode);
        }
      }
    } catch (const Error&) {
      continue;  // a table in an unknown format names nobody
    }
  }
  if (inodes.empty()) return "";
  for (const auto& name : list_directory("/proc").value_or(std::vector<std::string>{})) {
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto held = facts::socket_inodes("/proc/" + name);
    if (std::none_of(held.begin(), held.end(), [&](auto i) { return inodes.count(i) > 0; })) {
      continue;
    }
    const auto comm = read_file("/proc/" + name + "/comm", 64).text;
    return "pid " + name + (comm ? " (" + printable(trim(*comm)) + ")" : "");
  }
  return "";
}

// Why a port could not be bound: in use (by whom, when it can be seen), or another reason.
std::string bind_failure(const std::string& address, int port) {
  const std::string holder = port > 0 ? port_holder(port) : "";
  if (!holder.empty()) return "cannot listen on " + address + ": the port is in use by " + holder;
  return "cannot listen on " + address +
         " (the port is in use, or the address is not one of this node's)";
}

constexpr int kHandshakeTimeoutMs = 10'000;
constexpr int kMaxConnectionIdleMs = 120'000;

// Checks every `interval` that the server still accepts connections; after kFailures checks
// in a row that it does not, records why and wakes the serving thread (SIGTERM to it), which
// then exits non-zero so that systemd (Restart=on-failure) or the DaemonSet restarts it.
class SelfCheck {
 public:
  static constexpr int kFailures = 3;
  SelfCheck(AcceptProbe probe, std::chrono::milliseconds interval, pthread_t serving_thread)
      : probe_(std::move(probe)), interval_(interval), serving_thread_(serving_thread) {
    if (interval_.count() > 0) thread_ = std::thread([this] { run(); });
  }
  ~SelfCheck() { stop(); }
  SelfCheck(const SelfCheck&) = delete;
  SelfCheck& operator=(const SelfCheck&) = delete;

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  std::string failure() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }

 private:
  void run() {
    int failures = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
      lock.unlock();
      const std::string why = probe_.check(std::min(interval_, std::chrono::milliseconds(5000)));
      lock.lock();
      if (why.empty()) {
        failures = 0;
        continue;
      }
      spdlog::warn("self-check {}/{}: {}", ++failures, kFailures, why);
      if (failures < kFailures) continue;
      failure_ = why;
      ::pthread_kill(serving_thread_, SIGTERM);  // blocked there: sigwait returns it
      return;
    }
  }

  AcceptProbe probe_;
  std::chrono::milliseconds interval_;
  pthread_t serving_thread_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string failure_;
  std::thread thread_;
};

}  // namespace

CredentialCheck validate(const AgentOptions& options) {
  const CredentialCheck check = check_server_credentials(
      {options.tls_cert, options.tls_key, options.tls_ca, options.token, options.token_file});
  if (is_loopback_endpoint(options.listen) || options.insecure) return check;
  if (!check.authenticated()) {
    throw Error("refusing to listen on " + options.listen +
                " without authentication: give --token-file (or HANGSCOPE_TOKEN), or "
                "--tls-cert and --tls-key with --tls-ca for client certificates, or --insecure");
  }
  if (!check.weaknesses.empty()) {
    throw Error("refusing to listen on " + options.listen + ": " + check.weaknesses.front() +
                " (or --insecure)");
  }
  return check;
}

std::string normalize_address(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    return address.find("]:") == std::string::npos ? address + ":" + std::to_string(kDefaultPort)
                                                   : address;
  }
  const auto colons = std::count(address.begin(), address.end(), ':');
  if (colons == 0) return address + ":" + std::to_string(kDefaultPort);
  if (colons > 1) return "[" + address + "]:" + std::to_string(kDefaultPort);  // bare IPv6
  return address;
}

int serve(const AgentOptions& options, const std::function<void(int port)>& ready) {
  const CredentialCheck credentials_check = validate(options);
  parts::no_lock_order_tracking();
  parts::raise_descriptor_limit();
  // Block the stop signals before any thread starts, then wait for them on this thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Replay: one port per recorded node, from the listen port up.
  const int base_port = std::atoi(options.listen.substr(options.listen.rfind(':') + 1).c_str());
  if (!options.replay_files.empty() && base_port == 0) {
    throw Error("--replay needs an explicit --listen port (file i is served on port + i)");
  }
  // The service outlives the server (declared first, destroyed last).
  std::unique_ptr<Replay> replay;
  std::unique_ptr<AgentService> service;
  if (options.replay_files.empty()) {
    service = std::make_unique<AgentService>(options);
  } else {
    replay = std::make_unique<Replay>(options, base_port);
  }
  grpc::ServerBuilder builder;
  grpc::ResourceQuota quota("hangscope-agent");
  quota.SetMaxThreads(AgentLimits::kMaxServerThreads);  // more callers wait or are refused
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(AgentLimits::kMaxRequestBytes);
  // gRPC sets SO_REUSEPORT by default: a second agent on the same port would start and take
  // half of the connections, with its own token. A port in use is an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Connections that never finish their handshake, or hold no call, do not keep descriptors.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, kHandshakeTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kMaxConnectionIdleMs);
  int port = 0;
  const auto credentials = parts::server_credentials(options);
  builder.AddListeningPort(options.listen, credentials, &port);
  const std::string host = parts::host_of(options.listen);
  std::vector<int> replay_ports(options.replay_files.size(), 0);
  for (std::size_t i = 1; i < options.replay_files.size(); ++i) {
    builder.AddListeningPort(host + ":" + std::to_string(base_port + static_cast<int>(i)),
                             credentials, &replay_ports[i]);
  }
  if (replay) {
    builder.RegisterService(replay->service());
  } else {
    builder.RegisterService(service.get());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) throw Error(bind_failure(options.listen, base_port));
  for (std::size_t i = 1; i < replay_ports.size(); ++i) {
    if (replay_ports[i] == 0) {
      const int replay_port = base_port + static_cast<int>(i);
      throw Error(bind_failure(host + ":" + std::to_string(replay_port), replay_port) +
                  " for --replay");
    }
  }
  if (replay) {
    spdlog::info("replaying {} recorded node(s) on ports {}-{}", replay->size(), base_port,
                 base_port + static_cast<int>(replay->size()) - 1);
  }
  if (!is_loopback_endpoint(options.listen) && !credentials_check.authenticated()) {
    spdlog::warn(
        "listening on {} without authentication (--insecure): anyone who can reach "
        "this port can read this node's stacks",
        options.listen);
  }
  for (const auto& weakness : credentials_check.weaknesses) spdlog::warn("{}", weakness);
  for (const auto& warning : credentials_check.warnings) spdlog::warn("{}", warning);
  spdlog::info("agent listening on {} (port {}){}{}", options.listen, port,
               credentials_check.tls ? ", TLS" : "",
               credentials_check.client_certificates ? ", client certificates required"
               : credentials_check.token             ? ", token required"
                                                     : "");
  std::printf("listening on %s\n", (host + ":" + std::to_string(port)).c_str());
  std::fflush(stdout);
  if (ready) ready(port);
  SelfCheck self_check(AcceptProbe(options.listen, port), options.self_check_interval,
                       ::pthread_self());
  int signal = 0;
  sigwait(&stop_signals, &signal);
  self_check.stop();
  if (replay) replay->stop();  // calls waiting for their samples are answered now
  if (const auto failure = self_check.failure(); !failure.empty()) {
    spdlog::error("the agent no longer accepts connections ({}): exiting so that it is restarted",
                  failure);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    return 1;
  }
  spdlog::info("signal {}: shutting down", signal);
  // Captures in progress finish (their threads detach) before Shutdown returns.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return 0;
}

}  // namespace hangscope::agent

namespace hangscope::agent {

struct AgentObserver::Connection {
  std::string address;
  CollectRequest credentials;
  std::unique_ptr<v1::Agent::Stub> stub;
  std::string setup_error;                   // why no channel could be made
  std::optional<std::int64_t> clock_offset;  // learned by Info; forgotten after a failure
  std::string node_name;
};

AgentObserver::AgentObserver(const std::string& address, CollectRequest credentials)
    : connection_(std::make_unique<Connection>()) {
  auto& c = *connection_;
  c.address = normalize_address(address);
  c.credentials = std::move(credentials);
  try {
    c.stub = v1::Agent::NewStub(
        grpc::CreateChannel(c.address, parts::channel_credentials(c.credentials)));
  } catch (const Error& e) {
    c.setup_error = e.what();
  }
}

AgentObserver::~AgentObserver() = default;

const std::string& AgentObserver::address() const {
  return connection_->address;
}

AgentAnswer AgentObserver::observe(std::chrono::milliseconds window, int probes) {
  auto& c = *connection_;
  AgentAnswer answer;
  answer.address = c.address;
  if (!c.stub) {
    answer.status = model::NodeState::kError;
    answer.error = c.setup_error;
    return answer;
  }
  const auto prepare = [&](grpc::ClientContext& context, std::chrono::milliseconds deadline) {
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    if (!c.credentials.token.empty()) {
      context.AddMetadata("authorization", "Bearer " + c.credentials.token);
    }
  };
  if (!c.clock_offset) {
    grpc::ClientContext info_context;
    prepare(info_context, std::chrono::milliseconds(5000));
    v1::InfoReply info;
    const std::int64_t sent = unix_now_ns();
    if (const auto status = c.stub->Info(&info_context, v1::InfoRequest(), &info); !status.ok()) {
      parts::fill_status(answer, status);
      return answer;
    }
    c.clock_offset = info.clock_unix_ns() - (sent + unix_now_ns()) / 2;
    c.node_name = info.node_name();
  }
  answer.node_name = c.node_name;
  answer.clock_offset_ns = *c.clock_offset;
  v1::ObserveRequest request;
  request.set_window_ns(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(window).count()));
  request.set_probes(static_cast<std::uint32_t>(std::max(probes, 0)));
  grpc::ClientContext context;
  prepare(context, window + std::chrono::milliseconds(15000));
  v1::ObserveReply reply;
  if (const auto status = c.stub->Observe(&context, request, &reply); !status.ok()) {
    parts::fill_status(answer, status);
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      answer.status = model::NodeState::kRefused;
      answer.error =
          "the agent has no Observe call (a version older than this watcher): upgrade "
          "it; watch never falls back to stopping captures";
    }
    c.clock_offset.reset();  // learned again: the agent may have restarted, or moved
    return answer;
  }
  answer.notes.assign(reply.notes().begin(), reply.notes().end());
  try {
    for (const auto& s : reply.snapshots()) answer.snapshots.push_back(snapshot::decode(s));
  } catch (const Error& e) {
    answer.status = model::NodeState::kError;
    answer.error = std::string("bad answer: ") + e.what();
  }
  return answer;
}

}  // namespace hangscope::agent
