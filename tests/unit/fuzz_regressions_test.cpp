// Every bug the fuzz targets (tests/fuzz) found, replayed on the normal build: each test feeds
// the reproducer kept in tests/fuzz/regressions/<target>/ (minimised with -minimize_crash, or
// by hand where noted) to the same entry point and asserts the clean outcome — a
// hangscope::Error that names the reason, or the documented result. docs/reliability.md
// ("Fuzzing") lists the findings.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "hangscope/analysis/analysis.h"
#include "hangscope/analysis/wait_point.h"
#include "hangscope/collectives/flight_recorder.h"
#include "hangscope/collectives/nccl_ras.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/facts/versions.h"
#include "hangscope/python/layout.h"
#include "hangscope/python/line_table.h"
#include "hangscope/report/report.h"
#include "hangscope/snapshot/codec.h"

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
  const auto wait = analysis::process_wait_point(*nodes[0].processes[0].dump);
  EXPECT_EQ(wait.kind, analysis::WaitKind::kCollective);
  EXPECT_EQ(wait.operation, "barrier");
}

// A flight record in a snapshot that is not JSON: nlohmann's message quotes the first byte of
// a two-byte UTF-8 character, and report.json then threw type_error 316 (std::terminate).
TEST(FuzzRegressions, AnUnreadableFlightRecordInASnapshotStaysValidText) {
  const auto path = regression_path("snapshot_json/flight_record_error_splits_utf8.json");
  analysis::Bundle bundle;
  bundle.snapshots = snapshot::read_file(path);
  bundle.nodes.push_back({"", std::nullopt, "ok", "", 0});
  const auto& record = bundle.snapshots.at(0).processes.at(0).flight_record;
  ASSERT_TRUE(record);
  EXPECT_NE(record->error.find("unreadable in the snapshot"), std::string::npos);
  EXPECT_TRUE(is_valid_utf8(record->error));
  const auto analysis = analysis::analyze(bundle);
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
  EXPECT_GT(facts::compare_versions(text, "0.26"), 0);
  EXPECT_EQ(facts::compare_versions(text, text), 0);
  EXPECT_GT(facts::compare_versions("1.99999999999999999999999", "1.2"), 0);
  EXPECT_LT(facts::compare_versions("1.0rc99999999999999999999999", "1.0"), 0);
  EXPECT_EQ(facts::compare_versions("2.0.0", "2"), 0);
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

}  // namespace
}  // namespace hangscope
