// Every bug the fuzz targets (tests/fuzz) found, replayed on the normal build: each test feeds
// the reproducer kept in tests/fuzz/regressions/<target>/ (minimised with -minimize_crash, or
// by hand where noted) to the same entry point and asserts the clean outcome — a
// hangscope::Error that names the reason, or the documented result. docs/reliability.md
// ("Fuzzing") lists the findings.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "hangscope/analysis/analysis.h"
#include "hangscope/collectives/c10d_store.h"
#include "hangscope/collectives/flight_recorder.h"
#include "hangscope/collectives/nccl_ras.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/redaction.h"
#include "hangscope/common/text.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/facts/caches.h"
#include "hangscope/facts/versions.h"
#include "hangscope/identity/rank_identity.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/model/package_version.h"
#include "hangscope/model/store_keys.h"
#include "hangscope/proc/maps.h"
#include "hangscope/python/layout.h"
#include "hangscope/python/line_table.h"
#include "hangscope/python/objects.h"
#include "hangscope/python/stack_reader.h"
#include "hangscope/report/report.h"
#include "hangscope/rules/rule.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/snapshot/flight_json.h"
#include "hangscope/waits/wait_point.h"

namespace hangscope {
namespace {

std::string regression_path(const std::string& name) {
  return std::string(HANGSCOPE_SOURCE_DIR) + "/tests/fuzz/regressions/" + name;
}

std::string regression(const std::string& name) {
  const auto read = read_file(regression_path(name));
  if (!read.text) throw Error("missing reproducer " + name);
  return *read.text;
}

std::span<const std::byte> bytes_of(const std::string& text, std::size_t from = 0) {
  return {reinterpret_cast<const std::byte*>(text.data()) + from, text.size() - from};
}

bool is_valid_utf8(const std::string& text) {
  return valid_utf8(text) == text;
}

// The Python wait-point rules held their function names in an std::initializer_list member,
// whose array died with the temporary the table was copied from: clang builds read a null
// array (UBSan: "applying non-zero offset 416 to null pointer") for every Python frame.
TEST(FuzzRegressions, PythonFramesAreMatchedAgainstTheWaitPointRules) {
  const auto nodes =
      snapshot::read_file(regression_path("snapshot_json/python_wait_point_rules.json"));
  ASSERT_EQ(nodes.size(), 1u);
  ASSERT_TRUE(nodes[0].processes.at(0).dump);
  const auto wait = waits::process_wait_point(*nodes[0].processes[0].dump);
  EXPECT_EQ(wait.kind, waits::WaitKind::kCollective);
  EXPECT_EQ(wait.operation, "barrier");
}

// A flight record in a snapshot that is not JSON: nlohmann's message quotes the first byte of
// a two-byte UTF-8 character, and report.json then threw type_error 316 (std::terminate).
TEST(FuzzRegressions, AnUnreadableFlightRecordInASnapshotStaysValidText) {
  const auto path = regression_path("snapshot_json/flight_record_error_splits_utf8.json");
  model::Bundle bundle;
  bundle.snapshots = snapshot::read_file(path);
  bundle.nodes.push_back({"", std::nullopt, model::NodeState::kOk, "", 0});
  const auto& record = bundle.snapshots.at(0).processes.at(0).flight_record;
  ASSERT_TRUE(record);
  EXPECT_NE(record->error.find("unreadable in the snapshot"), std::string::npos);
  EXPECT_TRUE(is_valid_utf8(record->error));
  const auto analysis = diagnosis::diagnose(bundle);
  std::ostringstream json;
  EXPECT_NO_THROW(report::write_report_json(json, bundle, analysis));
}

// A pickled string (BINUNICODE) that is not UTF-8 went into the JSON model unchecked; the
// snapshot's copy of the record (to_json().dump()) then threw type_error 316.
TEST(FuzzRegressions, APickledStringThatIsNotUtf8IsRefused) {
  const auto bytes = regression("flight_recorder/pickle_string_not_utf8");
  try {
    collectives::parse_flight_record(bytes);
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BINUNICODE string is not valid UTF-8"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("pickle offset ", 0), 0u) << e.what();
  }
}

// A line of spaces in the Errors section of a RAS text report: substr(npos) threw
// std::out_of_range out of summarize_ras (the agent's capture of the node).
TEST(FuzzRegressions, ARasTextReportWithALineOfSpacesIsSummarised) {
  const auto input = regression("nccl_ras/text_report_line_of_spaces");
  collectives::RasReply reply{"2", "text", input.substr(1), ""};  // byte 0: odd = text
  collectives::RasSummary summary;
  ASSERT_NO_THROW(summary = collectives::summarize_ras(reply));
  EXPECT_TRUE(summary.findings.empty());
  reply.report = "Errors\n======\n\nDEAD: rank 3\n   \n  Process 17 on node1\n";
  summary = collectives::summarize_ras(reply);
  EXPECT_EQ(summary.findings, (std::vector<std::string>{"DEAD: rank 3", "Process 17 on node1"}));
}

// Release numbers longer than 18 digits overflowed `long` (UBSan: signed integer overflow)
// while comparing versions (store protocol choice, rule facts with at_least / below).
TEST(FuzzRegressions, VersionsWithHugeNumbersCompareWithoutOverflow) {
  const auto text = regression("c10d_store/version_number_overflows_long");
  EXPECT_GT(model::compare_versions(text, "0.26"), 0);
  EXPECT_EQ(model::compare_versions(text, text), 0);
  EXPECT_GT(model::compare_versions("1.99999999999999999999999", "1.2"), 0);
  EXPECT_LT(model::compare_versions("1.0rc99999999999999999999999", "1.0"), 0);
  EXPECT_EQ(model::compare_versions("2.0.0", "2"), 0);
}

// A 3.11+ line table whose deltas add up past INT_MAX (UBSan: signed integer overflow);
// such a table is corrupt: no line. The 3.10 decoder adds its deltas the same way.
TEST(FuzzRegressions, LineTablesThatOverflowTheLineGiveNoLine) {
  const auto input = regression("line_table/line_delta_overflows_int");
  std::int32_t first_line = 0, offset = 0;
  std::memcpy(&first_line, input.data(), 4);
  std::memcpy(&offset, input.data() + 4, 4);
  const auto table = bytes_of(input, 8);
  // (The sanitizer build reports any overflow left.)
  for (int unit = -1; unit < 16; ++unit) {
    (void)python::line_for_offset_310(table, first_line, unit * 2);
    (void)python::line_for_offset_311(table, first_line, unit);
  }
  EXPECT_EQ(python::line_for_offset_311(table, first_line, offset), std::nullopt);
  // Two entries of +0x3fffffff (signed varint 0x7ffffffe in six bytes) from line 2: the second
  // would reach 2^31.
  const std::vector<std::uint8_t> big = {0x80 | (13 << 3), 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x01,
                                         0x80 | (13 << 3), 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x01};
  const auto big_table = std::as_bytes(std::span(big));
  EXPECT_EQ(python::line_for_offset_311(big_table, 2, 0), 2 + 0x3fffffff);
  EXPECT_EQ(python::line_for_offset_311(big_table, 2, 1), std::nullopt);
  const std::vector<std::uint8_t> pairs = {2, 127, 2, 127};
  EXPECT_EQ(python::line_for_offset_310(std::as_bytes(std::span(pairs)), 2147483600, 0),
            std::nullopt);
  EXPECT_EQ(python::line_for_offset_310(std::as_bytes(std::span(pairs)), 10, 2), 264);
}

// A 3.13/3.14 _Py_DebugOffsets table (read from the target's memory) whose frame size
// (fr_localsplus) is 4 PiB: the stack reader allocated that much per frame (ASan:
// requested allocation size 0x4000000000050). Now the table is refused.
TEST(FuzzRegressions, ADebugOffsetsTableWithAHugeFrameSizeIsRefused) {
  const auto input = regression("python_frames/debug_offsets_frame_size_4_pib");
  // Byte 0 picks 3.14 (4 % 5), byte 1 the locals; the image (and _PyRuntime) follows.
  ASSERT_EQ(input[0] % 5, 4);
  const auto image = bytes_of(input, 2);
  ASSERT_GE(image.size(), python::debug_offsets_size({3, 14, 0, 0}));
  try {
    python::layout_from_debug_offsets(image.first(python::debug_offsets_size({3, 14, 0, 0})));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "_Py_DebugOffsets holds an implausible offset");
  }
}

// A number beyond double in a rule file: nlohmann threw out_of_range 406, which parse_rule did
// not catch (it caught parse_error only): `hangscope rules check` and every diagnose died.
TEST(FuzzRegressions, ARuleFileWithANumberBeyondDoubleIsRefusedWithItsLine) {
  const auto text = regression("rule_file/number_overflow");
  try {
    rules::parse_rule(text, "rules.d/x.json");
    FAIL() << "parsed";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("rules.d/x.json:1: not valid JSON: ", 0), 0u) << what;
    EXPECT_NE(what.find("number overflow"), std::string::npos) << what;
  }
  try {
    rules::parse_rule("{\n  \"id\": \"x\",\n  \"confidence\": 1e999\n}", "y.json");
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("y.json:3: not valid JSON: ", 0), 0u) << e.what();
  }
}

// The stack reader over an input of python_frames_fuzz: byte 0 the version (10 + byte % 5),
// byte 1 bit 0 the locals, then the memory image at 0x10000000 (_PyRuntime at its start).
std::vector<python::PyThread> walk_image(const std::string& input) {
  constexpr std::uint64_t kBase = 0x10000000;
  const int minor = 10 + static_cast<unsigned char>(input.at(0)) % 5;
  memory::BufferMemory image(kBase, reinterpret_cast<const std::byte*>(input.data() + 2),
                             input.size() - 2);
  proc::Mapping mapping;
  mapping.start = kBase;
  mapping.end = kBase + input.size() - 2;
  mapping.readable = true;
  const proc::MemoryMap maps({mapping});
  const auto layout = python::builtin_layout({3, minor, 0, 0});
  if (!layout) throw Error("not a built-in layout");
  python::ObjectReader objects(image, maps, *layout);
  python::StackReaderOptions options;
  options.locals = (input.at(1) & 1) != 0;
  options.max_frames = 128;
  options.max_threads = 16;
  return python::StackReader(objects, kBase, options).read_threads();
}

// A 3.10 frame whose f_lasti is 2,113,929,221: the byte offset (f_lasti * 2) overflowed int
// (UBSan). Offsets beyond int are now past every line table: that frame has no line.
TEST(FuzzRegressions, AHugeFLastiGivesNoLineInsteadOfOverflowing) {
  const auto input = regression("python_frames/py310_f_lasti_overflows_int");
  ASSERT_EQ(input.at(0) % 5, 0);  // 3.10
  std::vector<python::PyThread> threads;
  try {
    threads = walk_image(input);
  } catch (const Error& e) {
    GTEST_SKIP() << "the image's interpreter is unreadable: " << e.what();
  }
  std::size_t frames = 0;
  for (const auto& t : threads) frames += t.frames.size();
  EXPECT_GT(frames, 0u);
  const std::vector<std::uint8_t> table = {255, 1, 255, 1};
  EXPECT_EQ(python::line_for_offset_310(std::as_bytes(std::span(table)), 7,
                                        std::numeric_limits<int>::max()),
            std::nullopt);
}

// keys_in_repr searched a local's repr with std::regex, which recursed once per character: a
// quoted string of 30,000 characters overflowed the stack (ASan; longer ones in any build),
// at capture and in diagnose's wait-for graph. Now a linear scan that finds the same keys.
TEST(FuzzRegressions, ALongQuotedStringInAReprIsOneKey) {
  const auto repr = regression("c10d_store/repr_quoted_30k");
  const auto keys = model::keys_in_repr(repr);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0], std::string(30000, 'a'));
  // What the regex found: escapes, both quotes, unclosed and line-broken strings skipped.
  EXPECT_EQ(model::keys_in_repr(R"(['a/0', "b\"1", 'c\'2', '', 'd\\'])"),
            (std::vector<std::string>{"a/0", "b\"1", "c'2", "d\\"}));
  EXPECT_EQ(model::keys_in_repr("'open \"x\""), (std::vector<std::string>{"x"}));
  // A backslash before a line break ends no string: the next quote starts one.
  EXPECT_EQ(model::keys_in_repr("'a\\\nb' 'k"), (std::vector<std::string>{" "}));
}

// store_protocol_for matched ^\d+\.\d+ with std::regex: 60,000 digits overflowed the stack.
TEST(FuzzRegressions, AVersionOfManyDigitsHasNoProtocolAndNoStackOverflow) {
  const auto version = regression("c10d_store/torch_version_60k_digits");
  EXPECT_EQ(collectives::store_protocol_for(version), std::nullopt);
  EXPECT_EQ(collectives::store_protocol_for(version + ".1"), collectives::StoreProtocol::kTorch2);
  EXPECT_EQ(collectives::store_protocol_for("1.13.0a0+gitunknown"),
            collectives::StoreProtocol::kTorch1);
  EXPECT_EQ(collectives::store_protocol_for("2.5.1+cu124"), collectives::StoreProtocol::kTorch2);
  for (const char* bad : {"", "2", "2.", ".5", "v2.5", "2.x"}) {
    EXPECT_EQ(collectives::store_protocol_for(bad), std::nullopt) << bad;
  }
}

analysis::Analysis analyse_file(const std::string& name, model::Bundle& bundle) {
  bundle.snapshots = snapshot::read_file(regression_path(name));
  bundle.nodes.push_back(
      {bundle.snapshots.at(0).node_name, std::nullopt, model::NodeState::kOk, "", 0});
  return diagnosis::diagnose(bundle);
}

// A store key naming "rank" 9999999999, and a collective's `ranks` local with 99999999999:
// std::stoi threw std::out_of_range out of the wait-for graph (diagnose died).
TEST(FuzzRegressions, RankNumbersBeyondIntInLocalsNameNoRank) {
  for (const char* name : {"snapshot_json/store_key_rank_overflows_int.json",
                           "snapshot_json/collective_ranks_overflow_int.json"}) {
    model::Bundle bundle;
    analysis::Analysis result;
    ASSERT_NO_THROW(result = analyse_file(name, bundle)) << name;
    for (const auto& job : result.jobs) {
      for (const auto& r : job.ranks) {
        if (!r.waits_for.empty()) {
          EXPECT_LT(r.waits_for.intervals().back().last, 100) << name;
        }
      }
    }
  }
}

// A Python frame whose file name is 60,000 characters: is_library_file's std::regex recursed
// once per character and overflowed the stack (ASan) while diagnose classified the thread.
TEST(FuzzRegressions, AVeryLongPythonFileNameIsClassifiedWithoutStackOverflow) {
  model::Bundle bundle;
  analysis::Analysis result;
  ASSERT_NO_THROW(result = analyse_file("snapshot_json/python_file_path_60k.json", bundle));
  ASSERT_EQ(result.jobs.size(), 1u);
  const auto& wait = result.jobs[0].ranks.at(0).wait;
  if (wait.python) {
    EXPECT_EQ(wait.python->function, "wait_here");
  }
}

// A flight record in a snapshot whose time_created_ns is 9e19 (beyond int64, so parsed as a
// float): nlohmann's get<std::int64_t>() converted it with undefined behaviour (UBSan).
TEST(FuzzRegressions, AFlightRecordNumberBeyondInt64MakesTheRecordUnreadable) {
  const auto nodes =
      snapshot::read_file(regression_path("snapshot_json/flight_record_time_beyond_int64.json"));
  const auto& record = nodes.at(0).processes.at(0).flight_record;
  ASSERT_TRUE(record);
  EXPECT_NE(record->error.find("unreadable in the snapshot: `time_created_ns` is not a 64-bit "
                               "whole number"),
            std::string::npos)
      << record->error;
  EXPECT_TRUE(record->entries.empty());
  // What to_json writes still reads back.
  model::FlightRecord good;
  good.written_unix_ns = std::numeric_limits<std::int64_t>::max();
  good.groups["0"].ranks = {0, 1, std::numeric_limits<int>::max()};
  good.groups["0"].last_completed = -1;
  good.entries.push_back(
      {"0", 5, 0, false, "nccl:all_reduce", "[[3]]", "", "", model::FlightState::kStarted, 7});
  const auto back = snapshot::flight_record_from_json(snapshot::flight_record_to_json(good));
  EXPECT_EQ(back.written_unix_ns, good.written_unix_ns);
  EXPECT_EQ(back.groups.at("0").ranks, good.groups.at("0").ranks);
  EXPECT_EQ(back.groups.at("0").last_completed, -1);
  EXPECT_EQ(back.entries.at(0).time_created_ns, 7);
  for (const char* bad :
       {R"({"groups": {"0": {"ranks": [1.5]}}})", R"({"groups": {"0": {"ranks": [4294967296]}}})",
        R"({"entries": [{"seq": 1e3}]})", R"({"written_unix_ns": -1e30})"}) {
    EXPECT_THROW(snapshot::flight_record_from_json(nlohmann::json::parse(bad)), Error) << bad;
  }
}

// A snapshot whose rank says its world has 2,000,000,000 ranks: diagnose made an entry for each
// missing rank (3 GB for the vector alone, then out of memory). World sizes beyond 131,072 were
// then not taken; now the missing ranks are one range (issue 21) and the claim is taken: the
// reports say the range, and report.json gives it as ranges, not a list of two billion.
TEST(FuzzRegressions, AWorldSizeOfTwoBillionIsOneRangeOfMissingRanks) {
  model::Bundle bundle;
  analysis::Analysis result;
  ASSERT_NO_THROW(result = analyse_file("snapshot_json/world_size_two_billion.json", bundle));
  ASSERT_EQ(result.jobs.size(), 1u);
  EXPECT_EQ(result.jobs[0].world_size, 2000000000);
  EXPECT_EQ(result.jobs[0].ranks.size(), 1u);
  EXPECT_EQ(result.jobs[0].missing.text(), "1-1999999999");
  std::ostringstream json;
  report::write_report_json(json, bundle, result);
  const auto report = nlohmann::json::parse(json.str());
  EXPECT_EQ(report["ranks"].size(), 1u);
  EXPECT_EQ(report["jobs"][0]["missing_ranges"], nlohmann::json::parse("[[1, 1999999999]]"));
  EXPECT_EQ(report["jobs"][0]["missing_listed"], false);
  EXPECT_NE(report::report_markdown(bundle, result).find("| 1-1999999999 | - |"),
            std::string::npos);
}

// Ranks beyond int in a FlashInfer cache key or vLLM's "assigned as" log line: std::stoi threw
// out of the agent's capture. Long runs of spaces or digits overflowed std::regex's stack.
TEST(FuzzRegressions, RankHintsBeyondIntOrVeryLongAreSkipped) {
  std::set<int> tp, ep;
  facts::ranks_in_cache_key(regression("rank_identity/cache_key_rank_overflows_int"), tp, ep);
  EXPECT_TRUE(tp.empty() && ep.empty());
  facts::ranks_in_cache_key(regression("rank_identity/cache_key_50k_spaces"), tp, ep);
  EXPECT_EQ(tp, (std::set<int>{1}));
  facts::ranks_in_cache_key("(('m', 128), ('tp_rank', 2), (\"ep_rank\": 0), tp_rank=x, ep_rank,7)",
                            tp, ep);
  EXPECT_EQ(tp, (std::set<int>{1, 2}));
  EXPECT_EQ(ep, (std::set<int>{0, 7}));

  model::RankIdentity id;
  id.rank = 1;
  identity::identify_from_log(split_lines(regression("rank_identity/log_pp_rank_overflows_int")),
                              id);
  EXPECT_EQ(id.dp, 0);
  EXPECT_EQ(id.pp, std::nullopt);
  EXPECT_EQ(id.tp, 0);
  EXPECT_EQ(id.sources.count("pp"), 0u);
  model::RankIdentity other;
  identity::identify_from_log(split_lines(regression("rank_identity/log_rank_50k_digits")), other);
  EXPECT_EQ(other.rank, std::nullopt);
}

// mask_url_credentials used std::regex_replace, which recursed once per character: a value of
// 50,000 characters overflowed the stack (ASan; ~100 KB in a normal build, and an environment
// variable may hold 128 KiB). Now a linear scan that masks the same passwords.
TEST(FuzzRegressions, ALongValueIsMaskedWithoutStackOverflow) {
  const auto value = regression("redaction/url_user_50k");
  EXPECT_EQ(mask_url_credentials(value), value.substr(0, value.size() - 2) + "<masked>@");
  EXPECT_EQ(mask_url_credentials("see https://u:pw@h/x and git+ssh://a:b:c@d, ://x:y@z"),
            "see https://u:<masked>@h/x and git+ssh://a:<masked>@d, ://x:y@z");
  EXPECT_EQ(mask_url_credentials("1http://u:p@h -http://u:p@h http://:p@h http://u:@h"),
            "1http://u:<masked>@h -http://u:<masked>@h http://:p@h http://u:@h");
  EXPECT_EQ(mask_url_credentials("a://u:p q@h b://u:p/q@h c://u@h:p@h"),
            "a://u:p q@h b://u:p/q@h c://u@h:p@h");
}

}  // namespace
}  // namespace hangscope
