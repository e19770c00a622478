// Bad input as a newcomer and an attacker give it, to every command: each case asserts the exit
// code (never a crash, never 0 for input that could not be read) and a part of the one-line
// message that names the input; no raw byte of a junk file reaches the terminal.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "hostile_inputs.h"
#include "target_process.h"

namespace hangscope {
namespace {

using testing::CommandResult;

// Replaces every "{D}" (the fixture directory) and "{T}" (the native target's path) in `text`.
std::string expand(std::string text, const std::string& dir) {
  for (const auto& [key, value] :
       {std::pair<std::string, std::string>{"{D}", dir}, {"{T}", NATIVE_TARGET}}) {
    for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at)) {
      text.replace(at, key.size(), value);
    }
  }
  return text;
}

// Bounded: a command that would block (on a FIFO) is killed after a minute instead of hanging
// the suite, and fails its row.
CommandResult hangscope(const std::string& args) {
  return testing::run_command("timeout -s KILL 60 " + std::string(HANGSCOPE_BINARY) + " " + args);
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// True when `text` is valid UTF-8 without control characters but newlines: safe on a terminal.
bool terminal_safe(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') continue;
    if (c < 0x20 || c == 0x7f) return false;
    if (c < 0x80) continue;
    const std::size_t length = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    if (c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) return false;  // C1
    i += length - 1;
  }
  return true;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Bytes that are neither JSON nor UTF-8 nor a protobuf message: control characters, an
// escape sequence, bytes past 0x7f.
std::string junk() {
  std::string bytes = "\x1b[31m\xff\xfe\x00\x01junk\r\n";
  bytes += std::string("\xc3\x28\xa0\xa1\xe2\x28\xa1\x9b\x07", 9);
  for (int i = 0; i < 4096; ++i) bytes += static_cast<char>((i * 7919) & 0xff);
  return bytes;
}

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::temp_path("bad-input"));
    const std::string& d = *dir_;
    ASSERT_EQ(testing::run_command("mkdir -p " + d + "/rules " + d + "/bundle/snapshots " + d +
                                   "/nonempty " + d + "/emptydir")
                  .exit_code,
              0);
    write_bytes(d + "/junk.json", junk());
    write_bytes(d + "/junk.pb", junk());
    write_bytes(d + "/empty.json", "");
    write_bytes(d + "/bundle/snapshots/node0.json", junk());
    write_bytes(d + "/bundle/nodes.json", "[]");
    write_bytes(d + "/nonempty/keep.txt", "mine");
    write_bytes(d + "/empty-hosts", "# no agent here\n\n");
    write_bytes(d + "/bad-hosts", "node0:7447\nnode1:99999\n");
    write_bytes(d + "/file", "x");
    write_bytes(d + "/rules/binary.json", junk());
    write_bytes(d + "/binary-rule.json", junk());
    // RE2 has no lookahead; the pattern is on line 5.
    write_bytes(
        d + "/lookahead.json",
        "{\n  \"id\": \"look\",\n  \"title\": \"t\",\n  \"groups\": {\"a\": {\"frames\": [\n"
        "    {\"function_regex\": \"foo(?=bar)\"}]}},\n  \"diverged\": \"a\",\n"
        "  \"summary\": \"{a}\"\n}\n");
    write_bytes(d + "/placeholder.json",
                "{\n  \"id\": \"holder\",\n  \"title\": \"t\",\n"
                "  \"groups\": {\"a\": {\"states\": [\"running\"]}},\n  \"diverged\": \"a\",\n"
                "  \"summary\": \"ranks {a} and {b.where}\"\n}\n");
    ASSERT_EQ(testing::run_command("truncate -s 3M " + d + "/big.json && mkfifo " + d + "/fifo")
                  .exit_code,
              0);
    // A job's flight-recorder dumps (rank 1 behind) and one hostile dump beside them: the memo
    // bomb of issue 30 (12 KB of pickle, 1,000^6 values expanded), and JSON nested 100,000 deep.
    const std::string dumps =
        std::string(HANGSCOPE_SOURCE_DIR) + "/tests/fixtures/flight_recorder/postmortem/behind";
    ASSERT_EQ(testing::run_command("mkdir -p " + d + "/fr-bomb " + d + "/fr-deep && cp " + dumps +
                                   "/pickle/* " + d + "/fr-bomb/ && cp " + dumps + "/json/* " + d +
                                   "/fr-deep/")
                  .exit_code,
              0);
    write_bytes(d + "/fr-bomb/node-2.nccl_trace_rank_9", testing::memo_bomb_pickle());
    write_bytes(d + "/fr-deep/node-2.nccl_trace_rank_9", testing::deep_json_dump(100'000));
    // A snapshot file of 300,001 empty snapshots (900 KB, ~100 times that decoded), alone and
    // in a bundle.
    std::string empties = "{\"snapshots\": [{}";
    for (int i = 0; i < 300'000; ++i) empties += ",{}";
    empties += "]}";
    write_bytes(d + "/empties.json", empties);
    ASSERT_EQ(testing::run_command("mkdir -p " + d + "/empties-bundle/snapshots").exit_code, 0);
    write_bytes(d + "/empties-bundle/snapshots/node0.json", empties);
    // Issue 30: FIFOs where inputs are expected, links in a bundle, -o in a directory of the
    // user's own files.
    ASSERT_EQ(
        testing::run_command(
            "mkdir -p " + d + "/home/snapshots " + d + "/cores " + d + "/logs " + d + "/fr " + d +
            "/linkbundle/snapshots " + d + "/nodeslink/snapshots " + d + "/sysroot$(dirname " +
            NATIVE_TARGET + ") && mkfifo " + d + "/cores/fifo " + d + "/logs/fifo " + d +
            "/sysroot" + NATIVE_TARGET + " && cp " + HANGSCOPE_SOURCE_DIR +
            "/tests/fixtures/flight_recorder/behind/pickle/nccl_trace_rank_0 " + d + "/fr/")
            .exit_code,
        0);
    write_bytes(d + "/home/thesis.tex", "years of work");
    write_bytes(d + "/logs/rank0.log", "[rank0]: ERROR worker failed\n");
    write_bytes(d + "/victim.md", "precious");
    write_bytes(d + "/linkbundle/snapshots/node0.json", junk());
    write_bytes(d + "/linkbundle/nodes.json", "[]");
    ASSERT_EQ(::symlink((d + "/victim.md").c_str(), (d + "/linkbundle/report.md").c_str()), 0);
    ASSERT_EQ(::symlink((d + "/victim.md").c_str(), (d + "/linkbundle/tree.dot").c_str()), 0);
    ASSERT_EQ(
        ::symlink((d + "/junk.json").c_str(), (d + "/linkbundle/snapshots/link.json").c_str()), 0);
    write_bytes(d + "/nodes-elsewhere.json", "[]");
    ASSERT_EQ(
        ::symlink((d + "/nodes-elsewhere.json").c_str(), (d + "/nodeslink/nodes.json").c_str()), 0);
    // A core of a real process (gcore), the executable and libraries it names opened on this
    // machine or under {D}/sysroot, where the executable is a FIFO.
    if (testing::run_command("command -v gcore >/dev/null").exit_code == 0) {
      testing::TargetProcess target({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
      target.wait_for_line("ready");
      const std::string pid = std::to_string(target.pid());
      have_core_ =
          testing::run_command("gcore -o " + d + "/cores/core " + pid + " >/dev/null 2>&1 && mv " +
                               d + "/cores/core." + pid + " " + d + "/cores/core")
              .exit_code == 0;
    }
  }
  static void TearDownTestSuite() {
    testing::run_command("rm -rf " + *dir_);
    delete dir_;
  }
  static const std::string& dir() { return *dir_; }
  static bool have_core() { return have_core_; }

 private:
  static std::string* dir_;
  static bool have_core_;
};

std::string* BadInput::dir_ = nullptr;
bool BadInput::have_core_ = false;

struct Case {
  const char* args;     // after the binary; {D} is the fixture directory, {T} the native target
  int exit_code;        // 1 failed / unreadable, 2 usage; 0, 1 or 3 (the rest read and reported)
  const char* message;  // a part of stderr (or stdout, for a note of a dump) naming the input
                        // and the reason
  const char* also = nullptr;  // a part of stderr or stdout: the rest of the work was done
  bool (*after)(const std::string& dir) = nullptr;  // what must hold afterwards (files kept)
  bool needs_core = false;                          // uses {D}/cores/core (gcore)
  bool quick = false;  // an input that once blocked forever: must finish within 10 s
};

bool thesis_kept(const std::string& d) {
  return file_text(d + "/home/thesis.tex") == "years of work" && is_regular(d + "/home/thesis.tex");
}

// report wrote its report.md and tree.dot as files of their own, never into the link's target.
bool link_target_untouched(const std::string& d) {
  return file_text(d + "/victim.md") == "precious" && is_regular(d + "/linkbundle/report.md") &&
         is_regular(d + "/linkbundle/tree.dot") &&
         file_text(d + "/linkbundle/report.md").find("precious") == std::string::npos;
}

// One row per case of issue 19 (and what a careful user would expect where it is silent).
const Case kCases[] = {
    // diagnose: unreadable input is a failure, never "no hang"
    {"diagnose {D}/missing.json -o {D}/o1", 1, "snapshot file {D}/missing.json: No such file"},
    {"diagnose {D}/junk.json -o {D}/o2", 1, "snapshot file {D}/junk.json: not a hangscope"},
    {"diagnose {D}/junk.pb -o {D}/o3", 1, "snapshot file {D}/junk.pb: not a hangscope snapshot"},
    {"diagnose {D}/empty.json -o {D}/o4", 1, "snapshot file {D}/empty.json"},
    {"diagnose /dev/zero -o {D}/o5", 1, "snapshot file /dev/zero: is a character device"},
    {"diagnose {D}/fifo -o {D}/o6", 1, "snapshot file {D}/fifo: is a FIFO"},
    {"diagnose {D}/emptydir -o {D}/o7", 1, "snapshot file {D}/emptydir: is a directory"},
    {"diagnose {D}/big.json --max-input-mib 1 -o {D}/o8", 1,
     "snapshot file {D}/big.json: 3.0 MiB (3145728 bytes) is over the limit"},
    {"diagnose {D}/empties.json -o {D}/o_emp", 1,
     "snapshot file {D}/empties.json: refused: decoding it would take about 91 MiB"},
    {"diagnose --pid 999999 -o {D}/o9", 1, "pid 999999 does not exist"},
    // a rule file left out is said in every output mode, --json and --ticket too
    {"diagnose --json --rules {D}/rules {D}/junk.json -o {D}/o_rj", 1,
     "skipped rule: {D}/rules/binary.json:1: not valid JSON"},
    {"diagnose --ticket --rules {D}/rules {D}/junk.json -o {D}/o_rt", 1,
     "skipped rule: {D}/rules/binary.json:1: not valid JSON"},
    // diagnose: usage errors, before any sampling
    {"diagnose --hostfile {D}/empty-hosts", 2, "--hostfile {D}/empty-hosts: names no agent"},
    {"diagnose --hostfile {D}/bad-hosts", 2, "--hostfile {D}/bad-hosts:2: 'node1:99999'"},
    {"diagnose --hostfile {D}/absent-hosts", 2, "--hostfile {D}/absent-hosts: No such file"},
    {"diagnose --agents ''", 2, "--agents '': names no agent"},
    {"diagnose --agents 127.0.0.1:99999", 2, "port 99999 is outside 1-65535"},
    {"diagnose --agents 127.0.0.1:abc", 2, "--agents '127.0.0.1:abc': port 'abc' is not a number"},
    {"diagnose --agents 127.0.0.1:0", 2, "port 0 is outside 1-65535"},
    {"diagnose --agents ::1", 2, "an IPv6 address goes in brackets: [::1]:PORT"},
    {"diagnose --interval abc", 2, "--interval 'abc': expected a duration"},
    {"diagnose --interval nan", 2, "--interval 'nan': expected a duration"},
    {"diagnose --select '('", 2, "--select '(': not a valid regular expression"},
    {"diagnose {D}/junk.json --agents 127.0.0.1:1", 2, "not both"},
    {"diagnose {D}/junk.json --select python", 2, "--select applies to local capture only"},
    {"diagnose {D}/junk.json --pid 1", 2, "--pid applies to local capture only"},
    {"diagnose --agents 127.0.0.1:1 --pid 1", 2, "--pid applies to local capture only"},
    {"diagnose --agents 127.0.0.1:1 --trigger-fr-dump", 2, "--trigger-fr-dump applies to local"},
    {"diagnose {D}/junk.json --samples 2", 2, "--samples does not apply to snapshot files"},
    {"diagnose --token-file {D}/file", 2, "--token-file applies to agents"},
    {"diagnose --no-locals --query-store", 2, "--query-store needs --locals"},
    {"diagnose -o {D}/nonempty", 2, "-o {D}/nonempty: exists and is not empty"},
    {"diagnose -o {D}/nonempty --force", 2,
     "-o {D}/nonempty: holds keep.txt, which is no file of a hangscope bundle"},
    // issue 30 item 2: an empty snapshots/ beside the user's files made --force empty it all
    {"diagnose -o {D}/home --force", 2,
     "-o {D}/home: holds thesis.tex, which is no file of a hangscope bundle: --force removes only",
     nullptr, thesis_kept},
    {"diagnose -o {D}/file", 2, "-o {D}/file: exists and is not a directory"},
    {"diagnose --pid 0", 2, "--pid: '0' is not a process id"},
    // report
    {"report {D}/absent-bundle", 1, "bundle {D}/absent-bundle: No such file"},
    {"report {D}/file", 1, "bundle {D}/file: is not a directory"},
    {"report {D}/emptydir", 1, "bundle {D}/emptydir: no snapshots/"},
    {"report {D}/bundle", 1, "snapshot file {D}/bundle/snapshots/node0.json: not a hangscope"},
    {"report {D}/empties-bundle", 1,
     "snapshot file {D}/empties-bundle/snapshots/node0.json: refused: decoding it would take"},
    // issue 30 item 5: links in a shared bundle are neither written through nor read
    {"report {D}/linkbundle", 1,
     "snapshot file {D}/linkbundle/snapshots/link.json: is a symbolic link, which is not followed",
     "report written to {D}/linkbundle/report.md", link_target_untouched},
    {"report {D}/nodeslink", 1,
     "bundle file {D}/nodeslink/nodes.json: is a symbolic link, which is not followed"},
    // rules
    {"rules check /tmp", 1, "rule file /tmp: is a directory"},
    {"rules check /dev/zero", 1, "rule file /dev/zero: is a character device"},
    {"rules check {D}/fifo", 1, "rule file {D}/fifo: is a FIFO"},
    {"rules check {D}/binary-rule.json", 1, "{D}/binary-rule.json:1: not valid JSON"},
    {"rules check {D}/big.json --max-input-mib 1", 1, "rule file {D}/big.json: 3.0 MiB"},
    {"rules check {D}/lookahead.json", 1, "{D}/lookahead.json:5: bad function_regex `foo(?=bar)`"},
    {"rules check {D}/placeholder.json", 1,
     "{D}/placeholder.json:6: unknown placeholder `{b.where}`"},
    {"rules list --rules {D}/rules", 1, "skipped rule: {D}/rules/binary.json:1: not valid JSON"},
    {"rules list --rules {D}/absent", 1, "--rules {D}/absent: not a readable directory"},
    // dump
    {"dump --pid 0", 2, "--pid: '0' is not a process id (1 to 4194304)"},
    {"dump --pid 99999999999999999999", 2, "is not a process id"},
    {"dump --pid 999999", 1, "pid 999999 does not exist"},
    {"dump", 2, "give one process: --pid PID (live) or --core FILE"},
    {"dump --core {D}/junk.json", 1, "{D}/junk.json: not an ELF file"},
    {"dump --core /dev/zero", 1, "core file /dev/zero: is a character device, not a regular file"},
    // issue 30 item 6: every file opened for an input is refused when it is no regular file,
    // without waiting for a FIFO's writer; the rest of the work is still done
    {"dump --core {D}/fifo", 1, "core file {D}/fifo: is a FIFO, not a regular file", nullptr,
     nullptr, false, true},
    {"dump --core {D}/cores/core --exe {D}/fifo", 0,
     "cannot open {D}/fifo: is a FIFO, not a regular file", "Thread ", nullptr, true, true},
    {"dump --core {D}/cores/core --sysroot {D}/sysroot", 0,
     "cannot open {D}/sysroot{T}: is a FIFO, not a regular file", "Thread ", nullptr, true, true},
    {"diagnose --cores {D}/fifo -o {D}/o_cfifo", 1, "core file {D}/fifo: is a FIFO", nullptr,
     nullptr, false, true},
    {"diagnose --cores '{D}/cores/*' --log '{D}/logs/*' -o {D}/o_cglob", 1,
     "core file {D}/cores/fifo: is a FIFO, not a regular file", "read 1 core file(s)", nullptr,
     true, true},
    {"diagnose --cores {D}/cores/core --log '{D}/logs/*' -o {D}/o_clog", 0,
     "log {D}/logs/fifo: is a FIFO, not a regular file", "read 1 core file(s)", nullptr, true,
     true},
    {"diagnose --flight-records {D}/fr --log '{D}/logs/*' -o {D}/o_frlog", 3,
     "log {D}/logs/fifo: is a FIFO, not a regular file", "read 1 flight-recorder dump(s)", nullptr,
     false, true},
    {"dump --pid 1 --stop-mode all --core {D}/junk.json", 2, "excludes"},
    {"diagnose --exe /bin/true -o {D}/o_exe", 2, "--exe applies to --cores only"},
    {"diagnose --cores {D} --samples 2 -o {D}/o_cs", 2, "--samples does not apply to --cores"},
    {"diagnose --cores {D} --flight-records {D} -o {D}/o_cf", 2,
     "--cores diagnoses core files alone"},
    {"diagnose --cores {D}/junk.json -o {D}/o_cj", 1, "{D}/junk.json: not an ELF file"},
    // amplification (issue 30): the hostile dump is refused by name, the others make the report
    {"diagnose --flight-records {D}/fr-bomb -o {D}/o_frb", 3,
     "{D}/fr-bomb/node-2.nccl_trace_rank_9: pickle: more than 2097152 values to expand"},
    {"diagnose --flight-records {D}/fr-deep -o {D}/o_frd", 3,
     "{D}/fr-deep/node-2.nccl_trace_rank_9: JSON dump refused: nested deeper than 64 levels"},
    // collect
    {"collect --listen 127.0.0.1:99999", 2, "--listen '127.0.0.1:99999': port 99999 is outside"},
    {"collect --listen 127.0.0.1:abc", 2, "--listen '127.0.0.1:abc': port 'abc' is not a number"},
    {"collect --listen ::1:7447", 2, "an IPv6 address goes in brackets"},
    {"collect --listen '[::1'", 2, "'[' without ']'"},
    {"collect --once -o {D}/emptydir", 2, "-o {D}/emptydir: is a directory"},
    {"collect --once -o {D}/absent/x.json", 1, "-o {D}/absent/x.json: directory {D}/absent"},
    {"collect --samples 3", 2, "--samples applies to --once only"},
    {"collect --once -o {D}/x.json --listen 127.0.0.1:1", 2, "--listen applies to the agent"},
    {"collect --once -o {D}/x.json --select '('", 2, "--select '(': not a valid regular"},
    {"collect --once -o {D}/x.json --interval 2h", 2, "--interval '2h'"},
    {"collect --replay {D}/junk.json --listen 127.0.0.1:47911", 1, "{D}/junk.json"},
    // the command itself
    {"frobnicate", 2, "unknown command 'frobnicate'"},
    {"--log-level debug frobnicate", 2, "unknown command 'frobnicate'"},
};

// CPU time (user + system) of the children this test has reaped so far. Work is bounded in CPU
// time, which a loaded machine does not stretch; a wait that never ends is caught by a generous
// wall-clock bound beside it (a process blocked on a FIFO uses no CPU).
std::chrono::milliseconds children_cpu() {
  struct rusage usage {};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  const auto ms = [](const timeval& t) {
    return std::chrono::milliseconds(t.tv_sec * 1000 + t.tv_usec / 1000);
  };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// A bound on wall-clock time that only a process that waits for nothing it should wait for
// overruns, however loaded the machine.
constexpr auto kNoHang = std::chrono::seconds(60);

TEST_F(BadInput, EveryCaseExitsWithItsCodeAndNamesTheInput) {
  for (const auto& c : kCases) {
    if (c.needs_core && !have_core()) continue;  // no gcore here (the core tests skip too)
    const std::string args = expand(c.args, dir());
    const auto started = std::chrono::steady_clock::now();
    const auto cpu_before = children_cpu();
    const auto result = hangscope(args);
    const auto took = std::chrono::steady_clock::now() - started;
    const auto cpu = children_cpu() - cpu_before;
    SCOPED_TRACE(args + "\nstderr: " + result.err);
    EXPECT_EQ(result.exit_code, c.exit_code);
    const std::string both = result.err + result.out;
    EXPECT_NE(both.find(expand(c.message, dir())), std::string::npos);
    if (c.also != nullptr) {
      EXPECT_NE(both.find(expand(c.also, dir())), std::string::npos);
    }
    if (c.after != nullptr) {
      EXPECT_TRUE(c.after(dir()));
    }
    if (c.quick) {  // a FIFO or device is refused, never waited on: seconds here (10 s on CI)
      EXPECT_LT(took, kNoHang);
      EXPECT_LT(cpu, std::chrono::seconds(5));
    }
    EXPECT_TRUE(terminal_safe(result.err));
    EXPECT_TRUE(terminal_safe(result.out));
    // Every error is a line of its own that says it is one.
    if (c.exit_code == 1 || c.exit_code == 2) {
      EXPECT_NE(result.err.find("hangscope: error: "), std::string::npos);
    }
    if (c.exit_code == 2) {
      // Usage errors are found before anything is sampled or served.
      EXPECT_EQ(result.err.find("local sample"), std::string::npos);
      EXPECT_EQ(result.err.find("wrote"), std::string::npos);
      EXPECT_EQ(result.out.find("listening on"), std::string::npos);
      EXPECT_LT(took, kNoHang);
      EXPECT_LT(cpu, std::chrono::seconds(2));  // about 0.1 s: nothing is read or sampled
    }
  }
}

// --json output stays one JSON document whatever the input's bytes were.
TEST_F(BadInput, JsonOutputsStayValidJson) {
  const std::string& d = dir();
  for (const std::string& args :
       std::vector<std::string>{"rules check --json " + d + "/binary-rule.json",
                                "rules list --json --rules " + d + "/rules",
                                "diagnose --json " + d + "/junk.json -o " + d + "/j1",
                                "report --json " + d + "/bundle"}) {
    const auto result = hangscope(args);
    SCOPED_TRACE(args + "\nstderr: " + result.err);
    EXPECT_EQ(result.exit_code, 1);
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = nlohmann::json::parse(result.out)) << result.out;
    EXPECT_TRUE(terminal_safe(result.out));
  }
  const auto report = nlohmann::json::parse(
      hangscope("diagnose --json " + d + "/junk.pb -o " + d + "/j2 --quiet").out);
  ASSERT_EQ(report.at("nodes").size(), 1u);
  EXPECT_EQ(report["nodes"][0]["status"], "error");
  EXPECT_NE(report["nodes"][0]["error"].get<std::string>().find(d + "/junk.pb"), std::string::npos);
}

// The peak resident set (KiB) of `command` run by the shell, or -1.
long peak_rss_kib_of(const std::string& command) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command + " >/dev/null 2>&1").c_str(), nullptr);
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid) return -1;
  return usage.ru_maxrss;
}

// A memo bomb among a job's dumps (issue 30: it allocated 2.8 GB in 5 s and aborted, with no
// report): refused as that dump, with its reason in report.json; the four good dumps still name
// rank 1, in bounded time and memory.
TEST_F(BadInput, AMemoBombAmongTheDumpsIsRefusedAndTheOthersStillReport) {
  const std::string& d = dir();
  const auto started = std::chrono::steady_clock::now();
  const auto cpu_before = children_cpu();
  const auto result =
      hangscope("diagnose --json --quiet --flight-records " + d + "/fr-bomb -o " + d + "/o_frb2");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2 * kNoHang);
  // 0.4-0.5 s of work here (2.8 GB and an abort before the budget); 20 s is a runaway.
  EXPECT_LT(children_cpu() - cpu_before, std::chrono::seconds(20));
  ASSERT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find(d + "/fr-bomb/node-2.nccl_trace_rank_9: pickle: more than"),
            std::string::npos)
      << result.err;
  const auto report = nlohmann::json::parse(result.out);
  ASSERT_FALSE(report.at("verdicts").empty());
  EXPECT_EQ(report["verdicts"][0]["id"], "collective-behind");
  EXPECT_EQ(report["verdicts"][0]["diverged_ranks"], nlohmann::json::array({1}));
  int ok = 0;
  bool bomb_named = false;
  for (const auto& node : report.at("nodes")) {
    if (node["status"] == "ok") ++ok;
    if (node["status"] == "error") {
      bomb_named = node["name"].get<std::string>().find("nccl_trace_rank_9") != std::string::npos &&
                   node["error"].get<std::string>().find("memo bomb") != std::string::npos;
    }
  }
  EXPECT_EQ(ok, 4);
  EXPECT_TRUE(bomb_named) << report["nodes"].dump();
  // Memory: the expansion stops at its budget (measured: about 250 MiB peak for the process).
  const long peak =
      peak_rss_kib_of(std::string(HANGSCOPE_BINARY) + " diagnose --quiet --flight-records " + d +
                      "/fr-bomb/node-2.nccl_trace_rank_9 -o " + d + "/o_frb3");
  ASSERT_GT(peak, 0);
  EXPECT_LT(peak, 768 * 1024) << "peak RSS " << peak << " KiB";
}

// `dump` of its own process: ptrace cannot attach to the caller; the message says so instead
// of blaming privileges.
TEST_F(BadInput, DumpOfItselfSaysItCannotTraceItself) {
  const auto result =
      testing::run_command("sh -c 'exec " + std::string(HANGSCOPE_BINARY) + " dump --pid $$'");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("is hangscope itself: a process cannot trace itself"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("CAP_SYS_PTRACE"), std::string::npos) << result.err;
}

// A rank whose log holds a byte that is not UTF-8 (sys.stdout.buffer.write(b"\xff")): the local
// diagnose reads the log and still writes report.json (it aborted with nlohmann's type_error
// 316), with the byte as U+FFFD.
TEST_F(BadInput, LocalDiagnoseOfARankWithANonUtf8LogWritesItsReport) {
  const std::string log = dir() + "/rank.log";
  const std::string script =
      "import os, sys, time\n"
      "fd = os.open('" +
      log +
      "', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n"
      "saved = os.dup(1)\n"
      "os.dup2(fd, 1)\n"
      "sys.stdout.buffer.write(b'ERROR worker failed: \\xff\\xfe bad byte\\n')\n"
      "sys.stdout.flush()\n"
      "os.write(saved, b'ready\\n')\n"
      "time.sleep(600)\n";
  testing::TargetProcess rank({"/usr/bin/python3", "-c", script},
                              {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  const std::string out = dir() + "/local";
  const auto result =
      hangscope("diagnose --pid " + std::to_string(rank.pid()) + " --samples 1 --json -o " + out);
  ASSERT_TRUE(result.exit_code == 0 || result.exit_code == 3) << result.exit_code << result.err;
  const auto report = nlohmann::json::parse(result.out);
  ASSERT_EQ(report.at("ranks").size(), 1u);
  const auto written = testing::run_command("cat " + out + "/report.json");
  nlohmann::json written_doc;
  EXPECT_NO_THROW(written_doc = nlohmann::json::parse(written.out));
  const auto snapshot = testing::run_command("cat " + out + "/snapshots/*.json");
  EXPECT_NE(snapshot.out.find("worker failed: \xEF\xBF\xBD\xEF\xBF\xBD bad byte"),
            std::string::npos);
}

// -o on the bundle of an earlier run: refused (report would list every rank twice), unless
// --force, which empties it first; `report` then shows each rank once.
TEST_F(BadInput, OutputDirectoryOfAnEarlierRunNeedsForce) {
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  const std::string snapshot = dir() + "/rank0.json";
  ASSERT_EQ(
      hangscope("collect --once --pid " + std::to_string(rank.pid()) + " -o " + snapshot).exit_code,
      0);
  const std::string out = dir() + "/rerun";
  const auto first = hangscope("diagnose " + snapshot + " -o " + out + " --quiet");
  ASSERT_TRUE(first.exit_code == 0 || first.exit_code == 3) << first.err;
  const auto again = hangscope("diagnose " + snapshot + " -o " + out + " --quiet");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("-o " + out + ": exists and is not empty"), std::string::npos)
      << again.err;
  // A file of the user's own in the bundle: --force removes nothing, and says which file.
  write_bytes(out + "/notes.txt", "mine");
  const auto foreign = hangscope("diagnose " + snapshot + " -o " + out + " --force --quiet");
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.err.find("-o " + out + ": holds notes.txt, which is no file of a hangscope"),
            std::string::npos)
      << foreign.err;
  EXPECT_EQ(file_text(out + "/notes.txt"), "mine");
  EXPECT_TRUE(is_regular(out + "/report.md"));
  ASSERT_EQ(::unlink((out + "/notes.txt").c_str()), 0);
  const auto forced = hangscope("diagnose " + snapshot + " -o " + out + " --force --quiet");
  EXPECT_EQ(forced.exit_code, first.exit_code) << forced.err;
  const auto replayed = hangscope("report --json " + out);
  EXPECT_EQ(replayed.exit_code, first.exit_code) << replayed.err;
  EXPECT_EQ(nlohmann::json::parse(replayed.out).at("ranks").size(), 1u);

  // The bundle shared on a ticket, its report.md and tree.dot made links to a file elsewhere:
  // `report` replaces the links with its files and leaves the file as it was.
  const std::string victim = dir() + "/someone-elses.md";
  write_bytes(victim, "precious");
  for (const char* name : {"/report.md", "/tree.dot"}) {
    ASSERT_EQ(::unlink((out + name).c_str()), 0);
    ASSERT_EQ(::symlink(victim.c_str(), (out + name).c_str()), 0);
  }
  const auto relinked = hangscope("report " + out);
  EXPECT_EQ(relinked.exit_code, first.exit_code) << relinked.err;
  EXPECT_EQ(file_text(victim), "precious");
  EXPECT_TRUE(is_regular(out + "/report.md"));
  EXPECT_TRUE(is_regular(out + "/tree.dot"));
  EXPECT_NE(file_text(out + "/report.md").find("# "), std::string::npos);
}

// A second agent on a port in use is refused (gRPC's SO_REUSEPORT would have let it take half
// of the connections), naming the agent that holds the port.
TEST_F(BadInput, SecondAgentOnAPortInUseIsRefused) {
  testing::TargetProcess first(
      {HANGSCOPE_BINARY, "collect", "--listen", "127.0.0.1:0", "--node-name", "first"});
  const std::string line = first.wait_for_line("listening on ");
  const std::string address = line.substr(std::string("listening on ").size());
  const auto second = hangscope("collect --listen " + address);
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("cannot listen on " + address + ": the port is in use by pid " +
                            std::to_string(first.pid()) + " (hangscope)"),
            std::string::npos)
      << second.err;
  EXPECT_EQ(second.out.find("listening on"), std::string::npos);
}

// An interpreter hangscope cannot read is named as such (2.7 was "not a Python process"):
// a native program under the file name of CPython 2.7 or 3.6, which have no _PyRuntime.
TEST_F(BadInput, OldPythonVersionsAreNamedUnsupported) {
  for (const std::string& name : std::vector<std::string>{"python2.7", "python3.6"}) {
    const std::string exe = dir() + "/" + name;
    ASSERT_EQ(testing::run_command("cp /bin/sleep " + exe).exit_code, 0);
    testing::TargetProcess old({exe, "600"});
    ASSERT_TRUE(testing::eventually([&] {
      char buffer[4096] = {};
      const auto n = ::readlink(("/proc/" + std::to_string(old.pid()) + "/exe").c_str(), buffer,
                                sizeof buffer - 1);
      return n > 0 && std::string(buffer, static_cast<std::size_t>(n)) == exe;
    }));
    const auto result = hangscope("dump --pid " + std::to_string(old.pid()));
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE((result.out + result.err).find("unsupported Python version " + name.substr(6)),
              std::string::npos)
        << result.out << result.err;
  }
}

// A hostfile given as `--hostfile <(command)` is a pipe: read, and checked line by line.
TEST_F(BadInput, HostfileFromAPipeIsReadAndChecked) {
  const auto result = testing::run_command("bash -c '" + std::string(HANGSCOPE_BINARY) +
                                           " diagnose --hostfile <(printf \"n0\\nn1:0\\n\")'");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(":2: 'n1:0': port 0 is outside 1-65535"), std::string::npos)
      << result.err;
}

// `report --ticket` prints the ticket on stdout and nothing on stderr but errors.
TEST_F(BadInput, ReportTicketKeepsStderrForErrors) {
  testing::TargetProcess rank({NATIVE_TARGET}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  rank.wait_for_line("ready");
  const std::string snapshot = dir() + "/ticket0.json";
  ASSERT_EQ(
      hangscope("collect --once --pid " + std::to_string(rank.pid()) + " -o " + snapshot).exit_code,
      0);
  const std::string out = dir() + "/ticket";
  ASSERT_NE(hangscope("diagnose " + snapshot + " -o " + out + " --quiet").exit_code, 1);
  const auto ticket = hangscope("report --ticket " + out);
  EXPECT_NE(ticket.exit_code, 1);
  EXPECT_EQ(ticket.err, "");
  EXPECT_NE(ticket.out.find("# "), std::string::npos);
}

}  // namespace
}  // namespace hangscope
