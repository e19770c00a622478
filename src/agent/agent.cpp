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

namespace hangscope::agent {
namespace {

std::string host_of(const std::string& address) {
  if (!address.empty() && address.front() == '[') return address.substr(1, address.find(']') - 1);
  return address.substr(0, address.rfind(':'));
}

// Compares a presented credential with the expected one in a time that depends on the
// expected one's length only (no early exit at the first differing byte).
bool same_secret(std::string_view presented, std::string_view expected) {
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char p = i < presented.size() ? presented[i] : '\0';
    diff |= static_cast<unsigned char>(p ^ expected[i]);
  }
  return diff == 0;
}

// Recorded snapshots served by --replay: one simulated node per file, found by the port the
// client dialed (the call's authority).
class ReplayNodes {
 public:
  ReplayNodes(const std::vector<std::string>& files, int base_port) : base_port_(base_port) {
    for (const auto& file : files) {
      Node node;
      for (const auto& snapshot : snapshot::read_file(file)) {
        if (node.name.empty()) node.name = snapshot.node_name;
        snapshot::encode(snapshot, node.samples.emplace_back());
      }
      if (node.samples.empty()) throw Error(file + ": no snapshot to replay");
      nodes_.push_back(std::move(node));
    }
  }
  bool empty() const { return nodes_.empty(); }
  std::size_t size() const { return nodes_.size(); }

  struct Node {
    std::string name;
    std::vector<v1::NodeSnapshot> samples;
  };
  // The node behind the port in "host:port" (the authority), or nullptr.
  const Node* find(grpc::string_ref authority) const {
    const std::string text(authority.data(), authority.size());
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return nullptr;
    const long index = std::strtol(text.c_str() + colon + 1, nullptr, 10) - base_port_;
    if (index < 0 || static_cast<std::size_t>(index) >= nodes_.size()) return nullptr;
    return &nodes_[static_cast<std::size_t>(index)];
  }

 private:
  int base_port_;
  std::vector<Node> nodes_;
};

class AgentService final : public v1::Agent::Service {
 public:
  AgentService(const AgentOptions& options, int base_port)
      : options_(options), replay_(options.replay_files, base_port) {}

  grpc::Status Info(grpc::ServerContext* context, const v1::InfoRequest*,
                    v1::InfoReply* reply) override {
    if (auto denied = authenticate(*context, "Info")) return *denied;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    reply->set_node_name(options_.node_name.empty() ? host : options_.node_name);
    if (!replay_.empty()) {
      const auto* node = replay_.find(context->ExperimentalGetAuthority());
      if (node == nullptr) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no replayed node");
      reply->set_node_name(node->name);
    }
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
    const int samples = static_cast<int>(std::clamp<std::uint32_t>(
        request->samples(), 1, static_cast<std::uint32_t>(AgentLimits::kMaxSamples)));
    if (request->samples() > static_cast<std::uint32_t>(AgentLimits::kMaxSamples)) {
      reply->add_notes("asked for " + std::to_string(request->samples()) +
                       " samples; this agent takes at most " +
                       std::to_string(AgentLimits::kMaxSamples) + ", so " +
                       std::to_string(samples) + " were taken");
    }
    const std::int64_t now = unix_now_ns();
    if (auto refused = check_request(*request, samples, now, *context)) return *refused;
    if (!replay_.empty()) return replay(*context, samples, reply);
    capture::NodeCaptureOptions options;
    options.process = options_.capture;
    options.process.locals = request->locals();
    options.process.modules = modules_;  // parsed libraries stay parsed between requests
    options.node_name = options_.node_name;
    options.pids.assign(request->pids().begin(), request->pids().end());
    if (options.pids.empty()) options.pids = options_.pids;
    options.select = options_.select;
    options.log_globs = options_.log_globs;
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
    plan.start_unix_ns = sampling_start(request->start_unix_ns(), now);
    plan.trigger_flight_dumps = options_.trigger_flight_dumps;
    plan.query_store = options_.query_store;
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
    if (auto refused = check_pids(request->pids(), "Observe", *context)) return *refused;
    if (!replay_.empty()) {
      const auto* node = replay_.find(context->ExperimentalGetAuthority());
      if (node == nullptr) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no replayed node");
      *reply->add_snapshots() = node->samples.front();
      *reply->add_snapshots() = node->samples.back();
      return grpc::Status::OK;
    }
    // One observation at a time: a second watcher waits for the first one's window.
    std::unique_lock<std::timed_mutex> lock(observe_mutex_, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::nanoseconds(window) + std::chrono::seconds(5))) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "agent busy: another observation is running");
    }
    capture::ObserveOptions options;
    options.pids.assign(request->pids().begin(), request->pids().end());
    if (options.pids.empty()) options.pids = options_.pids;
    options.select = options_.select;
    options.node_name = options_.node_name;
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
  grpc::Status replay(const grpc::ServerContext& context, int samples, v1::CaptureReply* reply) {
    const auto* node = replay_.find(context.ExperimentalGetAuthority());
    if (node == nullptr) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no replayed node");
    for (int i = 0; i < samples && i < static_cast<int>(node->samples.size()); ++i) {
      *reply->add_snapshots() = node->samples[static_cast<std::size_t>(i)];
    }
    return grpc::Status::OK;
  }

  // The agent-clock moment of sample 0: the request's start (0 = now). A start in the past
  // keeps its grid (samples already due are taken at once) unless it is older than a whole
  // capture may last, which is treated as now; a start ahead is bounded by check_request.
  static std::int64_t sampling_start(std::int64_t requested, std::int64_t now) {
    if (requested <= 0 || requested < now - AgentLimits::kMaxCaptureSpanNs) return now;
    return requested;
  }

  // Sleeps until `due` (agent clock) in short steps; false when the caller went away.
  static bool sleep_until_due(std::int64_t due, const grpc::ServerContext& context) {
    constexpr std::int64_t kStepNs = 100'000'000;
    for (std::int64_t wait = due - unix_now_ns(); wait > 0; wait = due - unix_now_ns()) {
      if (context.IsCancelled()) return false;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(wait, kStepNs)));
    }
    return !context.IsCancelled();
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

  // A request may only narrow what the agent's command line allows, within bounded time.
  std::optional<grpc::Status> check_request(const v1::CaptureRequest& request, int samples,
                                            std::int64_t now, const grpc::ServerContext& context) {
    const auto refuse = [&](grpc::StatusCode code, const std::string& reason) {
      spdlog::warn("Capture: refused {} ({})", context.peer(), reason);
      return grpc::Status(code, reason);
    };
    if (request.interval_ns() > static_cast<std::uint64_t>(AgentLimits::kMaxIntervalNs)) {
      return refuse(grpc::StatusCode::INVALID_ARGUMENT,
                    "interval " + std::to_string(request.interval_ns() / 1'000'000) +
                        " ms is over the agent's limit of 60 s");
    }
    if (request.start_unix_ns() > now + AgentLimits::kMaxStartDelayNs) {
      return refuse(grpc::StatusCode::INVALID_ARGUMENT,
                    "start time is more than 60 s ahead of the agent's clock");
    }
    const std::int64_t span =
        sampling_start(request.start_unix_ns(), now) - now +
        static_cast<std::int64_t>(samples - 1) * static_cast<std::int64_t>(request.interval_ns());
    if (span > AgentLimits::kMaxCaptureSpanNs) {
      return refuse(grpc::StatusCode::INVALID_ARGUMENT,
                    "the samples would span " + std::to_string(span / 1'000'000'000) +
                        " s, over the agent's limit of " +
                        std::to_string(AgentLimits::kMaxCaptureSpanNs / 1'000'000'000) + " s");
    }
    return check_pids(request.pids(), "Capture", context);
  }

  // A request may name only processes the agent's command line allows (its --pid, or the ranks
  // it discovers).
  std::optional<grpc::Status> check_pids(
      const google::protobuf::RepeatedField<google::protobuf::int32>& pids, const char* method,
      const grpc::ServerContext& context) {
    if (pids.empty()) return std::nullopt;
    const std::vector<pid_t> allowed =
        options_.pids.empty() ? capture::discover_processes() : options_.pids;
    for (const pid_t pid : pids) {
      if (std::find(allowed.begin(), allowed.end(), pid) == allowed.end()) {
        const std::string reason =
            "pid " + std::to_string(pid) +
            " is not among the processes this agent may inspect (its --pid, or the ranks it "
            "discovers)";
        spdlog::warn("{}: refused {} ({})", method, context.peer(), reason);
        return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, reason);
      }
    }
    return std::nullopt;
  }

  std::optional<grpc::Status> authenticate(const grpc::ServerContext& context, const char* method) {
    if (options_.token.empty()) return std::nullopt;
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find("authorization");
    const std::string expected = "Bearer " + options_.token;
    if (it != metadata.end() &&
        same_secret(std::string_view(it->second.data(), it->second.size()), expected)) {
      return std::nullopt;
    }
    spdlog::warn("{}: refused {} (missing or wrong token)", method, context.peer());
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong token");
  }

  const AgentOptions& options_;
  ReplayNodes replay_;
  std::shared_ptr<elf::ModuleCache> modules_ = std::make_shared<elf::ModuleCache>();
  std::mutex capture_mutex_;
  std::atomic<int> queued_{0};
  capture::NodeObserver observer_;  // its described processes stay open between observations
  std::timed_mutex observe_mutex_;
};

std::shared_ptr<grpc::ServerCredentials> server_credentials(const AgentOptions& options) {
  if (options.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      options.tls_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                             : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_key_cert_pairs.push_back(
      {read_pem_file(options.tls_key, "--tls-key"), read_pem_file(options.tls_cert, "--tls-cert")});
  if (!options.tls_ca.empty()) ssl.pem_root_certs = read_pem_file(options.tls_ca, "--tls-ca");
  return grpc::SslServerCredentials(ssl);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const CollectRequest& request) {
  if (request.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_pem_file(request.tls_ca, "--tls-ca");
  if (!request.tls_cert.empty()) {
    ssl.pem_cert_chain = read_pem_file(request.tls_cert, "--tls-cert");
    ssl.pem_private_key = read_pem_file(request.tls_key, "--tls-key");
  }
  return grpc::SslCredentials(ssl);
}

constexpr std::chrono::milliseconds kFirstBusyPause{500};

void fill_status(AgentAnswer& answer, const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::RESOURCE_EXHAUSTED:  // busy with other captures, after retries
      answer.status = model::NodeState::kBusy;
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::INVALID_ARGUMENT:
      answer.status = model::NodeState::kRefused;
      break;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      answer.status = model::NodeState::kUnreachable;
      break;
    default:
      answer.status = model::NodeState::kError;
  }
  answer.error = status.error_message().empty()
                     ? "gRPC status " + std::to_string(status.error_code())
                     : status.error_message();
}

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

// Lifts the soft descriptor limit to the hard one: every connection holds a descriptor, and
// an agent out of them cannot accept (the self-check below restarts one that stays so).
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::debug("descriptor limit raised from {} to {}", before, limit.rlim_cur);
  }
}

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
  raise_descriptor_limit();
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
  AgentService service(options, base_port);
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
  const auto credentials = server_credentials(options);
  builder.AddListeningPort(options.listen, credentials, &port);
  std::vector<int> replay_ports(options.replay_files.size(), 0);
  for (std::size_t i = 1; i < options.replay_files.size(); ++i) {
    builder.AddListeningPort(host_of(options.listen) + ":" + std::to_string(base_port + i),
                             credentials, &replay_ports[i]);
  }
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) throw Error(bind_failure(options.listen, base_port));
  for (std::size_t i = 1; i < replay_ports.size(); ++i) {
    if (replay_ports[i] == 0) {
      const int replay_port = base_port + static_cast<int>(i);
      throw Error(
          bind_failure(host_of(options.listen) + ":" + std::to_string(replay_port), replay_port) +
          " for --replay");
    }
  }
  if (!options.replay_files.empty()) {
    spdlog::info("replaying {} recorded node(s) on ports {}-{}", options.replay_files.size(),
                 base_port, base_port + options.replay_files.size() - 1);
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
  std::printf("listening on %s\n", (host_of(options.listen) + ":" + std::to_string(port)).c_str());
  std::fflush(stdout);
  if (ready) ready(port);
  SelfCheck self_check(AcceptProbe(options.listen, port), options.self_check_interval,
                       ::pthread_self());
  int signal = 0;
  sigwait(&stop_signals, &signal);
  self_check.stop();
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

AgentAnswer collect_from(const std::string& raw_address, const CollectRequest& request) {
  AgentAnswer answer;
  answer.address = normalize_address(raw_address);
  std::shared_ptr<grpc::Channel> channel;
  try {
    channel = grpc::CreateChannel(answer.address, channel_credentials(request));
  } catch (const Error& e) {
    answer.status = model::NodeState::kError;
    answer.error = e.what();
    return answer;
  }
  auto stub = v1::Agent::NewStub(channel);
  const auto prepare = [&](grpc::ClientContext& context, std::chrono::milliseconds deadline) {
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    if (!request.token.empty()) context.AddMetadata("authorization", "Bearer " + request.token);
  };
  // Info first: the agent's clock, so that every node samples at the same moment.
  grpc::ClientContext info_context;
  prepare(info_context, std::chrono::milliseconds(5000));
  v1::InfoReply info;
  const std::int64_t sent = unix_now_ns();
  if (const auto status = stub->Info(&info_context, v1::InfoRequest(), &info); !status.ok()) {
    fill_status(answer, status);
    return answer;
  }
  const std::int64_t received = unix_now_ns();
  const std::int64_t offset = info.clock_unix_ns() - (sent + received) / 2;
  answer.node_name = info.node_name();
  answer.clock_offset_ns = offset;

  v1::CaptureRequest capture;
  capture.set_samples(static_cast<std::uint32_t>(request.samples));
  capture.set_interval_ns(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(request.interval).count()));
  const std::int64_t start =
      std::chrono::duration_cast<std::chrono::nanoseconds>(request.start.time_since_epoch())
          .count();
  capture.set_start_unix_ns(start == 0 ? 0 : start + offset);
  capture.set_locals(request.locals);
  // A busy agent (other captures queued) is asked again after a pause, within the deadline.
  const auto give_up = std::chrono::steady_clock::now() + request.deadline;
  v1::CaptureReply reply;
  for (auto pause = kFirstBusyPause;; pause *= 2) {
    grpc::ClientContext capture_context;
    prepare(capture_context, std::chrono::duration_cast<std::chrono::milliseconds>(
                                 give_up - std::chrono::steady_clock::now()));
    reply.Clear();
    const auto status = stub->Capture(&capture_context, capture, &reply);
    if (status.ok()) break;
    const bool retry = status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                       std::chrono::steady_clock::now() + pause < give_up - pause;
    if (!retry) {
      fill_status(answer, status);
      return answer;
    }
    std::this_thread::sleep_for(pause);
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
    c.stub = v1::Agent::NewStub(grpc::CreateChannel(c.address, channel_credentials(c.credentials)));
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
      fill_status(answer, status);
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
    fill_status(answer, status);
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
