// The hangscope binary as a user runs it: output formats, exit codes, error messages.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analysis_builders.h"
#include "command.h"
#include "hangscope/common/text.h"
#include "hangscope/snapshot/codec.h"
#include "target_process.h"

namespace hangscope {
namespace {

using testing::CommandResult;

// Runs `prefix hangscope args`, capturing stdout, stderr and the exit code.
CommandResult run_hangscope_as(const std::string& prefix, const std::string& args) {
  return testing::run_command(prefix + " " + std::string(HANGSCOPE_BINARY) + " " + args);
}

CommandResult run_hangscope(const std::string& args) {
  return run_hangscope_as("", args);
}

TEST(Cli, DumpJsonFollowsTheContract) {
  testing::TargetProcess target({NATIVE_TARGET});
  target.wait_for_line("ready");
  const auto result = run_hangscope("dump --pid " + std::to_string(target.pid()) + " --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["pid"], target.pid());
  EXPECT_TRUE(json["python"].is_null());
  ASSERT_EQ(json["threads"].size(), 5u);
  bool found = false;
  for (const auto& thread : json["threads"]) {
    for (const char* key : {"tid", "name", "state", "py_thread_id", "py_thread_name", "holds_gil",
                            "merge", "frames"}) {
      EXPECT_TRUE(thread.contains(key)) << key;
    }
    if (thread["name"] != "cv_waiter") continue;
    found = true;
    EXPECT_EQ(thread["state"], "S");
    EXPECT_EQ(thread["merge"], "ok");
    const auto& frames = thread["frames"];
    ASSERT_FALSE(frames.empty());
    for (const auto& frame : frames) {
      EXPECT_EQ(frame["kind"], "native");
      for (const char* key : {"function", "module", "offset", "address"}) {
        EXPECT_TRUE(frame.contains(key)) << key;
      }
    }
    int wait_at = -1, outer_at = -1;
    for (int i = 0; i < static_cast<int>(frames.size()); ++i) {
      const auto fn = frames[static_cast<std::size_t>(i)]["function"];
      if (!fn.is_string()) continue;
      if (fn.get<std::string>().find("wait_on_condition") != std::string::npos) wait_at = i;
      if (fn.get<std::string>().find("cv_outer") != std::string::npos) outer_at = i;
    }
    EXPECT_GE(wait_at, 0);
    EXPECT_GT(outer_at, wait_at);
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

TEST(Cli, DumpTextShowsThreadsLikeEuStack) {
  testing::TargetProcess target({NATIVE_TARGET});
  target.wait_for_line("ready");
  const auto result = run_hangscope("dump --pid " + std::to_string(target.pid()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(
      result.out.find("Process " + std::to_string(target.pid()) + " (native_target), 5 threads"),
      std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("\"poller\" S (sleeping)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("poll_forever"), std::string::npos);
}

TEST(Cli, MissingPidFailsWithExitCodeOneAndAReason) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const auto result = run_hangscope("dump --pid " + std::to_string(child));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "hangscope: error: pid " + std::to_string(child) + " does not exist\n");
  EXPECT_TRUE(result.out.empty());
}

TEST(Cli, UnprivilegedUserGetsAClearPermissionError) {
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) missing";
  testing::TargetProcess target({NATIVE_TARGET});
  target.wait_for_line("ready");
  // As "nobody", without capabilities: the root-owned target cannot be examined.
  const auto result = run_hangscope_as(
      "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups "
      "--inh-caps=-all",
      "dump --pid " + std::to_string(target.pid()));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("pid " + std::to_string(target.pid())), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("Permission denied"), std::string::npos) << result.err;
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

TEST(Cli, BadUsageExitsWithTwo) {
  EXPECT_EQ(run_hangscope("dump").exit_code, 2);
  EXPECT_EQ(run_hangscope("dump --pid nope").exit_code, 2);
  EXPECT_EQ(run_hangscope("frobnicate").exit_code, 2);
  EXPECT_EQ(run_hangscope("dump --pid 1 --stop-mode sometimes").exit_code, 2);
}

TEST(Cli, VersionNamesTheRevisionAndThePythonVersions) {
  const auto result = run_hangscope("--version");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out.rfind("hangscope 0.1.0 (git ", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("CPython 3.10 to 3.14 (3.13 and later through"), std::string::npos)
      << result.out;
  // The revision is the checkout's HEAD at build time (plus -dirty for local changes), not
  // the one of the last cmake configure.
  const auto head = testing::run_command("git -C " + std::string(HANGSCOPE_SOURCE_DIR) +
                                         " rev-parse --short=12 HEAD");
  if (head.exit_code == 0 && !head.out.empty()) {
    const std::string revision = head.out.substr(0, 12);
    EXPECT_TRUE(result.out.find("(git " + revision + ")") != std::string::npos ||
                result.out.find("(git " + revision + "-dirty)") != std::string::npos)
        << "the binary's revision is not HEAD's (built before the last commit? rebuild)\n"
        << result.out;
  }
}

// Every command's --help ends with examples to copy, and with the exit codes.
TEST(Cli, EveryCommandsHelpShowsExamplesAndExitCodes) {
  for (const std::string command : {"dump", "collect", "diagnose", "report", "rules"}) {
    const auto help = run_hangscope(command + " --help");
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_NE(help.out.find("Examples:\n  hangscope " + command), std::string::npos)
        << command << ":\n"
        << help.out;
    EXPECT_NE(help.out.find("3 a hang was found"), std::string::npos) << command;
  }
}

// The whole program, which the front (HANGSCOPE_BINARY) runs every command but dump with:
// bin/../libexec/hangscope/hangscope, in the build tree as installed.
std::string whole_program() {
  const std::string front = HANGSCOPE_BINARY;
  return front.substr(0, front.rfind('/')) + "/../libexec/hangscope/hangscope";
}

// `dump` runs in the front program, which loads none of the libraries of the agent, the
// fan-out or the metrics server: the loader's own list of what it loaded says so, and the same
// dump through the whole program loads them (the check can fail).
TEST(Cli, DumpLoadsNoRpcTlsOrMetricsLibrary) {
  if (HANGSCOPE_UNITY_BUILD) {
    GTEST_SKIP() << "a unity build (the sanitizer builds) compiles each area's sources into "
                    "shared objects, and its front links what dump's neighbours in them use; the "
                    "lean front is the file-by-file build's (build/, the package)";
  }
  testing::TargetProcess target({NATIVE_TARGET});
  target.wait_for_line("ready");
  const std::string dump = " dump --pid " + std::to_string(target.pid());
  const auto front = run_hangscope_as("LD_DEBUG=files", dump);
  ASSERT_EQ(front.exit_code, 0) << front.err;
  EXPECT_NE(front.out.find("cv_waiter"), std::string::npos) << front.out;
  EXPECT_NE(front.err.find("libunwind"), std::string::npos) << "no loader output?\n" << front.err;
  for (const char* library : {"libssl", "libcrypto", "libprometheus", "libcivetweb", "libz."}) {
    EXPECT_EQ(front.err.find(library), std::string::npos) << library << " loaded by dump";
  }
  const auto whole = testing::run_command("LD_DEBUG=files " + whole_program() + dump);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_NE(whole.err.find("libssl"), std::string::npos);
  // Both print the same stacks of the same thread.
  EXPECT_NE(whole.out.find("cv_waiter"), std::string::npos) << whole.out;
}

// Every other command is the whole program's, exec'd in place: same pid (a supervisor's or a
// script's pid stays the agent's), the whole program's executable, "hangscope" as its name.
TEST(Cli, OtherCommandsRunInTheWholeProgramUnderTheSamePid) {
  testing::TargetProcess target({NATIVE_TARGET});
  target.wait_for_line("ready");
  testing::TargetProcess agent({HANGSCOPE_BINARY, "collect", "--listen", "127.0.0.1:0", "--pid",
                                std::to_string(target.pid())});
  agent.wait_for_line("listening on");
  char exe[4096] = {};
  const auto n =
      ::readlink(("/proc/" + std::to_string(agent.pid()) + "/exe").c_str(), exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  char whole[4096] = {};
  ASSERT_NE(::realpath(whole_program().c_str(), whole), nullptr) << whole_program();
  EXPECT_EQ(std::string(exe, static_cast<std::size_t>(n)), std::string(whole));
  EXPECT_EQ(testing::run_command("cat /proc/" + std::to_string(agent.pid()) + "/comm").out,
            "hangscope\n");
  // dump's help is the same text in either program (one definition of its options).
  const auto front_help = run_hangscope("--log-level warn dump --help");
  const auto whole_help = testing::run_command(whole_program() + " --log-level warn dump --help");
  EXPECT_EQ(front_help.exit_code, 0);
  EXPECT_EQ(front_help.out, whole_help.out);
  // The top-level help is the whole program's: every command.
  const auto top_help = run_hangscope("--help");
  EXPECT_NE(top_help.out.find("watch"), std::string::npos) << top_help.out;
}

// A front copied away from its whole program still dumps, and for any other command names the
// file it looked for and why it is needed.
TEST(Cli, AFrontWithoutItsWholeProgramSaysWhatIsMissing) {
  char dir_template[] = "/tmp/hangscope-front-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  ASSERT_EQ(testing::run_command("cp " + std::string(HANGSCOPE_BINARY) + " " + dir + "/").exit_code,
            0);
  testing::TargetProcess target({NATIVE_TARGET});
  target.wait_for_line("ready");
  const auto dump =
      testing::run_command(dir + "/hangscope dump --pid " + std::to_string(target.pid()));
  const auto rules = testing::run_command(dir + "/hangscope rules list");
  testing::run_command("rm -rf " + dir);
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("cv_waiter"), std::string::npos);
  EXPECT_EQ(rules.exit_code, 1);
  EXPECT_NE(rules.err.find("hangscope: error: cannot run /tmp/libexec/hangscope/hangscope, the "
                           "program of every command but dump"),
            std::string::npos)
      << rules.err;
  EXPECT_NE(rules.err.find("No such file"), std::string::npos) << rules.err;
}

// rules list/check --json: one JSON document a script can read; a bad rule file gives valid
// false, the parser's reason with the file's name and line, and exit code 1.
TEST(Cli, RulesListAndCheckPrintJson) {
  const auto list = run_hangscope("rules list --json");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto listed = nlohmann::json::parse(list.out);
  EXPECT_TRUE(listed.at("errors").empty());
  std::set<std::string> ids;
  for (const auto& rule : listed.at("rules")) {
    ids.insert(rule.at("id").get<std::string>());
    EXPECT_EQ(rule.at("source").get<std::string>().rfind("builtin:", 0), 0u) << rule.dump();
    EXPECT_GT(rule.at("confidence").get<double>(), 0.0);
    EXPECT_FALSE(rule.at("groups").empty()) << rule.dump();
  }
  EXPECT_TRUE(ids.count("symmetric-memory-rendezvous")) << list.out;
  EXPECT_TRUE(ids.count("autotune-cache-mismatch")) << list.out;
  EXPECT_TRUE(ids.count("compiled-dag-stall")) << list.out;

  const auto bad = testing::temp_path("cli-rule") + ".json";
  testing::run_command("printf '{\\n  \"id\": \"x\",\\n  \"title\": 7,\\n' > " + bad);
  const auto checked = run_hangscope("rules check --json " + bad);
  EXPECT_EQ(checked.exit_code, 1);
  const auto verdict = nlohmann::json::parse(checked.out);
  EXPECT_EQ(verdict.at("file"), bad);
  EXPECT_FALSE(verdict.at("valid").get<bool>());
  EXPECT_EQ(verdict.at("error").get<std::string>().rfind(bad + ":", 0), 0u) << checked.out;

  const auto text = run_hangscope("rules check " + bad);  // the same verdict for people
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_EQ(text.err.rfind("hangscope: error: " + bad + ":", 0), 0u) << text.err;

  const auto missing = run_hangscope("rules check --json " + bad + ".absent");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(nlohmann::json::parse(missing.out)
                .at("error")
                .get<std::string>()
                .find("rule file " + bad + ".absent: No such file or directory"),
            std::string::npos)
      << missing.out;

  const auto good = run_hangscope("rules check --json " + std::string(HANGSCOPE_SOURCE_DIR) +
                                  "/src/rules/builtin/compiled-dag-stall.json");
  EXPECT_EQ(good.exit_code, 0) << good.out;
  EXPECT_EQ(nlohmann::json::parse(good.out).at("rule").at("id"), "compiled-dag-stall");
  testing::run_command("rm -f " + bad);
}

// diagnose --ticket prints report.md as written into the bundle (a ticket body), nothing else
// on stdout; --ticket and --json together are bad usage; NO_COLOR keeps escapes out.
TEST(Cli, TicketPrintsTheReportMarkdownAndExitCodesAreDocumented) {
  testing::TargetProcess target({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  target.wait_for_line("ready");
  const auto snapshot = testing::temp_path("cli-ticket") + ".json";
  const auto bundle = testing::temp_path("cli-ticket-bundle");
  ASSERT_EQ(
      run_hangscope("collect --once --pid " + std::to_string(target.pid()) + " -o " + snapshot)
          .exit_code,
      0);
  const auto ticket = run_hangscope("diagnose " + snapshot + " -o " + bundle + " --ticket");
  EXPECT_EQ(ticket.exit_code, 0) << ticket.err;  // one rank, waiting for nobody: no hang
  EXPECT_EQ(ticket.err, "");
  const auto written = testing::run_command("cat " + bundle + "/report.md");
  EXPECT_FALSE(written.out.empty());
  EXPECT_EQ(ticket.out, written.out);
  EXPECT_EQ(run_hangscope("diagnose " + snapshot + " --ticket --json").exit_code, 2);
  // A snapshot of no rank at all: nothing was looked at, so not "no hang" but a failure.
  testing::TargetProcess not_a_rank({NATIVE_TARGET});
  not_a_rank.wait_for_line("ready");
  const auto no_rank_file = testing::temp_path("cli-no-rank") + ".json";
  ASSERT_EQ(run_hangscope("collect --once --pid " + std::to_string(not_a_rank.pid()) + " -o " +
                          no_rank_file)
                .exit_code,
            0);
  const auto no_rank = run_hangscope("diagnose " + no_rank_file + " -o " + bundle + "-none");
  EXPECT_EQ(no_rank.exit_code, 1);
  EXPECT_NE(no_rank.err.find("no rank process found in the snapshot files"), std::string::npos)
      << no_rank.err;
  testing::run_command("rm -rf " + no_rank_file + " " + bundle + "-none");
  const auto plain = run_hangscope_as("NO_COLOR=1", "report " + bundle);
  EXPECT_EQ(plain.out.find('\x1b'), std::string::npos);
  const auto help = run_hangscope("--help");
  EXPECT_NE(help.out.find("3 a hang was found"), std::string::npos) << help.out;
  testing::run_command("rm -rf " + snapshot + " " + bundle);
}

// A JSON snapshot file whose ranks claim a world of 2^31 - 1 ranks, four of them in it (issue
// 21): diagnose finishes in the time its four ranks take (an entry per claimed rank would not:
// out of memory), names the missing ranks as one range, and report.json and report.md say the
// range.
TEST(Cli, DiagnoseOfAWorldOfIntMaxRanksSaysTheMissingRange) {
  using namespace analysis::testing_builders;
  JobBuilder job(std::numeric_limits<int>::max(), "10.0.0.1:29500", 2);
  for (int r = 0; r < 4; ++r) job.rank(r, barrier_stack(), 'S', 0, 4);
  const auto file = testing::temp_path("cli-huge-world") + ".json";
  const auto bundle = testing::temp_path("cli-huge-world-bundle");
  snapshot::write_file(file, job.bundle().snapshots);
  const auto started = std::chrono::steady_clock::now();
  const auto d = run_hangscope("diagnose " + file + " -o " + bundle + " --json --quiet");
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  std::fprintf(stderr, "diagnose of a world of 2^31 - 1 ranks (4 present): %.3f s\n", took.count());
  EXPECT_EQ(d.exit_code, 3) << d.err;  // a hang was found
  const auto report = nlohmann::json::parse(d.out);
  EXPECT_EQ(report["ranks"].size(), 4u);
  EXPECT_EQ(report["jobs"][0]["missing_ranges"], nlohmann::json::parse("[[4, 2147483646]]"));
  const auto conclusion = report["conclusion"].get<std::string>();
  EXPECT_EQ(conclusion.rfind("Ranks 4-2147483646 are missing: no node that answered runs them", 0),
            0u)
      << conclusion;
  bool found = false;
  for (const auto& v : report["verdicts"]) {
    if (v["id"] != "rank-dead") continue;
    found = true;
    EXPECT_TRUE(v["diverged_ranks"].is_null()) << v.dump();
    EXPECT_EQ(v["diverged_ranges"], nlohmann::json::parse("[[4, 2147483646]]"));
    EXPECT_EQ(v["waiting_ranks"], nlohmann::json::parse("[0, 1, 2, 3]"));
  }
  EXPECT_TRUE(found) << report["verdicts"].dump();
  const auto written = testing::run_command("cat " + bundle + "/report.json");
  EXPECT_EQ(nlohmann::json::parse(written.out), report);
  const auto md = testing::run_command("cat " + bundle + "/report.md").out;
  EXPECT_EQ(md.rfind("# hangscope: Ranks 4-2147483646 are missing", 0), 0u) << md.substr(0, 300);
  EXPECT_NE(md.find("| 4-2147483646 | - | - | - | missing |"), std::string::npos) << md;
  testing::run_command("rm -rf " + file + " " + bundle);
}

// A real Python target whose code objects, file name and thread name attack the terminal and the
// report (tests/fixtures/python/hostile_names.py, issue 30): `dump` text and diagnose's terminal
// summary show them escaped, no raw control byte, no line of their own; report.md's first line
// is its own and no other line starts with the forged heading; `dump --json` keeps the exact
// name.
TEST(Cli, HostileNamesOfATargetAreEscapedInTextAndExactInJson) {
  const std::string hostile = "w\x1b[2Jq\n# hangscope: no divergence found";
  const std::string escaped = "w\\x1b[2Jq\\x0a# hangscope: no divergence found";
  testing::TargetProcess target(
      {"/usr/bin/python3", HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/hostile_names.py"},
      {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29511"}});
  target.wait_for_line("ready");
  const auto no_control = [](const std::string& text) {
    for (const char c : text) {
      const auto byte = static_cast<unsigned char>(c);
      if ((byte < 0x20 && c != '\n') || byte == 0x7f) return false;
    }
    return text.find("\xc2\x9b") == std::string::npos;  // U+009B, a terminal's CSI
  };
  const auto text = run_hangscope("dump --pid " + std::to_string(target.pid()));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(no_control(text.out)) << text.out;
  EXPECT_NE(text.out.find(escaped), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("/srv/x```|\\xc2\\x9b.py"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("[Python t\\x1b[31mred]"), std::string::npos) << text.out;
  std::istringstream lines(text.out);
  for (std::string line; std::getline(lines, line);) EXPECT_NE(line.rfind("# ", 0), 0u) << line;

  const auto json = run_hangscope("dump --pid " + std::to_string(target.pid()) + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  bool found = false;
  const auto dumped = nlohmann::json::parse(json.out);
  for (const auto& thread : dumped["threads"]) {
    for (const auto& frame : thread["frames"]) {
      if (frame["function"] != hostile) continue;
      found = true;
      EXPECT_EQ(frame["file"], "/srv/x```|\xc2\x9b.py");
    }
  }
  EXPECT_TRUE(found) << json.out;

  const auto bundle = testing::temp_path("cli-hostile-bundle");
  const auto d =
      run_hangscope("diagnose --pid " + std::to_string(target.pid()) + " --samples 1 -o " + bundle);
  EXPECT_EQ(d.exit_code, 0) << d.err;  // one rank, waiting for nobody
  EXPECT_TRUE(no_control(d.out)) << d.out;
  EXPECT_TRUE(no_control(d.err)) << d.err;
  EXPECT_NE(d.out.find(escaped), std::string::npos) << d.out;
  const auto md = testing::run_command("cat " + bundle + "/report.md").out;
  EXPECT_TRUE(no_control(md)) << md;
  std::istringstream md_lines(md);
  int line_number = 0;
  for (std::string line; std::getline(md_lines, line); ++line_number) {
    if (line_number > 0) {
      EXPECT_NE(line.rfind("# ", 0), 0u) << line;  // only the first line is a title
    }
  }
  EXPECT_NE(md.find("w\\x1b\\[2Jq\\x0a# hangscope: no divergence found"), std::string::npos) << md;
  testing::run_command("rm -rf " + bundle);
}

// Two snapshot files whose nodes gave one name (two hosts started with the same --node-name),
// their ranks with the same pids: two nodes named apart by their files, said on stderr and in
// the nodes' notes; no live rank is called dead.
TEST(Cli, DiagnoseNamesApartTwoNodesOfOneName) {
  using namespace analysis::testing_builders;
  JobBuilder job(4, "10.0.0.1:29500", 2);
  for (int r = 0; r < 4; ++r) job.rank(r, r == 3 ? store_wait_stack(r) : barrier_stack());
  const auto all = job.bundle();
  const std::string dir = testing::temp_path("cli-one-node-name");
  testing::run_command("mkdir -p " + dir);
  std::string files;
  for (const std::string node : {"node0", "node1"}) {
    std::vector<model::NodeSnapshot> samples;
    for (auto s : all.snapshots) {
      if (s.node_name != node) continue;
      s.node_name = "gpu";
      for (auto& p : s.processes) p.pid = 1000 + p.identity.rank.value_or(0) % 2;
      samples.push_back(std::move(s));
    }
    snapshot::write_file(dir + "/" + node + ".json", samples);
    files += " " + dir + "/" + node + ".json";
  }
  const auto d = run_hangscope("diagnose" + files + " -o " + dir + "/bundle");
  EXPECT_EQ(d.exit_code, 3) << d.err;
  EXPECT_NE(d.err.find("is named gpu@" + dir + "/node1.json"), std::string::npos) << d.err;
  const auto report =
      nlohmann::json::parse(testing::run_command("cat " + dir + "/bundle/report.json").out);
  ASSERT_EQ(report["nodes"].size(), 2u);
  EXPECT_EQ(report["nodes"][1]["name"], "gpu@" + dir + "/node1.json");
  EXPECT_EQ(report["diagnostics"], nlohmann::json::array());
  EXPECT_EQ(report["verdicts"][0]["id"], "rank-diverged");
  EXPECT_EQ(report["verdicts"][0]["diverged_ranks"], nlohmann::json::parse("[3]"));
  for (const auto& r : report["ranks"]) EXPECT_NE(r["state"], "dead") << r.dump();
  // `report` of the bundle reads the same two nodes back.
  const auto again = run_hangscope("report --json " + dir + "/bundle");
  EXPECT_EQ(again.exit_code, 3) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["verdicts"][0]["diverged_ranks"],
            nlohmann::json::parse("[3]"));
  testing::run_command("rm -rf " + dir);
}

// The status line (docs/cli.md, "Progress"), on a phase slowed on purpose: two local samples
// 2 s apart. On a terminal, a line redrawn in place names the phase and how far it is, and is
// erased before the next message; with stderr in a file, no redraw (no carriage return, no
// escape sequence) and one plain line for the phase. --quiet shows none of it.
TEST(Cli, LongPhasesShowAStatusLineOnATerminalOnly) {
  testing::TargetProcess target({NATIVE_TARGET});
  target.wait_for_line("ready");
  const std::string dir = testing::temp_path("cli-status-line");
  const std::string diagnose = std::string(HANGSCOPE_BINARY) + " diagnose --pid " +
                               std::to_string(target.pid()) + " --samples 2 --interval 2s -o ";

  const auto tty = testing::run_on_terminal(diagnose + dir + "-terminal");
  // Drawn in place (\r, erase to the end of the line) once the phase has lasted a second. How
  // many samples are done by then depends on the machine's load (on a loaded one the first
  // capture took over a second): "N of 2" is not pinned; the second is, by the unit test's clock.
  const std::string drawn = "\rhangscope: capturing samples: ";
  const auto at = tty.out.find(drawn);
  ASSERT_NE(at, std::string::npos) << tty.out;
  EXPECT_EQ(tty.out.find("capturing samples"), at + 12) << "nothing before a second: " << tty.out;
  const auto end = tty.out.find("\x1b[K", at);
  ASSERT_NE(end, std::string::npos) << tty.out;
  const std::string line = tty.out.substr(at, end - at);
  EXPECT_NE(line.find(" of 2 ("), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  // Erased before the next message: that line starts on a clean line.
  EXPECT_NE(tty.out.find("\r\x1b[Khangscope: local sample 2/2", at), std::string::npos) << tty.out;
  // At most ten draws a second: the phase lasts about 2 s, about one of them shown.
  std::size_t draws = 0;
  for (auto i = tty.out.find("\rhangscope: capturing"); i != std::string::npos;
       i = tty.out.find("\rhangscope: capturing", i + 1)) {
    ++draws;
  }
  EXPECT_LE(draws, 30u) << tty.out;

  const auto piped = testing::run_command(diagnose + dir + "-piped");
  EXPECT_EQ(piped.err.find('\r'), std::string::npos) << piped.err;
  EXPECT_EQ(piped.err.find('\x1b'), std::string::npos) << piped.err;
  std::size_t lines = 0;
  for (const auto& each : split_lines(piped.err)) {
    if (each.rfind("hangscope: capturing samples (", 0) != 0) continue;
    ++lines;
    EXPECT_NE(each.find(" of 2)..."), std::string::npos) << each;
  }
  EXPECT_EQ(lines, 1u) << piped.err;

  const auto quiet = testing::run_on_terminal(diagnose + dir + "-quiet --quiet");
  EXPECT_EQ(quiet.out.find("capturing samples"), std::string::npos) << quiet.out;
  testing::run_command("rm -rf " + dir + "-terminal " + dir + "-piped " + dir + "-quiet");
}

}  // namespace
}  // namespace hangscope
