#include "hangscope/watch/metrics.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "hangscope/agent/credentials.h"
#include "hangscope/common/address.h"
#include "hangscope/common/error.h"
#include "hangscope/common/text.h"

namespace hangscope::watch {

// Where to listen, as parsed from MetricsOptions::endpoint. Outside the anonymous namespace:
// Metrics::State (declared in the header) holds one, and GCC warns of a member whose type has
// internal linkage when this file is compiled into a unity source (the TSan build).
struct MetricsEndpoint {
  std::string host;  // numeric, without brackets
  int port = 0;
  bool v6() const { return host.find(':') != std::string::npos; }
  std::string with_port(int bound) const {
    return (v6() ? "[" + host + "]" : host) + ":" + std::to_string(bound);
  }
};

namespace {

using Endpoint = MetricsEndpoint;

// mg_check_feature's bit for IPv6 (civetweb.h documents the numbers, names none).
constexpr unsigned kCivetwebIpv6 = 8;
constexpr const char* kIncidentKinds[] = {"hang", "rank-dead"};
constexpr auto kRefusalLogInterval = std::chrono::minutes(1);

Endpoint parse_endpoint(const std::string& text) {
  const std::string named = "--metrics " + printable(text);
  if (text.empty()) throw Error("--metrics: no endpoint given ([HOST:]PORT)");
  const bool bare_port =
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  HostPort split = bare_port ? HostPort{"", text} : split_endpoint(text);
  if (split.port.empty()) {
    throw Error(named + ": no port (write [HOST:]PORT, or [ADDRESS]:PORT for IPv6)");
  }
  const bool digits =
      split.port.size() <= 5 && std::all_of(split.port.begin(), split.port.end(),
                                            [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoi(split.port) > 65535) {
    throw Error(named + ": the port " + printable(split.port) +
                " is not a number from 0 to 65535 (0: any free port)");
  }
  Endpoint out{split.host, std::stoi(split.port)};
  if (out.host.empty() || out.host == "localhost") out.host = "127.0.0.1";
  if (!is_ip_literal(out.host)) {
    throw Error(named + ": " + printable(out.host) +
                " is not a numeric address: give one (127.0.0.1, 0.0.0.0, this node's address) "
                "or localhost; a name is not resolved, since what it resolves to may change");
  }
  if (out.v6() && mg_check_feature(kCivetwebIpv6) == 0) {
    throw Error(named +
                ": IPv6 is not available: this system's civetweb (the HTTP server of "
                "prometheus-cpp) was built without it; give an IPv4 address (127.0.0.1, 0.0.0.0)");
  }
  return out;
}

std::uint32_t fnv1a(std::string_view text) {
  std::uint32_t hash = 2166136261u;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619u;
  }
  return hash;
}

// Label values, each distinct: a value that comes out equal to an earlier one (two keys that
// differ only in bytes that are not UTF-8) gets "~2", "~3", ... after it.
std::vector<std::string> distinct_labels(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& value : raw) {
    std::string label = metrics_label_value(value);
    for (int n = 2; seen.count(label) != 0; ++n) {
      label = metrics_label_value(value) + "~" + std::to_string(n);
    }
    seen.insert(label);
    out.push_back(std::move(label));
  }
  return out;
}

prometheus::ClientMetric gauge(double value, std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return metric;
}

prometheus::ClientMetric counter(double value,
                                 std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = value;
  return metric;
}

prometheus::MetricFamily family(const char* name, const char* help, prometheus::MetricType type,
                                std::vector<prometheus::ClientMetric> metrics) {
  return {name, help, type, std::move(metrics)};
}

// Every civetweb log line: while the server starts (on the thread that starts it) kept for the
// error message, later to the debug log.
thread_local std::string* startup_messages = nullptr;
int civetweb_log(const mg_connection*, const char* message) {
  if (startup_messages != nullptr) {
    if (!startup_messages->empty()) *startup_messages += "; ";
    *startup_messages += trim(message);
  } else {
    spdlog::debug("metrics endpoint: {}", printable(trim(message)));
  }
  return 1;  // handled: civetweb writes it nowhere else
}

// Why binding `endpoint` fails, found by trying it (civetweb names no reason when it cannot).
std::string bind_error(const Endpoint& endpoint) {
  const int family = endpoint.v6() ? AF_INET6 : AF_INET;
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_message("socket", errno);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as civetweb does
  int rc = -1;
  if (endpoint.v6()) {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_port = htons(static_cast<std::uint16_t>(endpoint.port));
    ::inet_pton(AF_INET6, endpoint.host.c_str(), &address.sin6_addr);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(endpoint.port));
    ::inet_pton(AF_INET, endpoint.host.c_str(), &address.sin_addr);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  }
  const int err = errno;
  ::close(fd);
  return rc == 0 ? "" : errno_message("bind", err);
}

// Opens and closes a connection to the server: civetweb's master thread polls its listening
// socket in 2 s quanta and sees that it should stop only when the poll returns.
void knock(const Endpoint& endpoint, int port) {
  std::string host = endpoint.host;
  if (is_unspecified_ip(host)) host = endpoint.v6() ? "::1" : "127.0.0.1";
  const int fd =
      ::socket(endpoint.v6() ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return;
  if (endpoint.v6()) {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET6, host.c_str(), &address.sin6_addr);
    ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
    ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  }
  ::close(fd);
}

}  // namespace

std::string metrics_label_value(std::string_view value) {
  std::string out = valid_utf8(value);
  if (out.size() <= kMaxLabelBytes) return out;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "~%08x", static_cast<unsigned>(fnv1a(value)));
  std::size_t cut = kMaxLabelBytes - std::string_view(suffix).size();
  // Back to the start of a character: continuation bytes are 10xxxxxx.
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  return out + suffix;
}

void check_metrics_options(const MetricsOptions& options) {
  const Endpoint endpoint = parse_endpoint(options.endpoint);
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    throw Error(std::string(options.tls_cert.empty()
                                ? "--metrics-tls-key without --metrics-tls-cert"
                                : "--metrics-tls-cert without --metrics-tls-key") +
                ": a TLS certificate and its key go together");
  }
  if (!options.tls_cert.empty()) {
    throw Error(
        "--metrics-tls-cert: TLS is not available: this system's civetweb (the HTTP server of "
        "prometheus-cpp; Debian 12's 1.15) cannot serve HTTPS with OpenSSL 3 (it looks up "
        "SSL_get_peer_certificate, which OpenSSL 3 no longer exports). Serve the metrics on "
        "loopback, or with --metrics-token-file behind a TLS-terminating proxy (docs/watch.md, "
        "\"Metrics\")");
  }
  if (is_loopback_host(endpoint.host) || options.insecure) return;
  const std::string where = "refusing to serve --metrics on " + endpoint.with_port(endpoint.port);
  if (options.token.empty()) {
    throw Error(where +
                " without authentication: give --metrics-token-file (scrapes then need HTTP "
                "basic auth with the token as the password), listen on 127.0.0.1, or "
                "--insecure");
  }
  // The agent's token checks: its length, and a token file only its owner reads. Their
  // messages name the agent's option; here the file is --metrics-token-file's.
  const agent::CredentialCheck check =
      agent::check_server_credentials({"", "", "", options.token, options.token_file});
  if (!check.weaknesses.empty()) {
    std::string weakness = check.weaknesses.front();
    const std::string agent_option = "--token-file ";
    if (weakness.rfind(agent_option, 0) == 0) {
      weakness = "--metrics-token-file " + weakness.substr(agent_option.size());
    }
    throw Error(where + ": " + weakness + " (or --insecure)");
  }
}

// What a scrape reads: the state of one moment, under one lock.
class Collector : public prometheus::Collectable {
 public:
  Collector() {
    for (const char* kind : kIncidentKinds) incidents_[kind] = 0;
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    const std::lock_guard lock(mutex_);
    std::vector<prometheus::ClientMetric> since, waiting, progressing;
    for (const auto& job : jobs_) {
      since.push_back(gauge(job.seconds_since_progress, {{"job", job.job}}));
      waiting.push_back(gauge(job.ranks_waiting, {{"job", job.job}}));
      progressing.push_back(gauge(job.ranks_progressing, {{"job", job.job}}));
    }
    std::vector<prometheus::ClientMetric> incidents, nodes;
    for (const auto& [kind, count] : incidents_)
      incidents.push_back(counter(count, {{"kind", kind}}));
    double unreachable = 0;
    for (const auto& [node, down] : nodes_) {
      nodes.push_back(gauge(down ? 1 : 0, {{"node", node}}));
      unreachable += down ? 1 : 0;
    }
    return {
        family("hangscope_watch_job_seconds_since_progress",
               "Seconds since the job last progressed (a collective completed or a wait ended)",
               MetricType::Gauge, std::move(since)),
        family("hangscope_watch_job_ranks_waiting", "Ranks of the job waiting at the last poll",
               MetricType::Gauge, std::move(waiting)),
        family("hangscope_watch_job_ranks_progressing",
               "Ranks of the job progressing at the last poll", MetricType::Gauge,
               std::move(progressing)),
        family("hangscope_watch_jobs", "Jobs watched", MetricType::Gauge,
               {gauge(static_cast<double>(jobs_.size()), {})}),
        family("hangscope_watch_incidents_total", "Incidents (a bundle written), by kind",
               MetricType::Counter, std::move(incidents)),
        family("hangscope_watch_suspicions_cleared_total",
               "Suspicions the confirming samples cleared (no incident)", MetricType::Counter,
               {counter(cleared_, {})}),
        family("hangscope_watch_captures_total", "Incident captures (confirming samples) run",
               MetricType::Counter, {counter(captures_, {})}),
        family("hangscope_watch_capture_seconds", "Duration of the last incident capture",
               MetricType::Gauge, {gauge(capture_seconds_, {})}),
        family("hangscope_watch_node_unreachable",
               "1 when the node's agent did not answer the last poll, else 0", MetricType::Gauge,
               std::move(nodes)),
        family("hangscope_watch_nodes_unreachable",
               "Nodes whose agent did not answer the last poll", MetricType::Gauge,
               {gauge(unreachable, {})}),
        family("hangscope_watch_last_poll_timestamp_seconds",
               "Unix time of the last successful poll (0: none yet)", MetricType::Gauge,
               {gauge(last_poll_seconds_, {})}),
        family("hangscope_watch_poll_seconds", "Duration of the last successful poll",
               MetricType::Gauge, {gauge(poll_seconds_, {})}),
        family("hangscope_watch_polls_total", "Successful polls", MetricType::Counter,
               {counter(polls_, {})}),
    };
  }

  void set_jobs(const std::vector<JobReading>& jobs) {
    std::vector<std::string> keys;
    for (const auto& job : jobs) keys.push_back(job.job);
    const auto labels = distinct_labels(keys);
    std::vector<JobReading> readings = jobs;
    for (std::size_t i = 0; i < readings.size(); ++i) readings[i].job = labels[i];
    const std::lock_guard lock(mutex_);
    jobs_ = std::move(readings);
  }
  void set_nodes(const std::map<std::string, bool>& unreachable) {
    std::vector<std::string> names;
    for (const auto& entry : unreachable) names.push_back(entry.first);
    const auto labels = distinct_labels(names);
    std::vector<std::pair<std::string, bool>> nodes;
    std::size_t i = 0;
    for (const auto& entry : unreachable) nodes.emplace_back(labels[i++], entry.second);
    const std::lock_guard lock(mutex_);
    nodes_ = std::move(nodes);
  }
  void count_incident(std::string_view kind) {
    const std::string label = metrics_label_value(kind);
    const std::lock_guard lock(mutex_);
    incidents_[label] += 1;
  }
  void count_cleared() {
    const std::lock_guard lock(mutex_);
    cleared_ += 1;
  }
  void polled(std::int64_t unix_ns, double seconds) {
    const std::lock_guard lock(mutex_);
    last_poll_seconds_ = static_cast<double>(unix_ns) / 1e9;
    poll_seconds_ = seconds;
    polls_ += 1;
  }
  void captured(double seconds) {
    const std::lock_guard lock(mutex_);
    captures_ += 1;
    capture_seconds_ = seconds;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<JobReading> jobs_;  // label values already
  std::map<std::string, double> incidents_;
  std::vector<std::pair<std::string, bool>> nodes_;
  double cleared_ = 0, captures_ = 0, capture_seconds_ = 0;
  double last_poll_seconds_ = 0, poll_seconds_ = 0, polls_ = 0;
};

struct Metrics::State {
  MetricsEndpoint endpoint;
  int port = 0;
  std::shared_ptr<Collector> collector = std::make_shared<Collector>();
  // After the collector: destroyed first, so no scrape runs while the collector goes.
  std::unique_ptr<prometheus::Exposer> exposer;
};

Metrics::Metrics(const MetricsOptions& options) : state_(std::make_unique<State>()) {
  check_metrics_options(options);
  state_->endpoint = parse_endpoint(options.endpoint);
  const Endpoint& endpoint = state_->endpoint;
  const std::string named = endpoint.with_port(endpoint.port);
  const std::vector<std::string> civetweb_options = {
      "listening_ports",    named,
      "num_threads",        "2",  // a scrape is a few kilobytes; more scrapers queue
      "request_timeout_ms", "10000",
      "enable_keep_alive",  "no",
  };
  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c;
    c.log_message = civetweb_log;
    return c;
  }();

  // The server's threads inherit this thread's signal mask: block every asynchronous signal
  // while they start, so that none of them ever takes a SIGTERM meant for the watcher.
  sigset_t all, previous;
  sigfillset(&all);
  for (const int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) {
    sigdelset(&all, synchronous);
  }
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  std::string messages;
  startup_messages = &messages;
  std::string failure;
  try {
    state_->exposer = std::make_unique<prometheus::Exposer>(civetweb_options, &callbacks);
  } catch (const std::exception& e) {
    failure = messages.empty() ? e.what() : messages;
  }
  startup_messages = nullptr;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!state_->exposer) {
    const std::string reason = bind_error(endpoint);
    throw Error("--metrics " + named + ": cannot listen: " + (reason.empty() ? failure : reason));
  }
  const auto ports = state_->exposer->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    throw Error("--metrics " + named + ": cannot listen: civetweb reports no bound port");
  }
  state_->port = ports.front();
  // Authentication first: /metrics serves nothing of ours until it is in place.
  if (!options.token.empty()) {
    auto last_refusal = std::make_shared<std::atomic<std::int64_t>>(0);
    state_->exposer->RegisterAuth(
        [token = options.token, last_refusal](const std::string&, const std::string& password) {
          if (agent::same_secret(password, token)) return true;
          const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
          auto last = last_refusal->load();
          const auto interval =
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(kRefusalLogInterval)
                  .count();
          if ((last == 0 || now - last >= interval) &&
              last_refusal->compare_exchange_strong(last, now)) {
            spdlog::warn(
                "metrics endpoint: refused a scrape with a wrong password (logged at most once a "
                "minute)");
          }
          return false;
        },
        "hangscope");
  }
  state_->exposer->RegisterCollectable(state_->collector);

  const std::string bound = endpoint.with_port(state_->port);
  if (!is_loopback_host(endpoint.host)) {
    if (options.token.empty()) {
      spdlog::warn(
          "metrics on {} without authentication (--insecure): anyone who can reach this port "
          "can read the job and node names",
          bound);
    } else {
      spdlog::warn(
          "metrics on {}: the token travels in clear text (HTTP basic auth without TLS); keep "
          "the port on a trusted network or behind a TLS proxy",
          bound);
    }
  }
  if (!options.token.empty() && options.token.size() < agent::kMinTokenBytes) {
    spdlog::warn("metrics token is {} bytes; use at least {}", options.token.size(),
                 agent::kMinTokenBytes);
  }
  spdlog::info("metrics on http://{}/metrics{}", bound,
               options.token.empty() ? "" : " (basic auth, the token as password)");
}

Metrics::~Metrics() {
  // Stopping waits for civetweb's master thread, which notices only when its poll of the
  // listening socket returns (every 2 s): knock until the server is gone, so the watcher stops
  // in milliseconds.
  std::atomic<bool> stopped = false;
  std::thread knocker([&] {
    while (!stopped) {
      knock(state_->endpoint, state_->port);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  state_->exposer.reset();
  stopped = true;
  knocker.join();
}

int Metrics::port() const {
  return state_->port;
}

std::string Metrics::endpoint() const {
  return state_->endpoint.with_port(state_->port);
}

void Metrics::set_jobs(const std::vector<JobReading>& jobs) {
  state_->collector->set_jobs(jobs);
}

void Metrics::count_incident(std::string_view kind) {
  state_->collector->count_incident(kind);
}

void Metrics::count_cleared() {
  state_->collector->count_cleared();
}

void Metrics::set_nodes(const std::map<std::string, bool>& unreachable) {
  state_->collector->set_nodes(unreachable);
}

void Metrics::polled(std::int64_t unix_ns, double seconds) {
  state_->collector->polled(unix_ns, seconds);
}

void Metrics::captured(double seconds) {
  state_->collector->captured(seconds);
}

}  // namespace hangscope::watch
