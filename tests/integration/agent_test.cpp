// Real agents over real gRPC on loopback: diagnose gathers their snapshots; a wrong token is
// refused, a dead agent is unreachable, and the other nodes' ranks still come out.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "diagnose_run.h"
#include "python_targets.h"
#include "target_process.h"

namespace hangscope {
namespace {

testing::CommandResult run(const std::string& command) {
  return testing::run_command(command);
}

std::string write_token(const std::string& token) {
  const std::string path = testing::temp_path("token");
  std::ofstream(path) << token << "\n";
  return path;
}

// An agent on an ephemeral loopback port, capturing only the given process.
struct Agent {
  testing::TargetProcess process;
  std::string address;
  Agent(const std::string& node, const std::string& token_file, pid_t pid)
      : process({HANGSCOPE_BINARY, "collect", "--listen", "127.0.0.1:0", "--token-file", token_file,
                 "--node-name", node, "--pid", std::to_string(pid)}) {
    address = process.wait_for_line("listening on ").substr(13);
  }
};

// diagnose through `agents` with `token_file`: two samples 100 ms apart, the bundle thrown away.
testing::Diagnosis diagnose(const std::string& agents, const std::string& token_file) {
  return testing::run_diagnose("--agents " + agents + " --token-file " + token_file +
                               " --samples 2 --interval 100ms");
}

const nlohmann::json* node_named(const nlohmann::json& report, const std::string& name) {
  for (const auto& n : report["nodes"]) {
    if (n["name"] == name) return &n;
  }
  return nullptr;
}

TEST(Agents, DiagnoseGathersRanksFromEveryAgentAndReportsTheFailedOnes) {
  testing::TargetProcess rank0({NATIVE_TARGET}, {{"RANK", "0"},
                                                 {"WORLD_SIZE", "2"},
                                                 {"MASTER_ADDR", "10.0.0.1"},
                                                 {"MASTER_PORT", "29500"},
                                                 {"HF_TOKEN", "hf_planted_secret"}});
  testing::TargetProcess rank1(
      {NATIVE_TARGET},
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  rank0.wait_for_line("ready");
  rank1.wait_for_line("ready");
  const std::string token = write_token("correct-horse");
  const std::string wrong = write_token("wrong-token");
  Agent a("node-a", token, rank0.pid());
  Agent b("node-b", token, rank1.pid());
  Agent c("node-c", wrong, rank1.pid());  // expects another token: refuses us

  const auto diagnosis = diagnose(a.address + "," + b.address + "," + c.address, token);
  const auto& report = diagnosis.report;
  EXPECT_EQ(diagnosis.exit_code, 3);  // a node refused: a verdict
  EXPECT_EQ(report["schema"], "hangscope.report/v1");
  ASSERT_FALSE(report["verdicts"].empty());
  EXPECT_EQ(report["verdicts"][0]["id"], "node-refused");
  ASSERT_NE(node_named(report, "node-a"), nullptr);
  EXPECT_EQ((*node_named(report, "node-a"))["status"], "ok");
  EXPECT_EQ((*node_named(report, "node-b"))["status"], "ok");
  bool refused = false;
  for (const auto& n : report["nodes"])
    refused = refused || (n["status"] == "refused" && n["address"] == c.address);
  EXPECT_TRUE(refused) << report["nodes"].dump();
  ASSERT_EQ(report["ranks"].size(), 2u) << report.dump(1);
  EXPECT_EQ(report["ranks"][0]["rank"], 0);
  EXPECT_EQ(report["ranks"][0]["node"], "node-a");
  EXPECT_EQ(report["ranks"][0]["pid"], rank0.pid());
  EXPECT_EQ(report["ranks"][0]["job"], "10.0.0.1:29500");
  EXPECT_EQ(report["ranks"][1]["rank"], 1);
  EXPECT_EQ(report["ranks"][1]["node"], "node-b");
  EXPECT_EQ(report["samples"], 4);  // 2 samples from each of the 2 answering nodes
  EXPECT_EQ(report.dump().find("hf_planted_secret"), std::string::npos);

  // One agent dies: its node is unreachable, the other's rank is still reported.
  a.process.kill_all();
  const auto after = diagnose(a.address + "," + b.address, token).report;
  bool unreachable = false;
  for (const auto& n : after["nodes"])
    unreachable = unreachable || (n["status"] == "unreachable" && n["address"] == a.address);
  EXPECT_TRUE(unreachable) << after["nodes"].dump();
  ASSERT_EQ(after["ranks"].size(), 2u);  // world size 2: rank 0 is unknown, not dropped
  EXPECT_EQ(after["ranks"][0]["state"], "unknown");
  EXPECT_TRUE(after["ranks"][0]["node"].is_null());
  EXPECT_EQ(after["ranks"][1]["node"], "node-b");
  EXPECT_EQ(after["verdicts"][0]["id"], "node-unreachable");
  EXPECT_TRUE(testing::no_thread_stopped(rank0.pid()));
  EXPECT_TRUE(testing::no_thread_stopped(rank1.pid()));
  ::unlink(token.c_str());
  ::unlink(wrong.c_str());
}

TEST(Agents, OfflineFilesAndLocalCaptureGiveTheSameRankTable) {
  testing::TargetProcess rank(
      {NATIVE_TARGET},
      {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.2"}, {"MASTER_PORT", "29400"}});
  rank.wait_for_line("ready");
  const std::string file = testing::temp_path("node.pb");
  const std::string pid = std::to_string(rank.pid());
  ASSERT_EQ(run(std::string(HANGSCOPE_BINARY) + " collect --once -o " + file +
                " --node-name n0 --pid " + pid)
                .exit_code,
            0);
  const std::string dir1 = testing::temp_path("b1"), dir2 = testing::temp_path("b2");
  const auto offline = nlohmann::json::parse(
      run(std::string(HANGSCOPE_BINARY) + " diagnose " + file + " --json -o " + dir1).out);
  const auto local =
      nlohmann::json::parse(run(std::string(HANGSCOPE_BINARY) + " diagnose --samples 1 --pid " +
                                pid + " --json -o " + dir2)
                                .out);
  ASSERT_EQ(offline["ranks"].size(), 4u);  // world size 4: ranks 0-2 are missing
  EXPECT_EQ(offline["ranks"][0]["state"], "missing");
  EXPECT_EQ(offline["ranks"][3]["rank"], 3);
  EXPECT_EQ(offline["ranks"][3]["node"], "n0");
  // The node name differs by design; the host's interfaces may change between the two
  // captures (other tests add virtual-cluster veths meanwhile).
  auto strip_node = [](nlohmann::json ranks) {
    for (auto& r : ranks) {
      r.erase("node");
      if (r.contains("facts") && r["facts"].is_object()) r["facts"].erase("net.interfaces");
    }
    return ranks;
  };
  EXPECT_EQ(strip_node(offline["ranks"]), strip_node(local["ranks"]));
  std::system(("rm -rf " + dir1 + " " + dir2 + " " + file).c_str());
}

TEST(Agents, BadSnapshotFileIsReportedAndTheRestStillComesOut) {
  const std::string bad = testing::temp_path("garbage.json");
  std::ofstream(bad) << "{ this is not a snapshot";
  const std::string dir = testing::temp_path("b3");
  const auto result = run(std::string(HANGSCOPE_BINARY) + " diagnose " + bad + " --json -o " + dir);
  EXPECT_EQ(result.exit_code, 1);  // nothing could be read: a failure, not "no hang"
  const auto report = nlohmann::json::parse(result.out);
  ASSERT_EQ(report["nodes"].size(), 1u);
  EXPECT_EQ(report["nodes"][0]["status"], "error");
  EXPECT_NE(report["nodes"][0]["error"].get<std::string>().find(bad), std::string::npos);
  std::system(("rm -rf " + dir + " " + bad).c_str());
}

TEST(Agents, NonLoopbackListenerWithoutAuthenticationIsRefused) {
  const auto result = run(std::string(HANGSCOPE_BINARY) + " collect --listen 0.0.0.0:0");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("without authentication"), std::string::npos) << result.err;
  // Forced with --insecure: it serves, with a warning in its log.
  const std::string log = testing::temp_path("insecure-log");
  {
    testing::TargetProcess agent({"/bin/sh", "-c",
                                  "exec " + std::string(HANGSCOPE_BINARY) +
                                      " collect --listen 0.0.0.0:0 --insecure 2>" + log});
    agent.wait_for_line("listening on ");
    EXPECT_TRUE(testing::eventually([&] {
      std::ifstream in(log);
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      return text.find("without authentication (--insecure)") != std::string::npos;
    }));
  }
  ::unlink(log.c_str());
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

// Secrets planted in a rank's environment, command line and log appear nowhere in the report
// or the snapshots, while the log line itself is kept (masked).
TEST(Agents, PlantedSecretsAppearInNoOutputFile) {
  const std::string log = testing::temp_path("rank.log");
  const auto rank = testing::start_secret_rank(log, {{"VLLM_API_KEY", "planted-vllm-key"},
                                                     {"HF_TOKEN", "hf_planted_in_env"},
                                                     {"MY_DB_PASSWORD", "planted-db-password"}});
  const std::string dir = testing::temp_path("secrets");
  // Two samples with locals (diagnose's default): every output file of the bundle.
  const auto out = run(std::string(HANGSCOPE_BINARY) +
                       " diagnose --samples 2 --interval 100ms "
                       "--pid " +
                       std::to_string(rank->pid()) + " --json -o " + dir);
  const auto report = nlohmann::json::parse(out.out);
  ASSERT_EQ(report["ranks"].size(), 1u);
  const auto& lines = report["ranks"][0]["log_lines"];
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "WARNING HF_TOKEN=<masked>");
  // The waiting frame's locals were captured, their values masked.
  const auto& arguments = report["ranks"][0]["wait_point"]["arguments"];
  EXPECT_EQ(report["ranks"][0]["wait_point"]["function"], "serve");
  EXPECT_EQ(arguments["api_key"], "<masked>") << arguments.dump();
  EXPECT_EQ(arguments["hub_token"], "<masked>") << arguments.dump();
  const auto files = run("ls " + dir + " " + dir + "/snapshots").out;
  for (const char* name : {"report.md", "report.json", "tree.dot", "stacks.folded", "nodes.json"}) {
    EXPECT_NE(files.find(name), std::string::npos) << name;
  }
  const auto everything =
      out.out + out.err + run("cat " + dir + "/* " + dir + "/snapshots/* 2>/dev/null").out;
  for (const char* secret : {"hf_planted_in_log", "sk-planted-in-cmdline", "planted-vllm-key",
                             "hf_planted_in_env", "planted-db-password", "planted-bearer-in-log",
                             "planted-url-password", "hf_planted_in_local_value"}) {
    EXPECT_EQ(everything.find(secret), std::string::npos) << secret;
  }
  EXPECT_NE(everything.find("--api-key "), std::string::npos);  // kept, its value masked
  std::system(("rm -rf " + dir + " " + log).c_str());
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

TEST(Agents, SigtermShutsTheAgentDownCleanly) {
  testing::TargetProcess agent(
      {HANGSCOPE_BINARY, "--log-level", "info", "collect", "--listen", "127.0.0.1:0"});
  agent.wait_for_line("listening on ");
  ASSERT_EQ(::kill(agent.pid(), SIGTERM), 0);
  int status = 0;
  ASSERT_TRUE(
      testing::eventually([&] { return ::waitpid(agent.pid(), &status, WNOHANG) == agent.pid(); },
                          std::chrono::seconds(10)));
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

TEST(Agents, SharedLogLinesGoToTheirRankByPid) {
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  rank.wait_for_line("ready");
  const std::string log = testing::temp_path("vllm.log");
  {
    std::ofstream out(log);
    out << "(Worker_TP0 pid=" << rank.pid()
        << ") INFO world_size=2 rank=0 local_rank=0 backend=gloo\n"
        << "(Worker_TP1 pid=999999) INFO world_size=2 rank=1 local_rank=1 backend=gloo\n"
        << "(Worker_TP0 pid=" << rank.pid() << ") WARNING token=hf_planted_shared\n";
  }
  const std::string file = testing::temp_path("node.json");
  ASSERT_EQ(run(std::string(HANGSCOPE_BINARY) + " collect --once -o " + file + " --pid " +
                std::to_string(rank.pid()) + " --log '" + log.substr(0, log.size() - 4) + "*.log'")
                .exit_code,
            0);
  const std::string dir = testing::temp_path("b4");
  const auto report = nlohmann::json::parse(
      run(std::string(HANGSCOPE_BINARY) + " diagnose " + file + " --json -o " + dir).out);
  ASSERT_EQ(report["ranks"].size(), 2u);  // rank 1 of 2 is missing
  const auto& lines = report["ranks"][0]["log_lines"];
  ASSERT_EQ(lines.size(), 2u) << lines.dump();
  EXPECT_NE(lines[0].get<std::string>().find("world_size=2 rank=0"), std::string::npos);
  EXPECT_EQ(lines[1].get<std::string>().find("hf_planted_shared"), std::string::npos);
  std::system(("rm -rf " + dir + " " + file + " " + log).c_str());
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

TEST(Agents, SelectorNarrowsTheLocalCaptureToMatchingCommandLines) {
  const std::string marker = "hangscope_select_marker_" + std::to_string(::getpid());
  testing::TargetProcess wanted({"/usr/bin/python3", "-c",
                                 "import time,os; os.write(1, b'ready\\n'); time.sleep(600)",
                                 marker});
  wanted.wait_for_line("ready");
  const std::string dir = testing::temp_path("b5");
  const auto result = run(std::string(HANGSCOPE_BINARY) + " diagnose --samples 1 --select " +
                          marker + " --json -o " + dir);
  // The one process selected is no rank: a failure (nothing to diagnose), with the report.
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("no rank process found on this node"), std::string::npos) << result.err;
  const auto report = nlohmann::json::parse(result.out);
  ASSERT_EQ(report["processes"].size(), 1u) << report.dump(1);
  EXPECT_EQ(report["processes"][0]["pid"], wanted.pid());
  const auto bad =
      run(std::string(HANGSCOPE_BINARY) + " diagnose --samples 1 --select '(' -o " + dir + "-bad");
  EXPECT_EQ(bad.exit_code, 2);  // bad usage, before any sampling
  EXPECT_NE(bad.err.find("not a valid regular expression"), std::string::npos) << bad.err;
  std::system(("rm -rf " + dir).c_str());
}

// TLS: the agent serves with a certificate; diagnose trusts it through --tls-ca; a client that
// does not trust it gets nothing.
TEST(Agents, TlsAgentIsReachedWithItsCaAndRefusedWithout) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl missing";
  const std::string dir = testing::temp_path("tls");
  ASSERT_EQ(
      run("mkdir -p " + dir + " && cd " + dir +
          " && openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 1 "
          "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1")
          .exit_code,
      0);
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  testing::TargetProcess agent({HANGSCOPE_BINARY, "collect", "--listen", "127.0.0.1:0",
                                "--tls-cert", dir + "/cert.pem", "--tls-key", dir + "/key.pem",
                                "--pid", std::to_string(rank.pid())});
  const std::string address = agent.wait_for_line("listening on ").substr(13);
  const auto port = address.substr(address.rfind(':') + 1);
  const auto trusted = nlohmann::json::parse(
      run(std::string(HANGSCOPE_BINARY) + " diagnose --agents localhost:" + port + " --tls-ca " +
          dir + "/cert.pem --samples 1 --json -o " + dir + "/b1")
          .out);
  EXPECT_EQ(trusted["nodes"][0]["status"], "ok") << trusted["nodes"].dump();
  EXPECT_EQ(trusted["ranks"].size(), 1u);
  const auto plain = nlohmann::json::parse(run(std::string(HANGSCOPE_BINARY) +
                                               " diagnose --agents localhost:" + port +
                                               " --samples 1 --json -o " + dir + "/b2")
                                               .out);
  EXPECT_NE(plain["nodes"][0]["status"], "ok");
  EXPECT_TRUE(plain["ranks"].empty());
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

// mTLS: an agent started with --tls-ca answers only clients holding a certificate of that CA.
TEST(Agents, MutualTlsRequiresAClientCertificate) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl missing";
  const std::string dir = testing::temp_path("mtls");
  const std::string make_certs = "mkdir -p " + dir + " && cd " + dir +
                                 " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key "
                                 "-out ca.pem -days 1 -subj /CN=hangscope-test-ca"
                                 " && openssl req -newkey rsa:2048 -nodes -keyout server.key -out "
                                 "server.csr -subj /CN=localhost"
                                 " && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext"
                                 " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                                 "-CAcreateserial -out server.pem -days 1"
                                 " -extfile san.ext"
                                 " && openssl req -newkey rsa:2048 -nodes -keyout client.key -out "
                                 "client.csr -subj /CN=diagnose"
                                 " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
                                 "-CAcreateserial -out client.pem -days 1";
  ASSERT_EQ(run(make_certs).exit_code, 0);
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  testing::TargetProcess agent({HANGSCOPE_BINARY, "collect", "--listen", "127.0.0.1:0",
                                "--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key",
                                "--tls-ca", dir + "/ca.pem", "--pid", std::to_string(rank.pid())});
  const std::string address = agent.wait_for_line("listening on ").substr(13);
  const std::string target = "localhost:" + address.substr(address.rfind(':') + 1);
  const std::string base = std::string(HANGSCOPE_BINARY) + " diagnose --agents " + target +
                           " --tls-ca " + dir + "/ca.pem --samples 1 --json -o " + dir;
  const auto with_cert = nlohmann::json::parse(
      run(base + "/bundle --tls-cert " + dir + "/client.pem --tls-key " + dir + "/client.key").out);
  EXPECT_EQ(with_cert["nodes"][0]["status"], "ok") << with_cert["nodes"].dump();
  EXPECT_EQ(with_cert["ranks"].size(), 1u);
  const auto refused = run(base + "/bundle-without-cert");
  EXPECT_EQ(refused.exit_code, 1) << refused.err;  // the only node refused: no rank looked at
  const auto without_cert = nlohmann::json::parse(refused.out);
  EXPECT_NE(without_cert["nodes"][0]["status"], "ok");
  EXPECT_TRUE(without_cert["ranks"].empty());
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace hangscope
