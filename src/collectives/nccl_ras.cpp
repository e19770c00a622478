#include "hangscope/collectives/nccl_ras.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "hangscope/common/error.h"

namespace hangscope::collectives {
namespace {

// The protocol version NCCL's ncclras client announces (NCCL_RAS_CLIENT_PROTOCOL).
constexpr int kClientProtocol = 2;
constexpr std::size_t kMaxReport = 1u << 20;
constexpr std::size_t kMaxLine = 4096;

using Clock = std::chrono::steady_clock;

// A connected socket with a deadline for every operation; closes itself.
class RasConnection {
 public:
  RasConnection(const RasEndpoint& endpoint, Clock::time_point deadline) : deadline_(deadline) {
    sockaddr_storage address{};
    socklen_t length = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
    if (::inet_pton(AF_INET, endpoint.host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(static_cast<std::uint16_t>(endpoint.port));
      length = sizeof *v4;
    } else if (::inet_pton(AF_INET6, endpoint.host.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(static_cast<std::uint16_t>(endpoint.port));
      length = sizeof *v6;
    } else {
      throw Error("NCCL_RAS_ADDR host " + endpoint.host + " is not an IP address");
    }
    fd_ = ::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw_errno("socket", errno);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 &&
        errno != EINPROGRESS) {
      const int err = errno;
      ::close(fd_);
      throw Error(
          errno_message("cannot connect to NCCL RAS at " + endpoint.text(), err) +
          (err == ECONNREFUSED ? " (no NCCL job with RAS on this node, or RAS disabled)" : ""));
    }
    try {
      wait_for(POLLOUT, "connecting");
    } catch (const Error&) {
      ::close(fd_);  // the destructor does not run for a constructor that throws
      throw;
    }
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0) {
      ::close(fd_);
      throw Error(
          errno_message("cannot connect to NCCL RAS at " + endpoint.text(), error) +
          (error == ECONNREFUSED ? " (no NCCL job with RAS on this node, or RAS disabled)" : ""));
    }
  }
  RasConnection(const RasConnection&) = delete;
  RasConnection& operator=(const RasConnection&) = delete;
  ~RasConnection() { ::close(fd_); }

  void send(const std::string& message) {
    std::size_t done = 0;
    while (done < message.size()) {
      wait_for(POLLOUT, "sending " + first_word(message));
      const ssize_t n = ::send(fd_, message.data() + done, message.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno != EINTR && errno != EAGAIN) {
        throw_errno("NCCL RAS: sending " + first_word(message), errno);
      }
      if (n > 0) done += static_cast<std::size_t>(n);
    }
  }

  // One reply line (without its newline); throws when the server closes first.
  std::string line(const std::string& waiting_for) {
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string out = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return out;
      }
      if (buffer_.size() > kMaxLine) throw Error("NCCL RAS: a reply line longer than 4 KiB");
      if (!fill(waiting_for)) {
        throw Error("NCCL RAS closed the connection while " + waiting_for +
                    (buffer_.empty() ? "" : " (partial reply: " + buffer_ + ")"));
      }
    }
  }

  // Everything until the server closes (the STATUS report), capped.
  std::string rest(std::string& error) {
    try {
      while (buffer_.size() < kMaxReport && fill("reading the STATUS report")) {
      }
    } catch (const Error& e) {
      error = e.what();
    }
    if (buffer_.size() >= kMaxReport) error = "NCCL RAS report longer than 1 MiB: cut";
    return std::move(buffer_);
  }

 private:
  static std::string first_word(const std::string& message) {
    return message.substr(0, message.find_first_of(" \n"));
  }

  void wait_for(short events, const std::string& what) {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) throw Error("NCCL RAS did not answer in time (" + what + ")");
      pollfd p{fd_, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left));
      if (n > 0) return;
      if (n < 0 && errno != EINTR) throw_errno("NCCL RAS: poll", errno);
    }
  }

  bool fill(const std::string& what) {
    wait_for(POLLIN, what);
    char chunk[8192];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) return true;
      throw_errno("NCCL RAS: receiving while " + what, errno);
    }
    if (n == 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  Clock::time_point deadline_;
  std::string buffer_;
};

RasReply exchange(const RasEndpoint& endpoint, std::chrono::milliseconds timeout,
                  int nccl_timeout_seconds) {
  RasReply reply;
  try {
    RasConnection c(endpoint, Clock::now() + timeout);
    c.send("CLIENT PROTOCOL " + std::to_string(kClientProtocol) + "\n");
    const std::string hello = c.line("waiting for SERVER PROTOCOL");
    if (hello.rfind("SERVER PROTOCOL ", 0) != 0) {
      throw Error("NCCL RAS: unexpected reply to CLIENT PROTOCOL: " + hello);
    }
    reply.server_protocol = hello.substr(16);
    c.send("TIMEOUT " + std::to_string(nccl_timeout_seconds) + "\n");
    if (const auto ok = c.line("waiting for the reply to TIMEOUT"); ok != "OK") {
      throw Error("NCCL RAS: unexpected reply to TIMEOUT: " + ok);
    }
    c.send("SET FORMAT json\n");
    reply.format = c.line("waiting for the reply to SET FORMAT") == "OK" ? "json" : "text";
    c.send("STATUS\n");
    reply.report = c.rest(reply.error);
  } catch (const Error& e) {
    reply.error = e.what();
  }
  return reply;
}

// The JSON report (NCCL >= 2.28.7): per communicator, ranks whose operation counts differ
// from the most common count of that operation, and the missing ranks.
RasSummary summarize_json(const nlohmann::json& doc) {
  RasSummary s;
  const auto where = [](const nlohmann::json& r) {
    return "process " + std::to_string(r.value("pid", -1)) + " on " + r.value("host", "?") +
           " (GPU " + std::to_string(r.value("cuda_dev", -1)) + ")";
  };
  const auto communicators = doc.value("communicators", nlohmann::json::array());
  for (const auto& comm : communicators) {
    ++s.communicators;
    const std::string name = "communicator " + comm.value("hash", "?");
    const auto ranks = comm.value("ranks", nlohmann::json::array());
    s.ranks += static_cast<int>(ranks.size());
    std::map<std::string, std::map<std::int64_t, std::vector<const nlohmann::json*>>> counts;
    for (const auto& r : ranks) {
      const auto collective_counts = r.value("collective_counts", nlohmann::json::object());
      for (const auto& [op, n] : collective_counts.items()) {
        counts[op][n.get<std::int64_t>()].push_back(&r);
      }
    }
    for (const auto& [op, by_count] : counts) {
      if (by_count.size() < 2) continue;
      const auto common = std::max_element(
          by_count.begin(), by_count.end(),
          [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
      for (const auto& [count, members] : by_count) {
        if (count == common->first) continue;
        for (const auto* r : members) {
          s.findings.push_back(name + ": rank " + std::to_string(r->value("rank", -1)) + " (" +
                               where(*r) + ") launched " + op + " up to " + std::to_string(count) +
                               ", " + std::to_string(common->second.size()) + " ranks up to " +
                               std::to_string(common->first));
        }
      }
    }
    const auto missing = comm.value("missing_ranks", nlohmann::json::array());
    for (const auto& m : missing) {
      const auto status = m.value("status", nlohmann::json::object());
      const bool dead = status.value("considered_dead", false);
      s.findings.push_back(name + ": rank " + std::to_string(m.value("rank", -1)) + " (" +
                           where(m) + ") " +
                           (dead ? "is considered dead" : "did not answer (missing data)"));
    }
  }
  return s;
}

// The text report: the lines of its Errors and Warnings sections, one finding per block.
RasSummary summarize_text(const std::string& report) {
  RasSummary s;
  std::string section, block;
  int detail_lines = 0;
  const auto flush = [&] {
    if (!block.empty()) s.findings.push_back(block);
    block.clear();
    detail_lines = 0;
  };
  std::size_t start = 0;
  while (start < report.size()) {
    auto end = report.find('\n', start);
    if (end == std::string::npos) end = report.size();
    std::string line = report.substr(start, end - start);
    start = end + 1;
    if (line == "Errors" || line == "Warnings" || line == "Communicators" ||
        line.rfind("Communicators...", 0) == 0 || line == "Job summary") {
      flush();
      section = line;
      continue;
    }
    if (!line.empty() && line.find_first_not_of('=') == std::string::npos) continue;
    if (section != "Errors" && section != "Warnings") continue;
    if (line.empty()) {
      flush();
      continue;
    }
    // "DEAD: 1 job process is considered dead …; Process 38819 on node …"
    const std::string text = line.substr(line.find_first_not_of(' '));
    block += block.empty() ? text : (detail_lines++ == 0 ? ": " : "; ") + text;
  }
  flush();
  return s;
}

}  // namespace

std::string RasSummary::describe() const {
  if (findings.empty()) {
    return "ok: " + std::to_string(communicators) + " communicator(s), " + std::to_string(ranks) +
           " ranks, nothing reported";
  }
  std::string out = "problems:";
  for (const auto& f : findings) out += " " + f + ";";
  out.pop_back();
  return out;
}

RasSummary summarize_ras(const RasReply& reply) {
  if (reply.format == "json") {
    try {
      return summarize_json(nlohmann::json::parse(reply.report));
    } catch (const nlohmann::json::exception& e) {
      RasSummary s;
      s.findings.push_back(std::string("the JSON report could not be read: ") + e.what());
      return s;
    }
  }
  return summarize_text(reply.report);
}

std::string RasEndpoint::text() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

RasEndpoint ras_endpoint(const std::map<std::string, std::string>& env) {
  RasEndpoint endpoint;
  const auto it = env.find("NCCL_RAS_ADDR");
  if (it == env.end() || it->second.empty()) return endpoint;
  const std::string& addr = it->second;
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos) {
    endpoint.host = addr;
    return endpoint;
  }
  std::string host = addr.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  endpoint.host = host == "localhost" || host.empty() ? "127.0.0.1" : host;
  endpoint.port = std::atoi(addr.c_str() + colon + 1);
  return endpoint;
}

RasReply query_ras(const RasEndpoint& endpoint, std::chrono::milliseconds timeout,
                   int nccl_timeout_seconds, int netns_pid) {
  if (netns_pid == 0) return exchange(endpoint, timeout, nccl_timeout_seconds);
  // The rank's localhost is in its network namespace: talk from a thread that joined it.
  RasReply reply;
  const std::string ns = "/proc/" + std::to_string(netns_pid) + "/ns/net";
  const int fd = ::open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    reply.error = errno_message("cannot open " + ns, errno);
    return reply;
  }
  std::thread worker([&] {
    if (::setns(fd, CLONE_NEWNET) != 0) {
      reply.error = errno_message(
          "cannot enter the network namespace of pid " + std::to_string(netns_pid), errno);
      return;
    }
    reply = exchange(endpoint, timeout, nccl_timeout_seconds);
  });
  worker.join();
  ::close(fd);
  return reply;
}

}  // namespace hangscope::collectives
