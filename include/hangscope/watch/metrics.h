// The watcher's Prometheus endpoint (`hangscope watch --metrics`): what it sees of every job and
// node, as gauges and counters at /metrics (docs/watch.md names each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hangscope::watch {

struct MetricsOptions {
  // "[HOST:]PORT" (also "[v6]:PORT"); host defaults to 127.0.0.1; port 0 = any free port
  std::string endpoint;
  std::string token;              // when set, scrapes must authenticate (see below)
  std::string token_file;         // where the token came from ("" = environment), for messages
  std::string tls_cert, tls_key;  // PEM files: serve HTTPS
  bool insecure = false;          // allow a non-loopback host without token or TLS
};

// Throws hangscope::Error naming the option and the reason when the options are unusable: a
// non-loopback host without token, TLS or insecure (as `collect` refuses, with the agent's
// token checks), a bad endpoint, tls_cert without tls_key.
// Called before any node is contacted (the CLI turns it into a usage error, exit 2).
//
// What it accepts (docs/watch.md, "Metrics"):
// - endpoint: "PORT", ":PORT", "HOST:PORT" or "[IPv6]:PORT"; HOST is a numeric address or
//   "localhost", never another name (what a name resolves to may change between this check and
//   the bind). IPv6 only where the system's civetweb was built with it (Debian 12's was not).
// - authentication: with a token (the CLI's --metrics-token-file), every scrape needs HTTP
//   basic auth with the token as its password (any user name). A non-loopback host needs the
//   token (at least agent::kMinTokenBytes, its file readable by its owner only) unless
//   `insecure`.
// - TLS (--metrics-tls-cert, --metrics-tls-key): refused on this build. Debian 12's civetweb
//   1.15 loads OpenSSL by the name libssl.so and looks up SSL_get_peer_certificate, which
//   OpenSSL 3 no longer exports: its worker calls a null pointer on the first HTTPS request. A
//   cert without its key (or a key without its cert) is refused first.
// The messages name these options (and --metrics, --insecure).
void check_metrics_options(const MetricsOptions& options);

// What a job's label value becomes: valid UTF-8, at most kMaxLabelBytes bytes; a longer value
// keeps its start and ends with "~" and 8 hex digits of a hash of the whole value, so two long
// keys that share their start stay apart. The same for node names and incident kinds. Values
// of one set_jobs or set_nodes that still come out equal get "~2", "~3", ... appended.
inline constexpr std::size_t kMaxLabelBytes = 128;
std::string metrics_label_value(std::string_view value);

struct JobReading {
  std::string job;  // the job key (label "job")
  double seconds_since_progress = 0;
  int ranks_waiting = 0;
  int ranks_progressing = 0;
};

// Serves /metrics from its own threads (civetweb's) until destroyed; every method may be called
// from any thread, and a scrape sees the state of one moment (never half of a set_jobs).
class Metrics {
 public:
  // Checks the options (check_metrics_options), then listens; throws hangscope::Error naming
  // the endpoint and the reason when it cannot. The server's threads block every asynchronous
  // signal, so a SIGTERM or SIGINT is always delivered to the caller's threads. Note: civetweb
  // sets SIGPIPE to SIG_IGN for the whole process when it starts, and a child inherits that.
  explicit Metrics(const MetricsOptions& options);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;
  int port() const;                                    // the bound port
  std::string endpoint() const;                        // "HOST:PORT" as bound ("[v6]:PORT")
  void set_jobs(const std::vector<JobReading>& jobs);  // replaces all: jobs not given are removed
  void count_incident(std::string_view kind);          // kind label: "hang" | "rank-dead"
  void count_cleared();                                // a suspicion the confirming samples cleared
  // node name -> unreachable now; replaces all
  void set_nodes(const std::map<std::string, bool>& unreachable);
  void polled(std::int64_t unix_ns, double seconds);  // a successful poll: when, how long it took
  void captured(double seconds);  // an incident capture (confirmation) ran, how long

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hangscope::watch
