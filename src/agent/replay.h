// `collect --replay`: recorded nodes served as agents would serve them, for benchmarks and
// tests (private to src/agent/). Every file is a node on its own port, found by the port the
// client dialed (the call's authority); thousands of them are served from one process, each
// call held without a thread until its samples are due.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>

#include "hangscope/agent/agent.h"

namespace hangscope::agent {

class Replay {
 public:
  // Reads every file of options.replay_files (file i is served on base_port + i); throws
  // hangscope::Error naming a file that holds no snapshot, or when this process may not open
  // a listening port and a connection per node (RLIMIT_NOFILE).
  Replay(const AgentOptions& options, int base_port);
  ~Replay();
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

  // The service to register: every call of it is answered without blocking a gRPC thread.
  grpc::Service* service();
  std::size_t size() const;
  // Answers every call still waiting for its samples (cancelled) and every later one
  // (unavailable): the server can shut down at once. Called before grpc::Server::Shutdown.
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hangscope::agent
