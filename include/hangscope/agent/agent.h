// The agent (`hangscope collect`): a gRPC server that captures this node on request, and the
// client the coordinator (`hangscope diagnose`) uses to ask it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/agent/credentials.h"
#include "hangscope/capture/node_capture.h"
#include "hangscope/capture/node_observer.h"
#include "hangscope/capture/process_selection.h"
#include "hangscope/model/bundle.h"

namespace hangscope::agent {

inline constexpr int kDefaultPort = 7447;

// What a client may ask of an agent. The agent's command line fixes which processes and logs
// may be read; a request can only narrow that, and its size and duration are bounded.
struct AgentLimits {
  static constexpr int kMaxSamples = 100;
  static constexpr std::int64_t kMaxIntervalNs = 60'000'000'000;  // between samples
  static constexpr std::int64_t kMaxStartDelayNs = 60'000'000'000;
  // From the request to its last sample: a longer request is refused, so no request holds the
  // agent (or a slot of its queue) for long.
  static constexpr std::int64_t kMaxCaptureSpanNs = 600'000'000'000;
  static constexpr int kMaxQueuedCaptures = 8;  // beyond: refused as busy, not queued
  static constexpr int kMaxServerThreads = 32;
  static constexpr int kMaxRequestBytes = 64 * 1024;
  // Observe (watch mode): its window and the probes in it.
  static constexpr std::int64_t kMaxObserveWindowNs = 10'000'000'000;
  static constexpr int kMaxObserveProbes = 64;
};

struct AgentOptions {
  std::string listen = "127.0.0.1:7447";
  std::string token;       // required for a non-loopback listener unless insecure or TLS
  std::string token_file;  // where the token came from (its mode is checked); "" = environment
  bool insecure = false;
  std::string tls_cert, tls_key, tls_ca;  // PEM files; tls_ca requires client certificates
  // --pid, --select, --node-name: what may be captured (a request may only narrow the pids).
  capture::ProcessSelection selection;
  capture::CaptureOptions capture;
  // --log, --trigger-fr-dump, --query-store (fresh dumps and store keys on the last sample).
  capture::ExtraEvidence evidence;
  // --replay: serve these recorded snapshot files instead of capturing, file i on the listen
  // port + i (each a simulated node with its own endpoint; for benchmarks and tests).
  std::vector<std::string> replay_files;
  // --replay: every node refuses its first N Capture calls as busy (HANGSCOPE_REPLAY_BUSY_CALLS;
  // tests of the coordinator's retries).
  long replay_busy_calls = 0;
  // How often the agent checks that it still accepts connections (0 = never); after three
  // failed checks in a row it exits 1 to be restarted (HANGSCOPE_AGENT_SELF_CHECK_MS).
  std::chrono::milliseconds self_check_interval{15000};
};

// Checks the options and credential files (a non-loopback listener needs a token of at least
// kMinTokenBytes in a file only its owner reads, or client certificates over TLS, or
// --insecure); throws hangscope::Error with the reason. Returns what the credentials give.
CredentialCheck validate(const AgentOptions& options);

// Serves until SIGINT or SIGTERM; returns the exit code. `ready` (optional) is called with the
// bound port once the server accepts connections.
int serve(const AgentOptions& options, const std::function<void(int port)>& ready = {});

// What one agent answered.
struct AgentAnswer {
  std::string address;
  model::NodeState status = model::NodeState::kOk;
  std::string error;
  std::vector<std::string> notes;  // what the agent said it changed in the request
  std::string node_name;
  std::int64_t clock_offset_ns = 0;  // agent clock minus coordinator clock, from Info
  std::vector<model::NodeSnapshot> snapshots;
};

struct CollectRequest {
  std::string token;
  std::string tls_ca, tls_cert, tls_key;
  int samples = 1;
  std::chrono::milliseconds interval{1000};
  // Every node takes sample 0 at one moment of the coordinator's clock, chosen once every
  // agent has told its clock (Info): `min_lead` ahead at least, kCaptureSendCost per node, and
  // one and a half times the clock pass, so that every node has its Capture request before it.
  std::chrono::milliseconds min_lead{500};
  // How long an answer may take once the last sample is due (the capture and the transfer).
  std::chrono::milliseconds answer_within{30000};
  bool locals = false;
};

// The coordinator's cost of sending one node its Capture request, with a margin: on 2 shared,
// loaded cores, `collect --replay` of 2,048 to 16,384 nodes took 30 to 150 us per node from the
// first request sent to the last one taken in (tools/bench/notes.md). Sample 0 is set at least
// this much per node ahead of the moment it is chosen (and one and a half times the clock pass,
// which measures the same on the network at hand).
inline constexpr std::chrono::microseconds kCaptureSendCost{150};

// How a fan-out went (collect_all).
struct FanoutTimes {
  std::size_t asked = 0;                         // nodes sent a Capture request
  std::chrono::system_clock::time_point start;   // sample 0, the coordinator's clock
  std::chrono::nanoseconds clocks{0};            // reading every agent's clock (Info)
  std::chrono::nanoseconds lead{0};              // from choosing the start to it
  std::chrono::nanoseconds sent{0};              // from choosing it to the last request sent
  std::chrono::nanoseconds worst_round_trip{0};  // of the Info each clock offset came from
  std::size_t descriptor_limit = 0;              // RLIMIT_NOFILE's soft limit, raised
};

// What collect_all tells as it goes; calls come one at a time, from any of its threads.
class FanoutListener {
 public:
  virtual ~FanoutListener() = default;
  // Another agent told its clock, or could not be asked (`done` of `total`).
  virtual void clock_read(std::size_t /*done*/, std::size_t /*total*/) {}
  // The start was chosen and every Capture request sent.
  virtual void sampling(const FanoutTimes& /*times*/) {}
  // One node's answer, complete (`done` of `total`).
  virtual void answered(const AgentAnswer& /*answer*/, std::size_t /*done*/,
                        std::size_t /*total*/) {}
  // Something that changes what is asked (too few descriptors for every node).
  virtual void warning(const std::string& /*message*/) {}
};

// Asks every agent at once, from one thread over one completion queue, one connection each:
// first every connection (an Info call, 256 nodes at a time), then every agent's clock over its
// open connection (another Info, 16 at a time; the offset comes from the quicker round trip),
// then sample 0 is set (see CollectRequest::min_lead) and every node is sent its Capture request
// at once; a busy agent is asked again, with pauses, until its deadline. Each reply is decoded as
// it arrives, off that thread. Every address is an answer, in order: one that did not answer
// says why. Never throws for network problems.
std::vector<AgentAnswer> collect_all(const std::vector<std::string>& addresses,
                                     const CollectRequest& request, FanoutListener& listener,
                                     FanoutTimes* times = nullptr);

// A watcher's connection to one agent (`hangscope watch`): one channel kept open between calls,
// the agent's clock offset learned on the first call (and again after a failure), and the
// non-stopping Observe call. Not thread-safe: one call at a time per agent.
class AgentObserver {
 public:
  // `credentials`: token and TLS files as for collect_all (its sampling fields are unused).
  AgentObserver(const std::string& address, CollectRequest credentials);
  ~AgentObserver();
  AgentObserver(const AgentObserver&) = delete;
  AgentObserver& operator=(const AgentObserver&) = delete;

  const std::string& address() const;
  // One observation of `window` with `probes` reads in it: the answer's snapshots are the
  // window's first and last reads. Never throws for network problems (they are the answer's
  // status); an agent without Observe (an older version) answers kRefused with a reason that
  // says so.
  AgentAnswer observe(std::chrono::milliseconds window, int probes);

 private:
  struct Connection;
  std::unique_ptr<Connection> connection_;
};

// "host", "host:port", "[v6]:port" → "host:port" with the default port filled in.
std::string normalize_address(const std::string& address);

}  // namespace hangscope::agent
