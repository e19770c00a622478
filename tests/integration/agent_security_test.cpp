// The agent as an exposed service: every credential that is missing, wrong, signed by the wrong
// CA or expired is refused and logged; a request cannot widen what the agent's command line
// allows; 50 clients at once are answered or refused as busy; and an agent that dies, hangs or
// answers garbage still lets diagnose finish with the other nodes.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "command.h"
#include "diagnose_run.h"
#include "hangscope/v1/agent.grpc.pb.h"
#include "loopback_peer.h"
#include "python_targets.h"
#include "target_process.h"

namespace hangscope {
namespace {

using Clock = std::chrono::steady_clock;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// An agent whose debug log (stderr) goes to a file, serving one target process.
struct LoggedAgent {
  std::string log = testing::temp_path("agent-log");
  testing::TargetProcess process;
  std::string address;
  std::string port;
  LoggedAgent(const std::string& arguments)
      : process({"/bin/sh", "-c",
                 "exec " + std::string(HANGSCOPE_BINARY) +
                     " --log-level debug collect --listen 127.0.0.1:0 " + arguments + " 2>" +
                     log}) {
    address = process.wait_for_line("listening on ").substr(13);
    port = address.substr(address.rfind(':') + 1);
  }
  ~LoggedAgent() { ::unlink(log.c_str()); }
  std::string logged() const { return slurp(log); }
};

// diagnose through the agents ARGUMENTS name: one sample, the bundle thrown away.
testing::Diagnosis diagnose(const std::string& arguments) {
  return testing::run_diagnose(arguments + " --samples 1");
}

// A CA, a second unrelated CA, and certificates made by openssl now: server, client, a client
// of the other CA, and an expired client and server (valid in 2020 only).
struct Certificates {
  std::string dir = testing::temp_path("certs");
  bool made = false;
  Certificates() {
    const std::string ca_conf =
        "[ca]\\ndefault_ca=test\\n[test]\\ndatabase=index.txt\\nnew_certs_dir=.\\nserial=serial\\n"
        "default_md=sha256\\npolicy=any\\ncopy_extensions=copy\\n[any]\\ncommonName=supplied\\n";
    const std::string key = "openssl req -newkey rsa:2048 -nodes -subj ";
    const std::string sign = "openssl x509 -req -days 1 -CAcreateserial ";
    const std::string script =
        "set -e; mkdir -p " + dir + " && cd " + dir + " && printf '" + ca_conf +
        "' > ca.cnf && touch index.txt && echo 01 > serial" +
        " && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext" +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 "
        "-subj /CN=hangscope-test-ca" +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 1 "
        "-subj /CN=other-ca" +
        " && " + key + "/CN=localhost -keyout server.key -out server.csr" + " && " + sign +
        "-in server.csr -CA ca.pem -CAkey ca.key -out server.pem -extfile san.ext" + " && " + key +
        "/CN=diagnose -keyout client.key -out client.csr" + " && " + sign +
        "-in client.csr -CA ca.pem -CAkey ca.key -out client.pem" + " && " + sign +
        "-in client.csr -CA other.pem -CAkey other.key -out stranger.pem" +
        " && openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in client.csr "
        "-out expired-client.pem -startdate 20200101000000Z -enddate 20200102000000Z" +
        " && openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in server.csr "
        "-out expired-server.pem -startdate 20200101000000Z -enddate 20200102000000Z "
        "-extfile san.ext";
    made = testing::run_command("(" + script + ") >/dev/null 2>&1").exit_code == 0;
  }
  ~Certificates() { std::system(("rm -rf " + dir).c_str()); }
  std::string operator()(const std::string& name) const { return dir + "/" + name; }
};

TEST(AgentSecurity, WrongCaExpiredAndMissingClientCertificatesAreRefusedAndLogged) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl missing";
  const Certificates certs;
  ASSERT_TRUE(certs.made);
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  const LoggedAgent agent("--tls-cert " + certs("server.pem") + " --tls-key " +
                          certs("server.key") + " --tls-ca " + certs("ca.pem") + " --pid " +
                          std::to_string(rank.pid()));
  const std::string base =
      "--agents localhost:" + agent.port + " --tls-ca " + certs("ca.pem") + " ";
  const auto client = [&](const std::string& cert) {
    return " --tls-cert " + certs(cert) + " --tls-key " + certs("client.key");
  };
  const auto good = diagnose(base + client("client.pem"));
  EXPECT_EQ(good.node_status(), "ok") << good.report["nodes"].dump();
  EXPECT_EQ(good.report["ranks"].size(), 1u);

  int refused = 0;
  for (const auto& [what, arguments] : std::vector<std::pair<std::string, std::string>>{
           {"no client certificate", base},
           {"client certificate of another CA", base + client("stranger.pem")},
           {"expired client certificate", base + client("expired-client.pem")}}) {
    SCOPED_TRACE(what);
    const auto d = diagnose(arguments);
    EXPECT_NE(d.node_status(), "ok");
    EXPECT_TRUE(d.report["ranks"].empty()) << d.report["ranks"].dump();
    EXPECT_FALSE(d.node_error().empty());
    refused += d.node_status() != "ok";
  }
  EXPECT_EQ(refused, 3);
  // Each refused handshake is in the agent's log (gRPC's TLS layer reports it).
  const std::string log = agent.logged();
  EXPECT_GE(count_of(log, "Handshake failed"), 3u) << log;
  EXPECT_TRUE(testing::no_thread_stopped(rank.pid()));
}

// Every combination of credentials that cannot give what it promises is refused at start, with
// the option and the reason; none serves plaintext. (A CA alone once served plaintext,
// unauthenticated Capture on 0.0.0.0.) `timeout` ends an agent that wrongly starts: exit 124.
TEST(AgentSecurity, CredentialCombinationsThatCannotAuthenticateAreRefusedAtStart) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl missing";
  const Certificates certs;
  ASSERT_TRUE(certs.made);
  const std::string dir = certs.dir;
  ASSERT_EQ(testing::run_command("cd " + dir +
                                 " && : > empty.pem && printf 'abcd\\n' > short.token && "
                                 "chmod 600 short.token && openssl rand -hex 32 > open.token && "
                                 "chmod 644 open.token && openssl rand -hex 32 > good.token && "
                                 "chmod 600 good.token")
                .exit_code,
            0);
  struct Case {
    std::string arguments;
    int exit_code;
    std::string message;
  };
  const std::string tls =
      " --tls-cert " + certs("server.pem") + " --tls-key " + certs("server.key");
  const std::vector<Case> cases = {
      {"--listen 0.0.0.0:0 --tls-ca " + certs("ca.pem"), 2, "--tls-ca requires the agent's own"},
      {"--listen 0.0.0.0:0" + tls, 1, "without authentication"},
      {"--listen 0.0.0.0:0 --tls-ca " + certs("ca.pem") + " --tls-cert " + certs("ca.pem") +
           " --tls-key " + certs("server.key"),
       1, "is not the key of the certificate in --tls-cert"},
      {"--listen 0.0.0.0:0 --tls-ca " + certs("ca.pem") + " --tls-cert " + certs("server.key") +
           " --tls-key " + certs("server.key"),
       1, "holds no PEM certificate"},
      {"--listen 127.0.0.1:0 --tls-cert " + certs("empty.pem") + " --tls-key " +
           certs("server.key"),
       1, "--tls-cert " + certs("empty.pem") + ": holds no PEM certificate"},
      {"--listen 127.0.0.1:0 --tls-cert " + certs("server.pem") + " --tls-key " + certs("ca.pem"),
       1, "holds no unencrypted PEM private key"},
      {"--listen 0.0.0.0:0" + tls + " --tls-ca " + certs("empty.pem"), 1,
       "--tls-ca " + certs("empty.pem") + ": holds no PEM certificate"},
      {"--listen 0.0.0.0:0 --token-file " + certs("short.token"), 1, "the token is 4 bytes"},
      {"--listen 0.0.0.0:0 --token-file " + certs("open.token"), 1,
       "is readable by group or others (mode 0644)"},
      // What does authenticate starts (and is ended by timeout).
      {"--listen 0.0.0.0:0" + tls + " --tls-ca " + certs("ca.pem"), 124, "client certificates"},
      {"--listen 0.0.0.0:0 --token-file " + certs("good.token"), 124, "token required"},
      {"--listen 0.0.0.0:0 --token-file " + certs("short.token") + " --insecure", 124,
       "the token is 4 bytes"},
      {"--listen 127.0.0.1:0 --token-file " + certs("open.token"), 124, "readable by group"},
  };
  for (const auto& c : cases) {
    const auto result = testing::run_command("timeout 3 " + std::string(HANGSCOPE_BINARY) +
                                             " --log-level info collect " + c.arguments);
    const std::string said = result.out + result.err;
    EXPECT_EQ(result.exit_code, c.exit_code) << c.arguments << "\n" << said;
    EXPECT_NE(said.find(c.message), std::string::npos) << c.arguments << "\n" << said;
    EXPECT_EQ(said.find("port is in use"), std::string::npos) << said;
  }
  // The client side: a client certificate without the CA of the agents' would dial plaintext.
  const auto client = testing::run_command(
      std::string(HANGSCOPE_BINARY) + " diagnose --agents 127.0.0.1:1 --tls-cert " +
      certs("client.pem") + " --tls-key " + certs("client.key"));
  EXPECT_EQ(client.exit_code, 2) << client.err;
  EXPECT_NE(client.err.find("need --tls-ca"), std::string::npos) << client.err;
}

TEST(AgentSecurity, AnExpiredAgentCertificateIsRefusedByDiagnose) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl missing";
  const Certificates certs;
  ASSERT_TRUE(certs.made);
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  const LoggedAgent agent("--tls-cert " + certs("expired-server.pem") + " --tls-key " +
                          certs("server.key") + " --pid " + std::to_string(rank.pid()));
  const auto d = diagnose("--agents localhost:" + agent.port + " --tls-ca " + certs("ca.pem"));
  EXPECT_NE(d.node_status(), "ok") << d.report["nodes"].dump();
  EXPECT_TRUE(d.report["ranks"].empty());
}

TEST(AgentSecurity, WrongAndMissingTokensAreRefusedAndLoggedWithoutTheToken) {
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  const std::string token = testing::temp_path("token");
  const std::string wrong = testing::temp_path("wrong");
  std::ofstream(token) << "s3cret-agent-token-value\n";
  std::ofstream(wrong) << "not-the-token\n";
  {
    const LoggedAgent agent("--token-file " + token + " --pid " + std::to_string(rank.pid()));
    const auto good = diagnose("--agents " + agent.address + " --token-file " + token);
    EXPECT_EQ(good.node_status(), "ok") << good.report["nodes"].dump();
    const auto bad = diagnose("--agents " + agent.address + " --token-file " + wrong);
    EXPECT_EQ(bad.node_status(), "refused");
    // No node answered, so nothing was looked at: a failure (exit 1) naming the node, and no
    // verdict (a verdict would exit 3).
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_TRUE(bad.report["verdicts"].empty()) << bad.report["verdicts"].dump();
    const auto none = diagnose("--agents " + agent.address);
    EXPECT_EQ(none.node_status(), "refused");
    const std::string log = agent.logged();
    EXPECT_EQ(count_of(log, "(missing or wrong token)"), 2u) << log;
    EXPECT_EQ(log.find("s3cret-agent-token-value"), std::string::npos);
    EXPECT_EQ(log.find("not-the-token"), std::string::npos);
  }
  ::unlink(token.c_str());
  ::unlink(wrong.c_str());
}

// A raw client: what a request may ask is bounded by the agent's own command line.
TEST(AgentSecurity, ARequestCannotWidenWhatTheAgentsCommandLineAllows) {
  testing::TargetProcess allowed({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  testing::TargetProcess other({NATIVE_TARGET}, {{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  allowed.wait_for_line("ready");
  other.wait_for_line("ready");
  const LoggedAgent agent("--pid " + std::to_string(allowed.pid()));
  auto stub =
      v1::Agent::NewStub(grpc::CreateChannel(agent.address, grpc::InsecureChannelCredentials()));
  const auto ask = [&](const v1::CaptureRequest& request, v1::CaptureReply* reply) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub->Capture(&context, request, reply);
  };
  v1::CaptureRequest request;
  request.set_samples(1);
  request.add_pids(other.pid());
  v1::CaptureReply reply;
  auto status = ask(request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("pid " + std::to_string(other.pid())), std::string::npos)
      << status.error_message();
  EXPECT_EQ(reply.snapshots_size(), 0);

  request.clear_pids();
  request.add_pids(allowed.pid());
  status = ask(request, &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(reply.snapshots_size(), 1);
  EXPECT_EQ(reply.snapshots(0).processes_size(), 1);
  EXPECT_EQ(reply.snapshots(0).processes(0).pid(), allowed.pid());

  v1::CaptureRequest slow;
  slow.set_samples(100);
  slow.set_interval_ns(3600ull * 1'000'000'000ull);  // 100 hours of holding the node
  v1::CaptureReply none;
  status = ask(slow, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("limit"), std::string::npos);
  const std::string log = agent.logged();
  EXPECT_NE(log.find("refused"), std::string::npos) << log;
  EXPECT_TRUE(testing::no_thread_stopped(other.pid()));
}

long peak_rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// A request's numbers cannot hold the agent: a start time of INT64_MIN is "now" (it once
// overflowed into a 60 s sleep per sample under the capture lock), a span over the agent's
// limit is refused, and a clamped sample count is said in the reply.
TEST(AgentSecurity, AbsurdSampleTimesAreBoundedAndClampingIsSaid) {
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  const LoggedAgent agent("--pid " + std::to_string(rank.pid()));
  auto stub =
      v1::Agent::NewStub(grpc::CreateChannel(agent.address, grpc::InsecureChannelCredentials()));
  const auto ask = [&](const v1::CaptureRequest& request, v1::CaptureReply* reply) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub->Capture(&context, request, reply);
  };
  v1::CaptureRequest ancient;
  ancient.set_samples(2);
  ancient.set_interval_ns(1'000'000);
  ancient.set_start_unix_ns(std::numeric_limits<std::int64_t>::min());
  v1::CaptureReply reply;
  const auto begin = Clock::now();
  auto status = ask(ancient, &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.snapshots_size(), 2);
  EXPECT_LT(Clock::now() - begin, std::chrono::seconds(20));

  v1::CaptureRequest many;  // 1000 samples 1 ms apart: 100 are taken, and the reply says so
  many.set_samples(1000);
  many.set_interval_ns(1'000'000);
  v1::CaptureReply clamped;
  status = ask(many, &clamped);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(clamped.snapshots_size(), 100);
  ASSERT_EQ(clamped.notes_size(), 1);
  EXPECT_NE(clamped.notes(0).find("asked for 1000 samples"), std::string::npos) << clamped.notes(0);

  v1::CaptureRequest long_span;  // 100 x 60 s: each within its own limit, 99 minutes in all
  long_span.set_samples(100);
  long_span.set_interval_ns(60'000'000'000ull);
  v1::CaptureReply none;
  status = ask(long_span, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("over the agent's limit of 600 s"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(testing::no_thread_stopped(rank.pid()));
}

// An agent whose descriptors ran out (hard limit 64, 200 idle connections) either accepts
// again once they close or exits 1 to be restarted; it never stays up without accepting.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HANGSCOPE_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HANGSCOPE_TEST_SANITIZED 1
#endif

TEST(AgentSecurity, AnAgentOutOfDescriptorsServesAgainOrExitsToBeRestarted) {
  if (::access("/usr/bin/prlimit", X_OK) != 0) GTEST_SKIP() << "prlimit missing";
#ifdef HANGSCOPE_TEST_SANITIZED
  // The sanitizers' runtime needs descriptors of its own (UBSan checks a vptr's memory through a
  // pipe): out of them it reports "invalid vptr" and ends the agent, which is the runtime, not
  // the agent. The plain build runs this test.
  GTEST_SKIP() << "a sanitizer's runtime cannot run out of descriptors";
#endif
  const std::string log = testing::temp_path("agent-nofile-log");
  testing::TargetProcess agent({"/bin/sh", "-c",
                                "HANGSCOPE_AGENT_SELF_CHECK_MS=300 exec prlimit --nofile=64:64 " +
                                    std::string(HANGSCOPE_BINARY) +
                                    " --log-level debug collect --listen 127.0.0.1:0 2>" + log});
  const std::string address = agent.wait_for_line("listening on ").substr(13);
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
      idle.push_back(fd);
    } else if (fd >= 0) {
      ::close(fd);
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (const int fd : idle) ::close(fd);
  // Within 30 s: answering again, or gone with exit status 1 and the reason logged.
  bool serving = false;
  for (const auto until = Clock::now() + std::chrono::seconds(30); Clock::now() < until;) {
    if (agent.try_reap()) break;
    const auto status = diagnose("--agents " + address).node_status();
    if (status == "ok") {  // it answered (with no rank on this node)
      serving = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const std::string logged = slurp(log);
  ::unlink(log.c_str());
  if (!serving) {
    ASSERT_TRUE(agent.try_reap()) << "the agent is up but does not accept:\n" << logged;
    EXPECT_EQ(agent.exit_code(), 1) << logged;
    EXPECT_NE(logged.find("no longer accepts connections"), std::string::npos) << logged;
  }
  std::cout << (serving ? "served again" : "exited 1 to be restarted") << "\n";
}

// 50 diagnose processes against one agent at once: each is answered or refused as busy, the
// target is never traced twice at once (no capture of it fails), and the agent stays small.
TEST(AgentSecurity, FiftyConcurrentClientsAreAnsweredOrRefusedAsBusy) {
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  const LoggedAgent agent("--pid " + std::to_string(rank.pid()));
  const std::string dir = testing::temp_path("fifty");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::vector<pid_t> clients;
  for (int i = 0; i < 50; ++i) {
    const pid_t child = ::fork();
    if (child == 0) {
      const std::string out = dir + "/" + std::to_string(i);
      const std::string command = std::string(HANGSCOPE_BINARY) + " diagnose --agents " +
                                  agent.address + " --samples 1 --json -o " + out + ".bundle > " +
                                  out + ".json 2>/dev/null";
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    clients.push_back(child);
  }
  int answered = 0, busy = 0, other = 0;
  for (std::size_t i = 0; i < clients.size(); ++i) {
    int status = 0;
    ::waitpid(clients[i], &status, 0);
    const auto report =
        nlohmann::json::parse(slurp(dir + "/" + std::to_string(i) + ".json"), nullptr, false);
    if (report.is_discarded() || report["nodes"].empty()) {
      ++other;
      continue;
    }
    const auto& node = report["nodes"][0];
    if (node["status"] == "ok" && report["ranks"].size() == 1 &&
        report["ranks"][0]["state"] != "unknown") {
      ++answered;
    } else if (node["status"] == "busy" &&
               node.value("error", "").find("busy") != std::string::npos) {
      ++busy;
    } else {
      ++other;
      ADD_FAILURE() << "client " << i << ": " << node.dump();
    }
  }
  std::system(("rm -rf " + dir).c_str());
  std::cout << "50 clients: " << answered << " answered, " << busy << " refused as busy\n";
  EXPECT_EQ(answered + busy, 50);
  EXPECT_GE(answered, 1);
  EXPECT_EQ(other, 0);
  EXPECT_LT(peak_rss_kib(agent.process.pid()), 256 * 1024);
  EXPECT_TRUE(testing::no_thread_stopped(rank.pid()));
  // And it still serves afterwards.
  EXPECT_EQ(diagnose("--agents " + agent.address).node_status(), "ok");
}

// Three broken agents and one good one: killed in the middle of its answer, never answering
// (accepts the connection, says nothing), answering garbage. diagnose names each and still
// reports the good node's rank, within its deadline.
TEST(AgentFaults, KilledHangingAndGarbageAgentsAreReportedAndTheRestComesOut) {
  testing::TargetProcess rank0(
      {NATIVE_TARGET},
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  testing::TargetProcess rank1(
      {NATIVE_TARGET},
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  rank0.wait_for_line("ready");
  rank1.wait_for_line("ready");
  const LoggedAgent good("--node-name good --pid " + std::to_string(rank0.pid()));
  LoggedAgent doomed("--node-name doomed --pid " + std::to_string(rank1.pid()));
  // Never answers: the kernel completes the TCP handshake on the listener's backlog, then
  // nothing is ever read or written.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(silent, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string silent_address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  // Garbage: bytes that are not HTTP/2, then the connection closes.
  testing::LoopbackPeer garbage([](int fd) {
    std::string noise(4096, '\0');
    for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 131) ^ 0x5a);
    testing::LoopbackPeer::write(fd, noise);
  });
  const std::string garbage_address = "127.0.0.1:" + std::to_string(garbage.port());
  // Killed mid-answer: it is asked for 3 samples 1 s apart and killed after the first.
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    doomed.process.kill_all();
  });
  const std::string dir = testing::temp_path("faults");
  const auto begin = Clock::now();
  const auto result = testing::run_command(
      std::string(HANGSCOPE_BINARY) + " diagnose --agents " + good.address + "," + doomed.address +
      "," + silent_address + "," + garbage_address + " --samples 3 --interval 1s --json -o " + dir);
  const auto took = Clock::now() - begin;
  killer.join();
  ::close(silent);
  std::system(("rm -rf " + dir).c_str());
  const auto report = nlohmann::json::parse(result.out);
  std::map<std::string, std::string> status_of;
  for (const auto& n : report["nodes"]) status_of[n.value("address", "")] = n["status"];
  EXPECT_EQ(status_of[good.address], "ok") << report["nodes"].dump();
  EXPECT_EQ(status_of[doomed.address], "unreachable") << report["nodes"].dump();
  EXPECT_EQ(status_of[silent_address], "unreachable") << report["nodes"].dump();
  EXPECT_NE(status_of[garbage_address], "ok") << report["nodes"].dump();
  EXPECT_NE(status_of[garbage_address], "");
  ASSERT_EQ(report["ranks"].size(), 2u);
  EXPECT_EQ(report["ranks"][0]["node"], "good");
  EXPECT_EQ(report["ranks"][1]["state"], "unknown");
  // Within the deadline diagnose sets: 30 s + the sampling window.
  EXPECT_LT(took, std::chrono::seconds(40));
  EXPECT_TRUE(testing::no_thread_stopped(rank0.pid()));
  EXPECT_TRUE(testing::no_thread_stopped(rank1.pid()));
}

// Secrets planted everywhere a rank keeps them (environment, command line, its log, a cache file
// hangscope reads, a local of the waiting frame) reach no byte hangscope writes: the agent's own
// debug log, diagnose's debug log and stdout, and every file of the bundle.
TEST(AgentSecurity, PlantedSecretsReachNoOutputByteThroughAnAgent) {
  const std::string work = testing::temp_path("secret-work");
  const std::string autotune = work + "/autotune";
  const std::string compile = work + "/vllm/torch_compile_cache/abc123/rank_0_0";
  ASSERT_EQ(testing::run_command("mkdir -p " + autotune + " " + compile).exit_code, 0);
  std::ofstream(autotune + "/autotune_configs.json")
      << R"json({"('gemm', tp_rank=0)": [1, 2], "hub_token": "hf_planted_in_cache_file"})json";
  std::ofstream(compile + "/graph.py") << "TOKEN = 'hf_planted_in_compile_cache'\n";
  const std::string log = work + "/rank.log";
  const auto rank =
      testing::start_secret_rank(log, {{"VLLM_API_KEY", "planted-vllm-key"},
                                       {"HF_TOKEN", "hf_planted_in_env"},
                                       {"AWS_SECRET_ACCESS_KEY", "planted-aws-secret"},
                                       {"VLLM_CACHE_ROOT", work + "/vllm"},
                                       {"VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR", autotune}});
  const std::string token = work + "/token";
  std::ofstream(token) << "planted-agent-token\n";
  std::string everything;
  {
    const LoggedAgent agent("--token-file " + token + " --log " + log + " --pid " +
                            std::to_string(rank->pid()));
    const std::string dir = work + "/bundle";
    const auto out = testing::run_command(
        std::string(HANGSCOPE_BINARY) + " --log-level debug diagnose --agents " + agent.address +
        " --token-file " + token + " --samples 2 --interval 100ms --json -o " + dir);
    const auto report = nlohmann::json::parse(out.out);
    ASSERT_EQ(report["nodes"][0]["status"], "ok") << report["nodes"].dump();
    ASSERT_EQ(report["ranks"].size(), 1u);
    EXPECT_EQ(report["ranks"][0]["wait_point"]["function"], "serve");
    EXPECT_EQ(report["ranks"][0]["wait_point"]["arguments"]["hub_token"], "<masked>");
    everything = out.out + out.err + agent.logged() +
                 testing::run_command("cat " + dir + "/* " + dir + "/snapshots/* 2>/dev/null").out;
    // The cache files were really looked at: their derived facts are in the snapshots.
    EXPECT_NE(everything.find("autotune_configs.json: 72 bytes"), std::string::npos);
    EXPECT_NE(everything.find("keys for tp_rank 0"), std::string::npos);
    EXPECT_NE(everything.find("abc123"), std::string::npos);
  }
  std::size_t leaks = 0;
  for (const char* secret :
       {"hf_planted_in_log", "sk-planted-in-cmdline", "planted-vllm-key", "hf_planted_in_env",
        "planted-aws-secret", "planted-bearer-in-log", "planted-url-password",
        "hf_planted_in_local_value", "hf_planted_in_cache_file", "hf_planted_in_compile_cache",
        "planted-agent-token"}) {
    const bool leaked = everything.find(secret) != std::string::npos;
    EXPECT_FALSE(leaked) << secret;
    leaks += leaked;
  }
  std::cout << "secret-leak test: 11 secrets planted, " << everything.size()
            << " output bytes checked, " << leaks << " leaked\n";
  std::system(("rm -rf " + work).c_str());
}

}  // namespace
}  // namespace hangscope
