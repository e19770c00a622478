// The NCCL RAS client against a test peer on loopback that replays exchanges transcribed from
// NCCL's own client and server (tests/fixtures/nccl_ras, README.md there): the handshake, the
// JSON and text reports, a peer that refuses JSON, a slow peer, a closed connection and
// malformed replies.
#include "hangscope/collectives/nccl_ras.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <thread>

#include "fixtures.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/tcp_connection.h"
#include "hangscope/model/fact_keys.h"
#include "loopback_peer.h"

namespace hangscope::collectives {
namespace {

// Exchanges transcribed from NCCL (tests/fixtures/nccl_ras).
std::string ras_fixture(const std::string& name) {
  return testing::fixture_text("nccl_ras/" + name);
}

using testing::LoopbackPeer;

// A RAS peer: a loopback peer and the endpoint the client is given.
class RasPeer : public LoopbackPeer {
 public:
  using LoopbackPeer::LoopbackPeer;
  RasEndpoint endpoint() const { return {"127.0.0.1", port()}; }
};

// Replays the transcribed handshake (C:/S: lines), then `report` after STATUS, then closes.
// `json_supported`: the reply to SET FORMAT json is OK, else the transcript's refusal.
std::function<void(int)> replay(const std::string& report, bool json_supported,
                                std::vector<std::string>* seen) {
  return [=](int fd) {
    for (;;) {
      const std::string line = RasPeer::read_line(fd);
      if (line.empty()) return;
      seen->push_back(line);
      if (line.rfind("CLIENT PROTOCOL ", 0) == 0) {
        RasPeer::write(fd, "SERVER PROTOCOL " + line.substr(16) + "\n");
      } else if (line.rfind("TIMEOUT ", 0) == 0) {
        RasPeer::write(fd, "OK\n");
      } else if (line == "SET FORMAT json") {
        // NCCL before 2.28.7 (tests/fixtures/nccl_ras/handshake_pre_json.txt).
        RasPeer::write(fd, json_supported ? "OK\n" : "ERROR: Unknown command SET FORMAT json\n");
      } else if (line == "STATUS" || line == "VERBOSE STATUS") {
        RasPeer::write(fd, report);
        return;  // the server closes the connection after the report
      }
    }
  };
}

TEST(NcclRas, JsonReportOverTheDocumentedExchange) {
  std::vector<std::string> seen;
  const std::string report = ras_fixture("status_json_mismatch.json");
  ASSERT_FALSE(report.empty());
  RasPeer peer(replay(report, true, &seen));
  const auto reply = query_ras(peer.endpoint(), std::chrono::seconds(5));
  EXPECT_EQ(reply.error, "");
  EXPECT_EQ(reply.format, "json");
  EXPECT_EQ(reply.report, report);
  ASSERT_GE(seen.size(), 4u);
  EXPECT_EQ(seen[0].rfind("CLIENT PROTOCOL ", 0), 0u);
  EXPECT_EQ(seen[1].rfind("TIMEOUT ", 0), 0u);
  EXPECT_EQ(seen[2], "SET FORMAT json");
  EXPECT_EQ(seen[3], "STATUS");
}

TEST(NcclRas, TextReportWhenJsonIsRefused) {
  std::vector<std::string> seen;
  const std::string report = ras_fixture("status_text_mismatch.txt");
  RasPeer peer(replay(report, false, &seen));
  const auto reply = query_ras(peer.endpoint(), std::chrono::seconds(5));
  EXPECT_EQ(reply.error, "");
  EXPECT_EQ(reply.format, "text");
  EXPECT_EQ(reply.report, report);
}

TEST(NcclRas, ASlowPeerIsCutAtTheDeadline) {
  std::atomic<bool> done = false;
  RasPeer peer([&](int fd) {
    RasPeer::read_line(fd);  // never answers the handshake
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  const auto start = std::chrono::steady_clock::now();
  const auto reply = query_ras(peer.endpoint(), std::chrono::milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  done = true;
  EXPECT_NE(reply.error.find("did not answer in time (waiting for SERVER PROTOCOL)"),
            std::string::npos)
      << reply.error;
  EXPECT_LT(took, std::chrono::seconds(2));
}

TEST(NcclRas, ClosedConnectionsAndMalformedRepliesAreNamed) {
  {
    RasPeer peer([](int fd) { RasPeer::read_line(fd); });  // closes without a word
    const auto reply = query_ras(peer.endpoint(), std::chrono::seconds(2));
    EXPECT_NE(reply.error.find("closed the connection while waiting for SERVER PROTOCOL"),
              std::string::npos)
        << reply.error;
  }
  {
    RasPeer peer([](int fd) {
      RasPeer::read_line(fd);
      RasPeer::write(fd, "HTTP/1.1 400 Bad Request\n");
    });
    const auto reply = query_ras(peer.endpoint(), std::chrono::seconds(2));
    EXPECT_NE(reply.error.find("unexpected reply to CLIENT PROTOCOL: HTTP/1.1 400"),
              std::string::npos)
        << reply.error;
  }
  {
    RasPeer peer([](int fd) {
      RasPeer::read_line(fd);
      RasPeer::write(fd, "SERVER PROTOCOL 2\n");
      RasPeer::read_line(fd);
      RasPeer::write(fd, "ERROR: bad timeout\n");
    });
    const auto reply = query_ras(peer.endpoint(), std::chrono::seconds(2));
    EXPECT_NE(reply.error.find("unexpected reply to TIMEOUT: ERROR: bad timeout"),
              std::string::npos)
        << reply.error;
  }
  // Nobody listens: refused, with what that usually means.
  int closed_port = 0;
  {
    RasPeer peer([](int) {});
    closed_port = peer.endpoint().port;
    const auto ignored = query_ras(peer.endpoint(), std::chrono::milliseconds(200));
    (void)ignored;
  }
  const auto refused = query_ras({"127.0.0.1", closed_port}, std::chrono::seconds(1));
  EXPECT_NE(refused.error.find("RAS disabled"), std::string::npos) << refused.error;
  // The hint follows the connection's errno, not the wording of its message.
  try {
    TcpConnection connection("127.0.0.1", closed_port,
                             TcpConnection::Clock::now() + std::chrono::seconds(1), "NCCL RAS");
    ADD_FAILURE() << "connected to a closed port";
  } catch (const SystemError& e) {
    EXPECT_EQ(e.error_number(), ECONNREFUSED) << e.what();
  }
}

TEST(NcclRas, TheJsonReportNamesTheRankBehindAndTheDeadOne) {
  const auto s = summarize_ras({"2", "json", ras_fixture("status_json_mismatch.json"), ""});
  EXPECT_EQ(s.communicators, 1);
  EXPECT_EQ(s.ranks, 7);
  ASSERT_EQ(s.findings.size(), 2u) << s.describe();
  EXPECT_EQ(s.findings[0],
            "communicator 0xc3a9e21d4f60b85: rank 3 (process 41233 on 10.0.0.1 (GPU 3)) launched "
            "AllReduce up to 4179, 6 ranks up to 4180");
  EXPECT_EQ(s.findings[1],
            "communicator 0xc3a9e21d4f60b85: rank 6 (process 38819 on 10.0.0.2 (GPU 2)) is "
            "considered dead");
  EXPECT_EQ(s.status(), model::RasStatus::kProblems);
  EXPECT_EQ(s.describe().rfind("problems: ", 0), 0u);  // what people read in the fact
}

TEST(NcclRas, StatusValuesAreStableNames) {
  EXPECT_EQ(summarize_ras({"2", "text", ras_fixture("status_text_ok.txt"), ""}).status(),
            model::RasStatus::kOk);
  EXPECT_EQ(summarize_ras({"2", "json", "{\"communicators\": [", ""}).status(),
            model::RasStatus::kProblems);  // a report that cannot be read is a finding
  for (const auto status :
       {model::RasStatus::kOk, model::RasStatus::kProblems, model::RasStatus::kUnavailable}) {
    EXPECT_EQ(model::ras_status_from_string(to_string(status)), status);
  }
  EXPECT_EQ(to_string(model::RasStatus::kOk), "ok");
  EXPECT_EQ(to_string(model::RasStatus::kProblems), "problems");
  EXPECT_EQ(to_string(model::RasStatus::kUnavailable), "unavailable");
  EXPECT_FALSE(model::ras_status_from_string("problems: rank 3").has_value());
  EXPECT_FALSE(model::ras_status_from_string("").has_value());
  EXPECT_EQ(std::string(model::fact_keys::kNcclRasStatus), "nccl_ras.status");
}

TEST(NcclRas, TheTextReportKeepsItsErrorsAndWarnings) {
  const auto ok = summarize_ras({"2", "text", ras_fixture("status_text_ok.txt"), ""});
  EXPECT_TRUE(ok.findings.empty()) << ok.describe();
  const auto bad = summarize_ras({"2", "text", ras_fixture("status_text_mismatch.txt"), ""});
  ASSERT_EQ(bad.findings.size(), 3u) << bad.describe();
  EXPECT_EQ(
      bad.findings[0].rfind(
          "DEAD: 1 job process is considered dead (unreachable via the RAS network); Process 38819",
          0),
      0u)
      << bad.findings[0];
  EXPECT_NE(bad.findings[2].find("Rank 3 has launched up to operation 4179 -- GPU 3 managed by "
                                 "process 41233 on node 10.0.0.1"),
            std::string::npos)
      << bad.findings[2];
  const auto broken = summarize_ras({"2", "json", "{\"communicators\": [", ""});
  EXPECT_EQ(broken.findings.at(0).rfind("the JSON report could not be read", 0), 0u);
}

TEST(NcclRas, TheEndpointFollowsNcclRasAddr) {
  EXPECT_EQ(ras_endpoint({}).text(), "127.0.0.1:28028");
  EXPECT_EQ(ras_endpoint({{"NCCL_RAS_ADDR", "localhost:29999"}}).text(), "127.0.0.1:29999");
  EXPECT_EQ(ras_endpoint({{"NCCL_RAS_ADDR", "[::1]:28028"}}).text(), "[::1]:28028");
}

}  // namespace
}  // namespace hangscope::collectives
