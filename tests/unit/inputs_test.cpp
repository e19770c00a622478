// What comes from outside, checked before use: escaping for the terminal, bounded reads of
// user-given files, addresses and ports, and rule regexes in linear time (RE2).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "analysis_builders.h"
#include "hangscope/analysis/analysis.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/rules/engine.h"
#include "hangscope/rules/rule.h"
#include "target_process.h"

namespace hangscope {
namespace {

using analysis::testing_builders::JobBuilder;
using analysis::testing_builders::native;

TEST(Printable, EscapesControlsAndBytesThatAreNotUtf8) {
  EXPECT_EQ(printable("plain ascii"), "plain ascii");
  EXPECT_EQ(printable("r\xc3\xa9sum\xc3\xa9 \xe2\x86\x92"), "r\xc3\xa9sum\xc3\xa9 \xe2\x86\x92");
  EXPECT_EQ(printable("a\nb\tc"), "a\\x0ab\\x09c");
  EXPECT_EQ(printable("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(printable(std::string("\xff\xfe\x00", 3)), "\\xff\\xfe\\x00");
  EXPECT_EQ(printable("\xc2\x9b"
                      "2J"),
            "\\xc2\\x9b2J");                            // C1 CSI
  EXPECT_EQ(printable("\xe2\x28\xa1"), "\\xe2(\\xa1");  // a broken sequence
  EXPECT_EQ(valid_utf8("ok\xff"), "ok\xEF\xBF\xBD");
}

class InputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_path("inputs");
    ::mkdir(dir_.c_str(), 0700);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(InputFiles, ReadsRegularFilesAndRefusesTheRestWithTheReason) {
  const std::string file = dir_ + "/a.json";
  std::ofstream(file) << "{\"x\": 1}";
  EXPECT_EQ(read_input_file(file, "snapshot file"), "{\"x\": 1}");
  const auto refused = [](const std::string& path, std::size_t max, const std::string& why) {
    try {
      read_input_file(path, "snapshot file", max);
      ADD_FAILURE() << path << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("snapshot file " + path + ": " + why), std::string::npos)
          << e.what();
    }
  };
  refused(dir_, 1 << 20, "is a directory");
  refused("/dev/zero", 1 << 20, "is a character device");
  refused(file, 4, "0.0 MiB (8 bytes) is over the limit of 0.0 MiB (4 bytes)");
  refused(dir_ + "/absent", 1 << 20, "No such file or directory");
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  refused(fifo, 1 << 20, "is a FIFO");  // and it did not wait for a writer
}

TEST_F(InputFiles, HostfilesMayBePipesButAreBounded) {
  const std::string fifo = dir_ + "/hosts";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  testing::TargetProcess writer({"/bin/sh", "-c", "printf 'node0\\nnode1:9\\n' > " + fifo});
  EXPECT_EQ(read_input_file(fifo, "--hostfile", 1 << 20, InputKind::kFileOrPipe),
            "node0\nnode1:9\n");
  testing::TargetProcess flood({"/bin/sh", "-c", "head -c 100000 /dev/zero > " + fifo});
  EXPECT_THROW(read_input_file(fifo, "--hostfile", 1000, InputKind::kFileOrPipe), Error);
}

TEST(Addresses, PortsAreCheckedAndIpv6IsBracketed) {
  EXPECT_EQ(cli::parse_address("node0", 7447, false), "node0:7447");
  EXPECT_EQ(cli::parse_address("10.0.0.2:80", 7447, false), "10.0.0.2:80");
  EXPECT_EQ(cli::parse_address("[::1]", 7447, false), "[::1]:7447");
  EXPECT_EQ(cli::parse_address("[fe80::1%eth0]:65535", 7447, false), "[fe80::1%eth0]:65535");
  EXPECT_EQ(cli::parse_address("127.0.0.1:0", 7447, true), "127.0.0.1:0");
  const auto refused = [](const std::string& text, bool zero, const std::string& why) {
    try {
      cli::parse_address(text, 7447, zero);
      ADD_FAILURE() << text << " was taken";
    } catch (const cli::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << text << ": " << e.what();
    }
  };
  refused("127.0.0.1:99999", true, "port 99999 is outside 0-65535");
  refused("127.0.0.1:123456789012", false, "is outside 1-65535");
  refused("127.0.0.1:0", false, "port 0 is outside 1-65535");
  refused("127.0.0.1:abc", false, "port 'abc' is not a number");
  refused("127.0.0.1:", false, "no port after ':'");
  refused("127.0.0.1:-1", false, "port '-1' is not a number");
  refused("::1", false, "an IPv6 address goes in brackets");
  refused("[::1", false, "'[' without ']'");
  refused("[::1]x", false, "expected ':PORT' after ']'");
  refused("[node]:1", false, "'node' is not an IPv6 address");
  refused("no de:1", false, "is not a host name");
  refused("", false, "an empty address");
}

TEST(Durations, InfinityAndNanAreNoDurations) {
  EXPECT_FALSE(cli::parse_duration("inf"));
  EXPECT_FALSE(cli::parse_duration("nan"));
  EXPECT_FALSE(cli::parse_duration("1e400"));
  EXPECT_THROW(cli::duration_option("--interval", "abc"), cli::UsageError);
}

// A rule the engine matches with RE2: a nested quantifier over a 100,000-character function
// name (std::regex backtracked for minutes, or overflowed its stack) is answered, correctly.
TEST(RuleRegexes, NestedQuantifiersRunInLinearTime) {
  const auto rule = rules::parse_rule(
      R"({"id": "nested", "title": "t", "groups": {"a": {"frames": [
          {"function_regex": "^(a+)+$"}]}}, "diverged": "a", "summary": "{a.count} ranks"})",
      "nested.json");
  ASSERT_TRUE(rule.groups[0].frames[0].function_test);
  // The same compiled pattern, shared with copies of the rule: compiled once per rule set.
  const rules::Rule copy = rule;
  EXPECT_EQ(copy.groups[0].frames[0].function_test.get(),
            rule.groups[0].frames[0].function_test.get());
  const auto verdict_for = [&](const std::string& function) {
    const auto bundle = JobBuilder(1).rank(0, {native(function)}).bundle();
    const auto result = diagnosis::diagnose(bundle);
    return rules::evaluate(rule, result.jobs.at(0)).has_value();
  };
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(verdict_for(std::string(100000, 'a') + "b"));  // not all a's
  EXPECT_TRUE(verdict_for(std::string(100000, 'a')));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

TEST(RuleRegexes, RulesCheckRefusesWhatRe2CannotCompileAndUnknownPlaceholders) {
  const auto reason = [](const std::string& text) {
    try {
      rules::parse_rule(text, "r.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(
      reason("{\"id\": \"x\", \"title\": \"t\", \"groups\": {\"a\": {\"frames\": [\n"
             "{\"function_regex\": \"(a)\\\\1\"}]}}, \"diverged\": \"a\", \"summary\": \"s\"}")
          .find("r.json:2: bad function_regex `(a)\\1` (RE2 syntax)"),
      std::string::npos);
  EXPECT_NE(reason("{\"id\": \"x\", \"title\": \"t\", \"groups\": {\"a\": {\"states\": "
                   "[\"running\"]}},\n \"diverged\": \"a\",\n \"summary\": \"{a.where} {a.size}\"}")
                .find("r.json:3: unknown placeholder `{a.size}`"),
            std::string::npos);
  EXPECT_NE(reason("{\"id\": \"x\", \"title\": \"t\", \"groups\": {\"a\": {\"states\": "
                   "[\"running\"]}},\n \"diverged\": \"a\", \"summary\": \"s\",\n"
                   " \"evidence\": [\"{other}\"]}")
                .find("r.json:3: unknown placeholder `{other}` in `evidence`"),
            std::string::npos);
  EXPECT_EQ(reason("{\"id\": \"x\", \"title\": \"t\", \"groups\": {\"a\": {\"states\": "
                   "[\"running\"]}}, \"diverged\": \"a\", \"summary\": "
                   "\"{a} {a.count} {a.where} {a.nodes} {a.members}\"}"),
            "accepted");
}

}  // namespace
}  // namespace hangscope
