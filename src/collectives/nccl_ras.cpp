#include "hangscope/collectives/nccl_ras.h"

#include <cerrno>
#include <map>

#include "hangscope/common/bounded_json.h"
#include "hangscope/common/error.h"
#include "hangscope/common/tcp_connection.h"

namespace hangscope::collectives {
namespace {

// The protocol version NCCL's ncclras client announces (NCCL_RAS_CLIENT_PROTOCOL).
constexpr int kClientProtocol = 2;
constexpr std::size_t kMaxReport = 1u << 20;
constexpr std::size_t kMaxLine = 4096;

using Clock = std::chrono::steady_clock;

// NCCL RAS's line protocol over a connection bounded by one deadline.
class RasConnection {
 public:
  RasConnection(const RasEndpoint& endpoint, Clock::time_point deadline) try
      : connection_(endpoint.host, endpoint.port, deadline, "NCCL RAS") {
  } catch (const SystemError& e) {  // other errors go on as they are
    throw Error(std::string(e.what()) +
                (e.error_number() == ECONNREFUSED
                     ? " (no NCCL job with RAS on this node, or RAS disabled)"
                     : ""));
  }

  void send(const std::string& message) {
    connection_.send(message, "sending " + message.substr(0, message.find_first_of(" \n")));
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
      if (!connection_.receive_some(buffer_, waiting_for)) {
        throw Error("NCCL RAS closed the connection while " + waiting_for +
                    (buffer_.empty() ? "" : " (partial reply: " + buffer_ + ")"));
      }
    }
  }

  // Everything until the server closes (the STATUS report), capped.
  std::string rest(std::string& error) {
    try {
      while (buffer_.size() < kMaxReport &&
             connection_.receive_some(buffer_, "reading the STATUS report")) {
      }
    } catch (const Error& e) {
      error = e.what();
    }
    if (buffer_.size() >= kMaxReport) error = "NCCL RAS report longer than 1 MiB: cut";
    return std::move(buffer_);
  }

 private:
  TcpConnection connection_;
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
    // A blank line (spaces only, too) ends a finding's block.
    const auto indent = line.find_first_not_of(' ');
    if (indent == std::string::npos) {
      flush();
      continue;
    }
    // "DEAD: 1 job process is considered dead …; Process 38819 on node …"
    const std::string text = line.substr(indent);
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
      // A peer's reply: depth and size bounded (docs/security.md, "Amplification").
      constexpr JsonLimits kReply{64, 1u << 21, 64u << 20};
      return summarize_json(parse_json_within(reply.report, kReply));
    } catch (const nlohmann::json::exception& e) {
      RasSummary s;
      s.findings.push_back(std::string("the JSON report could not be read: ") + e.what());
      return s;
    } catch (const Error& e) {
      RasSummary s;
      s.findings.push_back(std::string("the JSON report was refused: ") + e.what());
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
  RasReply reply;
  const std::string error = run_in_network_namespace(
      netns_pid, [&] { reply = exchange(endpoint, timeout, nccl_timeout_seconds); });
  if (!error.empty()) reply.error = error;
  return reply;
}

}  // namespace hangscope::collectives
