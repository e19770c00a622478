// The watcher's Prometheus endpoint (`hangscope watch --metrics`): what it sees of every job and
// node, as gauges and counters at /metrics (docs/watch.md names each).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hangscope::watch {

struct MetricsOptions {
  std::string endpoint;           // "[HOST:]PORT" (also "[v6]:PORT"); host 127.0.0.1 by default
  std::string token;              // when set, scrapes must authenticate
  std::string token_file;         // where the token came from ("" = environment), for messages
  std::string tls_cert, tls_key;  // PEM files: serve HTTPS
  bool insecure = false;          // allow a non-loopback host without token or TLS
};

// Throws hangscope::Error naming the option and the reason when the options are unusable.
void check_metrics_options(const MetricsOptions& options);

struct JobReading {
  std::string job;  // the job key (label "job")
  double seconds_since_progress = 0;
  int ranks_waiting = 0;
  int ranks_progressing = 0;
};

class Metrics {
 public:
  // Listens; throws hangscope::Error naming the endpoint and the reason when it cannot.
  explicit Metrics(const MetricsOptions& options);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;
  int port() const;
  void set_jobs(const std::vector<JobReading>& jobs);
  void count_incident(std::string_view kind);
  void count_cleared();
  void set_nodes(const std::map<std::string, bool>& unreachable);
  void polled(std::int64_t unix_ns, double seconds);
  void captured(double seconds);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hangscope::watch
