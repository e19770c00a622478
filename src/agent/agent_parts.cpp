#include "agent_parts.h"

#include <absl/synchronization/mutex.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "hangscope/agent/credentials.h"
#include "hangscope/capture/node_capture.h"

namespace hangscope::agent::parts {

std::string host_of(const std::string& address) {
  if (!address.empty() && address.front() == '[') return address.substr(1, address.find(']') - 1);
  return address.substr(0, address.rfind(':'));
}

std::optional<grpc::Status> authenticate(const grpc::ServerContextBase& context,
                                         const std::string& token, const char* method) {
  if (token.empty()) return std::nullopt;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const std::string expected = "Bearer " + token;
  if (it != metadata.end() &&
      same_secret(std::string_view(it->second.data(), it->second.size()), expected)) {
    return std::nullopt;
  }
  spdlog::warn("{}: refused {} (missing or wrong token)", method, context.peer());
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong token");
}

int clamp_samples(const v1::CaptureRequest& request, std::string* note) {
  const int samples = static_cast<int>(std::clamp<std::uint32_t>(
      request.samples(), 1, static_cast<std::uint32_t>(AgentLimits::kMaxSamples)));
  if (request.samples() > static_cast<std::uint32_t>(AgentLimits::kMaxSamples)) {
    *note = "asked for " + std::to_string(request.samples()) +
            " samples; this agent takes at most " + std::to_string(AgentLimits::kMaxSamples) +
            ", so " + std::to_string(samples) + " were taken";
  }
  return samples;
}

std::int64_t sampling_start(std::int64_t requested, std::int64_t now) {
  if (requested <= 0 || requested < now - AgentLimits::kMaxCaptureSpanNs) return now;
  return requested;
}

std::optional<grpc::Status> check_capture(const v1::CaptureRequest& request, int samples,
                                          std::int64_t now, const std::vector<pid_t>& allowed_pids,
                                          const grpc::ServerContextBase& context) {
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
  return check_pids(request.pids(), allowed_pids, "Capture", context);
}

std::optional<grpc::Status> check_pids(
    const google::protobuf::RepeatedField<google::protobuf::int32>& pids,
    const std::vector<pid_t>& allowed_pids, const char* method,
    const grpc::ServerContextBase& context) {
  if (pids.empty()) return std::nullopt;
  const std::vector<pid_t> allowed =
      allowed_pids.empty() ? capture::discover_processes() : allowed_pids;
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

void no_lock_order_tracking() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

std::uint64_t raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      spdlog::debug("descriptor limit raised from {} to {}", before, limit.rlim_cur);
    } else {
      limit.rlim_cur = before;
    }
  }
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<std::uint64_t>(limit.rlim_cur);
}

std::size_t open_descriptors() {
  std::error_code error;
  std::size_t count = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++count;
  }
  return count;
}

}  // namespace hangscope::agent::parts
