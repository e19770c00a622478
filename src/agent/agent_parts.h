// What the agent's services (agent.cpp: the real one; replay.cpp: recorded nodes) and its
// clients (agent.cpp's observer, fanout.cpp) share: the checks every request passes, the
// credentials, how a failed call reads as a node's state (private to src/agent/).
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/agent/agent.h"
#include "hangscope/v1/agent.grpc.pb.h"

namespace hangscope::agent::parts {

// "HOST" of "HOST:PORT" or "[V6]:PORT".
std::string host_of(const std::string& address);

// The bearer token a call presented, checked against `token` in constant time ("" = none
// needed); the refusal to return, logged with `method` and the peer, otherwise.
std::optional<grpc::Status> authenticate(const grpc::ServerContextBase& context,
                                         const std::string& token, const char* method);

// The samples a Capture request gets (1 to AgentLimits::kMaxSamples); the note that says it
// was clamped, when it was.
int clamp_samples(const v1::CaptureRequest& request, std::string* note);

// The agent-clock moment of sample 0: the request's start (0 = now). A start in the past
// keeps its grid (samples already due are taken at once) unless it is older than a whole
// capture may last, which is treated as now; a start ahead is bounded by check_capture.
std::int64_t sampling_start(std::int64_t requested, std::int64_t now);

// A request may only narrow what the agent's command line allows (`allowed_pids`: its --pid;
// empty: the ranks it discovers), within bounded time: the refusal otherwise.
std::optional<grpc::Status> check_capture(const v1::CaptureRequest& request, int samples,
                                          std::int64_t now, const std::vector<pid_t>& allowed_pids,
                                          const grpc::ServerContextBase& context);
std::optional<grpc::Status> check_pids(
    const google::protobuf::RepeatedField<google::protobuf::int32>& pids,
    const std::vector<pid_t>& allowed_pids, const char* method,
    const grpc::ServerContextBase& context);

std::shared_ptr<grpc::ServerCredentials> server_credentials(const AgentOptions& options);
// Reads the PEM files once: every channel of a fan-out shares the result.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const CollectRequest& request);

// A failed call as a node's state and error (busy, refused, unreachable, error).
void fill_status(AgentAnswer& answer, const grpc::Status& status);

// Turns off abseil's lock-order tracking, which Debian's abseil keeps on and gRPC's locks pay
// for on every acquisition (about a sixth of a fan-out's CPU to thousands of agents, measured
// with perf): it only ever reports, and hangscope's own locks are not abseil's.
void no_lock_order_tracking();

// Lifts the soft descriptor limit to the hard one; returns the soft limit now in force.
std::uint64_t raise_descriptor_limit();
// Descriptors this process holds now (/proc/self/fd).
std::size_t open_descriptors();

}  // namespace hangscope::agent::parts
