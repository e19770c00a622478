// Inputs that cost far more to read than their size (issue 30, "amplification / budget"): the
// flight-recorder pickle's memo bomb, strings shared through the memo, values that contain
// themselves, deep and huge JSON. Each is refused with the reason, in bounded time and memory;
// and memo references are shared as Python's Unpickler shares them, so pickles that Python's own
// pickle writes read back with their values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "command.h"
#include "hangscope/collectives/flight_recorder.h"
#include "hangscope/collectives/torch_pickle.h"
#include "hangscope/common/bounded_json.h"
#include "hangscope/common/error.h"
#include "hangscope/facts/caches.h"
#include "hangscope/snapshot/codec.h"
#include "hostile_inputs.h"
#include "target_process.h"

namespace hangscope::collectives {
namespace {

using nlohmann::json;

// A string literal's bytes, NULs included.
template <std::size_t N>
std::string bytes_of(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

// The peak resident set of this process (VmHWM, KiB), after resetting it when asked
// (/proc/self/clear_refs "5"); nullopt where the kernel does not allow either.
std::optional<long> peak_rss_kib(bool reset = false) {
  if (reset) {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    if (!clear) return std::nullopt;
  }
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return std::nullopt;
}

// Sanitizer builds keep shadow memory beside every allocation.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HANGSCOPE_AMPLIFICATION_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HANGSCOPE_AMPLIFICATION_SANITIZED 1
#endif
#ifdef HANGSCOPE_AMPLIFICATION_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST(Amplification, MemoBombIsRefusedInBoundedTimeAndMemory) {
  const std::string bomb = testing::memo_bomb_pickle();  // six lists of 1,000 BINGETs
  ASSERT_LT(bomb.size(), 13'000u);
  const auto before = peak_rss_kib(true);
  const auto started = std::chrono::steady_clock::now();

  // Decoding shares the references: a node per opcode at most, a few hundred KiB.
  const Pickle pickle = decode_torch_pickle(bomb);
  EXPECT_LT(pickle.node_count(), 100u);
  EXPECT_LT(pickle.decoded_bytes(), 64u << 10);

  // Expanding it is what would explode (1,000^6 values): refused at the budget.
  const auto dump = error_of([&] { parse_flight_record(bomb); });
  EXPECT_NE(dump.find("pickle: more than 2097152 values to expand"), std::string::npos) << dump;
  EXPECT_NE(dump.find("memo bomb"), std::string::npos) << dump;
  EXPECT_NE(dump.find("refused"), std::string::npos) << dump;
  const auto whole = error_of([&] { unpickle_torch(bomb); });
  EXPECT_NE(whole.find("values to expand"), std::string::npos) << whole;

  const auto took = std::chrono::steady_clock::now() - started;
  // A bound that catches an expansion without a budget (1000^6 values), not a speed test: ~0.5 s
  // in build/, ~20 s in the ASan Debug build under load.
  EXPECT_LT(took, std::chrono::seconds(120));
  const auto after = peak_rss_kib();
  if (before && after) {
    // Measured: 180 MiB (the values expanded until the budget ran out); ThreadSanitizer's shadow
    // memory makes that about 800 MiB. Without the budget it was 2.8 GB and an abort.
    EXPECT_LT(*after - *before, kSanitized ? 2048 * 1024 : 512 * 1024)
        << "peak RSS grew by " << (*after - *before) << " KiB";
  }
}

// The agent's live read: a bomb at a rank's dump path (the default /tmp/nccl_trace_rank_N is
// writable by any local user) is that rank's record error, never the end of the agent.
TEST(Amplification, ABombAtARanksDumpPathIsThatRanksError) {
  const auto root = testing::temp_path("fr-bomb-root");
  std::system(("mkdir -p " + root + "/tmp").c_str());
  std::ofstream(root + "/tmp/nccl_trace_rank_3", std::ios::binary) << testing::memo_bomb_pickle();
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  std::optional<model::FlightRecord> record;
  ASSERT_NO_THROW(record =
                      read_flight_record(root, {}, 3, ::getuid(), now, std::chrono::seconds(600)));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->path, "/tmp/nccl_trace_rank_3");
  EXPECT_EQ(record->rank, 3);
  EXPECT_TRUE(record->entries.empty());
  EXPECT_EQ(record->error.rfind("/tmp/nccl_trace_rank_3: pickle: more than 2097152 values", 0), 0u)
      << record->error;
  std::system(("rm -rf " + root).c_str());
}

TEST(Amplification, SharedStringsCountEachReference) {
  // One 1 MiB string, then 1,000 references to it: 1 GiB of strings when expanded.
  std::string p = "\x80\x02]q";
  p += '\0';
  p += "(X";
  const std::uint32_t n = 1u << 20;
  p.append(reinterpret_cast<const char*>(&n), 4);
  p += std::string(n, 'a');
  p += "q\x01";
  for (int i = 0; i < 1000; ++i) p += "h\x01";
  p += "e.";
  const Pickle pickle = decode_torch_pickle(p);
  EXPECT_LT(pickle.decoded_bytes(), 2u << 20);
  const auto error = error_of([&] { unpickle_torch(p); });
  EXPECT_NE(error.find("MiB of strings to expand"), std::string::npos) << error;
}

TEST(Amplification, AValueThatContainsItselfIsRefused) {
  // l = []; l.append(l): Python writes EMPTY_LIST, BINPUT 0, BINGET 0, APPEND.
  const std::string self = bytes_of(
      "\x80\x02]q\x00h\x00"
      "a.");
  const Pickle pickle = decode_torch_pickle(self);
  ASSERT_EQ(pickle.items(pickle.root()).size(), 1u);
  EXPECT_EQ(pickle.items(pickle.root())[0], pickle.root());
  const auto error = error_of([&] { unpickle_torch(self); });
  EXPECT_NE(error.find("nested deeper than 128 levels (or a value that contains itself)"),
            std::string::npos)
      << error;
}

TEST(Amplification, DecodedBytesAreBudgeted) {
  // 100,000 empty lists appended to one: about 4 MiB decoded from 200 KB.
  std::string p = "\x80\x02]";
  for (int i = 0; i < 100'000; ++i) p += "]a";
  p += ".";
  PickleLimits small;
  small.max_decoded_bytes = 1u << 20;
  const auto error = error_of([&] { decode_torch_pickle(p, small); });
  EXPECT_NE(error.find("the decoded values would take more than 1 MiB; refused"), std::string::npos)
      << error;
  EXPECT_NO_THROW(decode_torch_pickle(p));  // the default budget: 256 MiB
}

// What Python's pickle writes (protocol 2) memoises a list before its items are appended and
// refers to it again by BINGET: the reference is the same list, with its items.
TEST(Amplification, SharedListsOfPythonsPickleKeepTheirItems) {
  // pickle.dumps({'x': a, 'y': a}, protocol=2) with a = [1, 2], as Python 3.11 writes it.
  const std::string shared = bytes_of(
      "\x80\x02}q\x00(X\x01\x00\x00\x00xq\x01]q\x02(K\x01K\x02"
      "eX\x01\x00\x00\x00yq\x03h\x02u.");
  EXPECT_EQ(unpickle_torch(shared), json::parse(R"({"x": [1, 2], "y": [1, 2]})"));
  // LONG1 as Python writes it: the fewest bytes, two's complement.
  const std::string ints = bytes_of(
      "\x80\x02]q\x00(\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x06\x00\x00\x00\x00\x00\xff"
      "J\xff\xff\xff\xffK\xffJ\x00\x00\x01\x00J\x7f\xff\xff\xff\x8a\x08\xff\xff\xff\xff\xff\xff"
      "\xff\x7f\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"
      "e.");
  EXPECT_EQ(unpickle_torch(ints),
            json::parse("[1099511627776, -1099511627776, -1, 255, 65536, -129, "
                        "9223372036854775807, -9223372036854775808]"));
}

// The same against the python3 of this machine, on more shapes of sharing: each value pickled
// by Python and read here equals Python's own JSON of it.
TEST(Amplification, PythonsPicklesOfSharedValuesReadAsPythonReadsThem) {
  const std::string script =
      "import json, pickle\n"
      "a = [1, 2]\n"
      "d = {'k': [3, 'x'], 'n': None}\n"
      "s = 'shared string ' * 4\n"
      "t = (a, a)\n"
      "e = []\n"
      "values = [\n"
      "  {'x': a, 'y': a},\n"
      "  [d, d, {'z': d, 'w': [d]}],\n"
      "  {'t': t, 'again': t, 'a': a},\n"
      "  [s, s, {'s': s}],\n"
      "  [e, e, [e]],\n"
      "  {'entries': [{'state': 'started', 'input_sizes': [[3, 4]]}] * 3,\n"
      "   'f': [1.5, True, False, None, -7, 70000, 2**40]},\n"
      "]\n"
      "for v in values:\n"
      "  print(pickle.dumps(v, protocol=2).hex() + ' ' + json.dumps(v))\n";
  const std::string path = ::testing::TempDir() + "hangscope-shared-" + std::to_string(::getpid());
  std::ofstream(path + ".py") << script;
  const auto result = hangscope::testing::run_command("python3 " + path + ".py");
  std::remove((path + ".py").c_str());
  if (result.exit_code != 0) GTEST_SKIP() << "no python3: " << result.err;
  std::istringstream lines(result.out);
  std::string hex, text;
  int read = 0;
  while (lines >> hex && std::getline(lines, text)) {
    std::string bytes;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
      bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    }
    SCOPED_TRACE(text);
    EXPECT_EQ(unpickle_torch(bytes), json::parse(text));
    ++read;
  }
  EXPECT_EQ(read, 6);
}

TEST(Amplification, JsonDepthAndSizeAreBounded) {
  // Nesting deeper than the limit: refused before anything deep is built (nlohmann's dump and
  // copies recurse per level).
  const auto deep = error_of([] { parse_flight_record(testing::deep_json_dump(100'000)); });
  EXPECT_NE(deep.find("JSON dump refused: nested deeper than 64 levels"), std::string::npos)
      << deep;
  JsonLimits few;
  few.max_values = 100;
  const auto many = error_of([&] { parse_json_within(std::string(1000, '[') + "]", few); });
  EXPECT_NE(many.find("more than 100 values"), std::string::npos) << many;
  std::string wide = "[";
  for (int i = 0; i < 200; ++i) wide += "0,";
  wide += "0]";
  EXPECT_NE(error_of([&] { parse_json_within(wide, few); }).find("more than 100 values"),
            std::string::npos);
  few.max_string_bytes = 10;
  EXPECT_NE(error_of([&] {
              parse_json_within(R"(["0123456789abc"])", few);
            }).find("more than 10 bytes of strings"),
            std::string::npos);
}

TEST(Amplification, MembersAFlightRecordDoesNotUseAreNotKept) {
  // Dropped members are parsed, not built and not counted: 1,000 frames within a budget of 100.
  std::string frames = "[";
  for (int i = 0; i < 1000; ++i) frames += R"({"name": "f", "filename": "x.py", "line": 1},)";
  frames += "0]";
  const std::string dump =
      R"({"entries": [{"pg_id": 0, "collective_seq_id": 1, "state": "started", "frames": )" +
      frames + "}], \"nccl_comm_state\": " + frames + "}";
  JsonLimits few;
  few.max_values = 100;
  const auto keep = [](const std::vector<std::string>& path) {
    return !(path.size() == 3 && path[2] == "frames") && path[0] != "nccl_comm_state";
  };
  const auto doc = parse_json_within(dump, few, keep);
  EXPECT_EQ(doc, json::parse(R"({"entries": [{"pg_id": 0, "collective_seq_id": 1,
                                               "state": "started"}]})"));
  // Through the dump reader, both formats keep the same members.
  const auto record = parse_flight_record(dump);
  ASSERT_EQ(record.entries.size(), 0u + 1);
  EXPECT_EQ(record.entries[0].state, model::FlightState::kStarted);
}

// Snapshot files: `{}` is a message of ~300 bytes and its decoded snapshot (9 MB of them took
// 941 MB); refused from an estimate made before parsing, in either form. Real captures pass.
TEST(Amplification, SnapshotFilesOfEmptyMessagesAreRefusedBeforeParsing) {
  std::string text = "{\"snapshots\": [{}";
  for (int i = 0; i < 300'000; ++i) text += ",{}";
  text += "]}";
  const auto refused = error_of([&] { snapshot::parse_file(text, false, "empties.json"); });
  EXPECT_NE(refused.find("snapshot file empties.json: refused: decoding it would take about 91 MiB "
                         "(300002 messages, 0 strings), more than 8 times its size"),
            std::string::npos)
      << refused;
  std::string binary;
  for (int i = 0; i < 300'000; ++i) binary += std::string("\x0a\x00", 2);  // field 1, empty
  const auto binary_refused = error_of([&] { snapshot::parse_file(binary, true, "empties.pb"); });
  EXPECT_NE(binary_refused.find("empties.pb: refused: decoding it would take about 91 MiB "
                                "(300000 messages, 0 strings), more than 64 times its size"),
            std::string::npos)
      << binary_refused;
  // The input limit bounds the estimate too (8 times --max-input-mib): 2 MiB of small messages
  // (56 times their size, which a binary file may take) read with a limit of 4 MiB.
  std::string small_messages;
  while (small_messages.size() < (2u << 20)) {
    small_messages += std::string("\x0a\x04\x08\x01\x08\x01", 6);
  }
  const std::string path =
      ::testing::TempDir() + "hangscope-small-" + std::to_string(::getpid()) + ".pb";
  std::ofstream(path, std::ios::binary) << small_messages;
  const auto over_limit = error_of([&] { snapshot::read_file(path, 4u << 20); });
  std::remove(path.c_str());
  // Small files are never refused by the estimate (under 64 MiB estimated).
  const auto small =
      error_of([] { snapshot::parse_file(R"({"snapshots": [{}, {}]})", false, "s"); });
  EXPECT_EQ(small.find("refused"), std::string::npos) << small;
}

// Cache files a rank's user can write, read by the agent: only the top-level keys are built;
// a file nested past the limit is that file's error, the other files still read.
TEST(Amplification, CacheFilesKeepTheirKeysAndRefuseDeepNesting) {
  const auto root = testing::temp_path("cache-amplification");
  const std::string dir = "/c";
  std::system(("mkdir -p " + root + dir + "/a " + root + dir + "/b").c_str());
  std::string wide = "{\"('op', (('tp_rank', 1),))\": {";
  for (int i = 0; i < 200'000; ++i) wide += "\"k" + std::to_string(i) + "\": [1, 2],";
  wide += "\"end\": 0}}";
  std::ofstream(root + dir + "/a/autotune_configs.json") << wide;
  std::ofstream(root + dir + "/b/autotune_configs.json")
      << "{\"k\": " << std::string(100'000, '[') << std::string(100'000, ']') << "}";
  const auto files = facts::flashinfer_autotune_files(root, dir);
  std::system(("rm -rf " + root).c_str());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].error, "");  // 600,000 values below the key: parsed, not built
  EXPECT_EQ(files[0].entries, 1u);
  EXPECT_EQ(files[0].tp_ranks, std::set<int>{1});
  EXPECT_EQ(files[1].error, "refused: nested deeper than 64 levels");
}

}  // namespace
}  // namespace hangscope::collectives
