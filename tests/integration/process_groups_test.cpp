// torch.distributed's process groups read from real gloo ranks' memory
// (tests/fixtures/python/process_groups.py): the rank and world size agree with the environment
// the launcher gave (a self-check of the C++ ProcessGroup read), every group's members and this
// rank's place in it, the sequence numbers torch itself reports, and a frame's `group` argument
// shown as the group it is. Once with torch 1.13's registry, once rewritten into torch 2.x's
// `_world` layout. SGLang's GroupCoordinator and Megatron's parallel_state label the TP group.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <sstream>

#include "hangscope/capture/process_capture.h"
#include "target_process.h"

namespace hangscope {
namespace {

constexpr const char* kGroupsPython = "/usr/bin/python3";
const std::string kGroupsScript = HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/process_groups.py";
constexpr int kWorld = 4;

struct Ready {
  pid_t pid = 0;
  std::uint64_t sequence = 0;  // of its tp group, as torch reports it
};

Ready parse_ready(const std::string& line) {  // "rank R pid P ready seq S"
  std::istringstream in(line);
  std::string word;
  int rank = 0;
  Ready ready;
  in >> word >> rank >> word >> ready.pid >> word >> word >> ready.sequence;
  return ready;
}

const model::ProcessGroupState* group_with(const model::DistributedState& state,
                                           const std::vector<int>& ranks) {
  for (const auto& g : state.groups) {
    if (g.ranks == ranks) return &g;
  }
  return nullptr;
}

std::optional<std::string> local_of(const model::ProcessDump& dump, const std::string& function,
                                    const std::string& name) {
  for (const auto& t : dump.threads) {
    for (const auto& f : t.python_frames) {
      if (f.function != function) continue;
      for (const auto& [key, value] : f.locals) {
        if (key == name) return value;
      }
    }
  }
  return std::nullopt;
}

class ProcessGroups : public ::testing::TestWithParam<std::string> {};

TEST_P(ProcessGroups, RankGroupsAndSequencesComeFromMemory) {
  if (::access(kGroupsPython, X_OK) != 0)
    GTEST_SKIP() << kGroupsPython << " missing (tools/install-deps.sh)";
  const int port = GetParam() == "torch-2" ? 29533 : 29532;
  testing::TargetProcess job({kGroupsPython, kGroupsScript, "--world-size", std::to_string(kWorld),
                              "--port", std::to_string(port), "--layout", GetParam()});
  std::map<int, Ready> ready;
  for (int r = 0; r < kWorld; ++r) {
    ready[r] = parse_ready(
        job.wait_for_line("rank " + std::to_string(r) + " pid", std::chrono::seconds(120)));
    ASSERT_GT(ready[r].pid, 0);
  }
  capture::CaptureOptions options;
  options.locals = true;
  std::map<std::string, std::uint64_t> sequences;  // tp group name → sequence read
  for (int r = 0; r < kWorld; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto dump = capture::capture_process(ready[r].pid, options);
    ASSERT_TRUE(dump.distributed.has_value());
    const auto& state = *dump.distributed;
    EXPECT_EQ(state.registry, GetParam());
    // The launcher's RANK, read back from the C++ ProcessGroup.
    EXPECT_EQ(state.rank, r);
    EXPECT_EQ(state.world_size, kWorld);
    EXPECT_TRUE(state.notes.empty()) << state.notes.front();
    const auto* world = state.default_group();
    ASSERT_NE(world, nullptr);
    EXPECT_EQ(world->name, "0");
    EXPECT_EQ(world->backend, "gloo");
    EXPECT_EQ(world->group_rank, r);
    // Only the groups this rank is in: its tp pair and its parity group, plus the world.
    EXPECT_EQ(state.groups.size(), 3u);
    const int first = r - r % 2;
    const auto* tp = group_with(state, {first, first + 1});
    ASSERT_NE(tp, nullptr);
    EXPECT_EQ(tp->group_rank, r % 2);
    ASSERT_TRUE(tp->sequence.has_value());
    EXPECT_EQ(*tp->sequence, ready[r].sequence);  // what torch itself said
    if (r % 2 == 1) {
      EXPECT_EQ(sequences[tp->name], *tp->sequence) << "the pair agrees";
    }
    sequences[tp->name] = *tp->sequence;
    // The wrappers that name it: SGLang's GroupCoordinator and Megatron's parallel_state.
    EXPECT_EQ(tp->labels, (std::vector<std::string>{"sglang:tp", "megatron:tp"}));
    EXPECT_EQ(state.coordinates.at("tp"), r % 2);
    const auto* parity = group_with(state, r % 2 ? std::vector<int>{1, 3} : std::vector<int>{0, 2});
    ASSERT_NE(parity, nullptr);
    EXPECT_EQ(parity->group_rank, r / 2);
    // The waiting frame's `group` argument is shown as that group.
    EXPECT_EQ(local_of(dump, "hold_groups", "group"), "<process group " + parity->name + ">");
  }
}

INSTANTIATE_TEST_SUITE_P(Registries, ProcessGroups, ::testing::Values("torch-1.13", "torch-2"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param == "torch-2" ? std::string("torch2")
                                                           : std::string("torch113");
                         });

}  // namespace
}  // namespace hangscope
