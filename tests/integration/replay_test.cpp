// `collect --replay` as the coordinator meets it (issue 36): replayed nodes take each sample when
// it is due, every node at the moment diagnose set, and a busy node is asked again. Behaviour,
// not speed: the tolerances are far above what a loaded machine adds.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "diagnose_run.h"
#include "target_process.h"

namespace hangscope {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The first port of `count` consecutive loopback ports free now, below the kernel's ephemeral
// range (where a replay listens: no client is ever given one of those ports), or 0.
int free_ports(int count) {
  int ephemeral = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral;
  for (int base = 20000 + static_cast<int>(::getpid() % 400) * 20; base + count < ephemeral;
       base += 97) {
    std::vector<int> held;
    for (int i = 0; i < count; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<std::uint16_t>(base + i));
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        break;
      }
      held.push_back(fd);
    }
    for (const int fd : held) ::close(fd);
    if (static_cast<int>(held.size()) == count) return base;
  }
  return 0;
}

// `nodes` recorded nodes, each one sample of a rank of its own (collect --once), replayed by one
// `collect --replay` process from its first port up.
class ReplayedNodes {
 public:
  explicit ReplayedNodes(int nodes, const std::map<std::string, std::string>& env = {}) {
    for (int i = 0; i < nodes; ++i) {
      ranks_.push_back(std::make_unique<testing::TargetProcess>(
          std::vector<std::string>{NATIVE_TARGET},
          std::map<std::string, std::string>{{"RANK", std::to_string(i)},
                                             {"WORLD_SIZE", std::to_string(nodes)},
                                             {"MASTER_ADDR", "10.0.0.9"},
                                             {"MASTER_PORT", "29500"}}));
      ranks_.back()->wait_for_line("ready");
      files_.push_back(testing::temp_path("replayed-node-" + std::to_string(i) + ".json"));
      const auto recorded =
          testing::run_command(std::string(HANGSCOPE_BINARY) + " collect --once -o " +
                               files_.back() + " --node-name replayed-" + std::to_string(i) +
                               " --pid " + std::to_string(ranks_.back()->pid()));
      EXPECT_EQ(recorded.exit_code, 0) << recorded.err;
    }
    // The ranks are recorded: the replay alone answers from here on.
    ranks_.clear();
    base_ = free_ports(nodes);
    EXPECT_GT(base_, 0) << "no " << nodes << " free loopback ports below the ephemeral range";
    std::vector<std::string> argv{HANGSCOPE_BINARY, "collect", "--listen",
                                  "127.0.0.1:" + std::to_string(base_), "--replay"};
    argv.insert(argv.end(), files_.begin(), files_.end());
    replay_ = std::make_unique<testing::TargetProcess>(argv, env);
    replay_->wait_for_line("listening on ");
  }
  ~ReplayedNodes() {
    replay_.reset();  // killed with its process group
    for (const auto& file : files_) ::unlink(file.c_str());
  }

  std::string agents() const {
    std::string list;
    for (std::size_t i = 0; i < files_.size(); ++i) {
      list +=
          (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(base_ + static_cast<int>(i));
    }
    return list;
  }

 private:
  std::vector<std::unique_ptr<testing::TargetProcess>> ranks_;
  std::vector<std::string> files_;
  int base_ = 0;
  std::unique_ptr<testing::TargetProcess> replay_;
};

// Each node's samples in the bundle: sample index -> capture time on the coordinator's clock (the
// node's capture time less its clock offset, as nodes.json gives it).
std::map<std::string, std::map<int, std::int64_t>> sample_times(const std::string& bundle) {
  std::map<std::string, std::map<int, std::int64_t>> times;
  nlohmann::json nodes;
  std::ifstream(bundle + "/nodes.json") >> nodes;
  for (const auto& node : nodes) {
    if (node["status"] != "ok") continue;
    const std::string name = node["name"];
    const std::int64_t offset = node["clock_offset_ns"];
    nlohmann::json file;
    std::ifstream(bundle + "/snapshots/" + name + ".json") >> file;
    for (const auto& sample : file["snapshots"]) {
      const int index = sample.value("sample_index", 0);
      times[name][index] = std::stoll(sample["capture_unix_ns"].get<std::string>()) - offset;
    }
  }
  return times;
}

TEST(AgentReplay, ReplayedNodesSampleAtTheirStartTimes) {
  ReplayedNodes replayed(3);
  const std::string bundle = testing::temp_path("replay-bundle");
  const std::int64_t asked = now_ns();
  const auto diagnosis = testing::run_diagnose(
      "--agents " + replayed.agents() + " --samples 3 --interval 500ms", bundle);
  ASSERT_EQ(diagnosis.report["nodes"].size(), 3u) << diagnosis.err;
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(diagnosis.node_status(i), "ok") << diagnosis.err;
  const auto times = sample_times(bundle);
  ASSERT_EQ(times.size(), 3u) << diagnosis.err;
  const std::int64_t interval = 500'000'000, tolerance = 100'000'000;
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto& [node, samples] : times) {
    // Three samples though one was recorded: the last recorded one, taken again when due.
    ASSERT_EQ(samples.size(), 3u) << node;
    const std::int64_t start = samples.at(0);
    // Sample 0 was set ahead of the request (at least 500 ms), not taken on arrival.
    EXPECT_GE(start, asked + 400'000'000) << node;
    for (const auto& [index, at] : samples) {
      EXPECT_NEAR(static_cast<double>(at - start), static_cast<double>(index * interval),
                  static_cast<double>(tolerance))
          << node << " sample " << index;
    }
    first = std::min(first, start);
    last = std::max(last, start);
  }
  // Every node took sample 0 at the one moment set for all.
  EXPECT_LT(last - first, tolerance)
      << "sample 0 spread over " << (last - first) / 1'000'000 << " ms";
  testing::run_command("rm -rf " + bundle);
}

TEST(AgentReplay, BusyNodesAreAskedAgainUntilTheyAnswer) {
  // Every replayed node refuses its first two Capture calls as busy.
  ReplayedNodes replayed(2, {{"HANGSCOPE_REPLAY_BUSY_CALLS", "2"}});
  const auto diagnosis = testing::run_diagnose("--agents " + replayed.agents() + " --samples 1");
  ASSERT_EQ(diagnosis.report["nodes"].size(), 2u) << diagnosis.err;
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(diagnosis.node_status(i), "ok") << diagnosis.node_error(i);
  }
  EXPECT_EQ(diagnosis.report["ranks"].size(), 2u);
}

TEST(AgentReplay, EveryAddressIsANodeAndOneThatDidNotAnswerSaysWhy) {
  ReplayedNodes replayed(2);
  const int closed = free_ports(1);
  ASSERT_GT(closed, 0);
  const auto diagnosis = testing::run_diagnose(
      "--agents " + replayed.agents() + ",127.0.0.1:" + std::to_string(closed) + " --samples 1");
  ASSERT_EQ(diagnosis.report["nodes"].size(), 3u) << diagnosis.err;
  EXPECT_EQ(diagnosis.node_status(0), "ok");
  EXPECT_EQ(diagnosis.node_status(1), "ok");
  EXPECT_EQ(diagnosis.node_status(2), "unreachable");
  EXPECT_NE(diagnosis.node_error(2).find("127.0.0.1:" + std::to_string(closed)), std::string::npos)
      << diagnosis.node_error(2);
}

}  // namespace
}  // namespace hangscope
