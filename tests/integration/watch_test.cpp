// `hangscope watch` on the virtual cluster (issue 35): real namespaces as nodes, real agents,
// real gloo ranks, watch run as a user runs it (`--agents … --token-file …`, stdout and stderr
// to files) and checked as a user reads it: the stdout line, the incident directory (every file
// parsed), report.json's top verdict naming the culprit rank (diverged_ranks, processes), the
// --on-hang command's environment, the exit code.
//   - a job that runs healthy for 20 s and then hangs (parallel_job.py --stall-after): the
//     incident within --after + 30 s, naming the culprit; the bundle still complete and
//     re-rendered by `hangscope report` once the job's ranks are killed;
//   - a busy straggler with a failing --on-hang; a second job hung beside it, each incident's
//     report leading with its own job; then SIGTERM while watching and while an incident is
//     being captured and written: exit 0, no half-written incident directory;
//   - a rank SIGKILLed mid-run while its peers wait in a store barrier: a rank-dead incident;
//   - four healthy jobs under one watch for 60 s (busy, slow, a loop with no pause, an idle
//     vLLM-style server): no incident, no confirming capture, and no rank thread ever seen in a
//     ptrace stop (every thread's /proc stat sampled ten times a second from the host).
// The culprit ranks are drawn at random (HANGSCOPE_SCENARIO_SEED replays; the seed is printed
// with every failure). Each test prints its wall time as "[watch-test] NAME: N s".
// Metrics (--metrics) are not checked here yet (not on main): see watch_options.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "command.h"
#include "target_process.h"
#include "virtual_cluster.h"

namespace hangscope {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const std::string kCluster = HANGSCOPE_SOURCE_DIR "/tools/testbed/cluster.sh";
const std::string kRepro = HANGSCOPE_SOURCE_DIR "/tools/repro/";
// The job of the cluster's ranks: MASTER_ADDR (node 0) and MASTER_PORT, as watch keys it.
const std::string kClusterJob = "198.51.100.1:29500";

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

unsigned scenario_seed() {
  if (const char* text = std::getenv("HANGSCOPE_SCENARIO_SEED"); text && *text) {
    return static_cast<unsigned>(std::strtoul(text, nullptr, 10));
  }
  return std::random_device{}();
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string last_lines(const std::string& text, std::size_t lines = 60) {
  std::size_t at = text.size();
  for (std::size_t n = 0; n <= lines && at != std::string::npos && at > 0; ++n) {
    at = text.rfind('\n', at - 1);
  }
  return at == std::string::npos || at == 0 ? text : "…" + text.substr(at);
}

// A directory's entries (without . and ..), sorted; empty when it does not exist.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<json> parse_json(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// `hangscope --log-level debug watch OPTIONS` in the background, as a user starts it from a
// shell: stdin /dev/null, stdout and stderr to LOGS.out and LOGS.err. Its own process group,
// killed (SIGKILL) with the test if it is still running.
class WatchProcess {
 public:
  WatchProcess(const std::string& logs, const std::vector<std::string>& options)
      : out_path_(logs + ".out"), err_path_(logs + ".err"), started_(Clock::now()) {
    std::vector<std::string> argv = {HANGSCOPE_BINARY, "--log-level", "debug", "watch"};
    argv.insert(argv.end(), options.begin(), options.end());
    std::vector<char*> args;  // made before fork: the child only calls async-signal-safe code
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || err < 0) ::_exit(126);
      ::dup2(in, STDIN_FILENO);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    if (pid_ > 0) ::setpgid(pid_, pid_);
    command_line_ = "hangscope";
    for (std::size_t i = 1; i < argv.size(); ++i) command_line_ += " '" + argv[i] + "'";
  }
  ~WatchProcess() {
    if (pid_ > 0 && !exit_code_) {
      ::killpg(pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      int status;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  WatchProcess(const WatchProcess&) = delete;
  WatchProcess& operator=(const WatchProcess&) = delete;

  void signal(int sig) const {
    if (pid_ > 0 && !exit_code_) ::kill(pid_, sig);
  }
  // The exit code once it ended (128 + the signal when one killed it), nullopt while it runs.
  std::optional<int> exited() {
    if (exit_code_ || pid_ <= 0) return exit_code_;
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      ended_ = Clock::now();
    }
    return exit_code_;
  }
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!exited() && Clock::now() < deadline) std::this_thread::sleep_for(100ms);
    return exited();
  }
  // Seconds from its start to its end (or to now while it runs).
  double seconds() const {
    return std::chrono::duration<double>((exit_code_ ? ended_ : Clock::now()) - started_).count();
  }
  std::string out() const { return file_text(out_path_); }
  std::string err() const { return file_text(err_path_); }
  // For failure messages: the command, its stdout and the end of its stderr.
  std::string log() const {
    return "$ " + command_line_ + "\n--- stdout:\n" + out() + "--- stderr (end):\n" +
           last_lines(err()) + "\n";
  }

 private:
  std::string out_path_, err_path_;
  std::string command_line_;
  Clock::time_point started_, ended_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// Waits until `pred()` or the timeout, polling every 200 ms; pred()'s last value.
template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return pred();
}

// One stdout line of watch: `<UTC time> incident <job> <verdict id> <bundle path>: <summary>`.
struct IncidentLine {
  std::string time, job, verdict, path, summary;
};

// Every stdout line must be an incident line; a line that is not one is a test failure.
std::vector<IncidentLine> incident_lines(const std::string& out) {
  static const std::regex line(
      R"(^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) incident (\S+) (\S+) (\S+): (.*)$)");
  std::vector<IncidentLine> found;
  std::istringstream in(out);
  std::string text;
  std::smatch m;
  while (std::getline(in, text)) {
    if (std::regex_match(text, m, line)) {
      found.push_back({m[1], m[2], m[3], m[4], m[5]});
    } else {
      ADD_FAILURE() << "stdout line that is no incident line: " << text;
    }
  }
  return found;
}

// A rank's announcement in a log ("rank R pid P progressing|waiting|diverged"; the pid as the
// node's PID namespace sees it).
struct Announced {
  int rank = -1;
  std::string node;
  int pid = 0;
  std::string state;
};

std::vector<Announced> announced(const std::string& log, const std::string& node) {
  static const std::regex line(R"(^rank ([0-9]+) pid ([0-9]+) (progressing|waiting|diverged)\b)");
  std::vector<Announced> all;
  std::istringstream in(file_text(log));
  std::string text;
  std::smatch m;
  while (std::getline(in, text)) {
    if (std::regex_search(text, m, line)) {
      all.push_back({std::stoi(m[1]), node, std::stoi(m[2]), m[3]});
    }
  }
  return all;
}

std::vector<Announced> announced_in_cluster(const testing::VirtualCluster& cluster, int nodes) {
  std::vector<Announced> all;
  for (int n = 0; n < nodes; ++n) {
    const auto node =
        announced(cluster.dir() + "/node" + std::to_string(n) + ".log", "node" + std::to_string(n));
    all.insert(all.end(), node.begin(), node.end());
  }
  return all;
}

std::optional<Announced> find_announced(const std::vector<Announced>& all, int rank,
                                        const std::string& state = "") {
  for (const auto& a : all) {
    if (a.rank == rank && (state.empty() || a.state == state)) return a;
  }
  return std::nullopt;
}

// Runs COMMAND in node `node` of the cluster (cluster.sh exec), in the background with its
// output in LOG when LOG is given; true when cluster.sh succeeded.
bool exec_in_node(const testing::VirtualCluster& cluster, int node, const std::string& command,
                  const std::string& log = "") {
  const auto result = testing::run_command(
      kCluster + " exec --dir " + cluster.dir() + " --node " + std::to_string(node) +
      (log.empty() ? "" : " --log " + log) + " -- " + command + " 2>&1");
  EXPECT_EQ(result.exit_code, 0) << "cluster.sh exec " << command << ":\n" << result.out;
  return result.exit_code == 0;
}

// "\bRank R\b" or "\brank R\b" in a verdict's text.
bool names_rank(const std::string& text, int rank) {
  return std::regex_search(text, std::regex("\\b[Rr]ank " + std::to_string(rank) + "\\b"));
}

// The top verdict's process entry of the announced rank, as diverged.
void expect_culprit_named(const json& report, const Announced& culprit) {
  ASSERT_TRUE(report.contains("verdicts") && report["verdicts"].is_array() &&
              !report["verdicts"].empty())
      << report.value("conclusion", json()).dump();
  const auto& top = report["verdicts"][0];
  EXPECT_EQ(top.value("diverged_ranks", json()), json::array({culprit.rank})) << top.dump(1);
  bool named = false;
  for (const auto& p : top.value("processes", json::array())) {
    if (p.value("node", "") == culprit.node && p.value("pid", 0) == culprit.pid) {
      named = true;
      EXPECT_EQ(p.value("side", ""), "diverged") << p.dump();
      EXPECT_EQ(p.value("rank", -1), culprit.rank) << p.dump();
    }
  }
  EXPECT_TRUE(named) << "rank " << culprit.rank << " (" << culprit.node << " pid " << culprit.pid
                     << ") is not among the top verdict's processes: " << top.dump(1);
}

// What an incident directory holds, each file parsed.
struct IncidentFiles {
  json report;  // report.json
  json watch;   // watch.json
};

// Checks that `path` is a complete incident directory (named <stamp>-<job>, every file a bundle
// and watch write, each parsed as its format says, nothing else) and returns its JSON files.
IncidentFiles expect_complete_incident(const std::string& path) {
  SCOPED_TRACE("incident " + path);
  IncidentFiles files;
  const std::string name = path.substr(path.rfind('/') + 1);
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(^\d{8}T\d{6}Z-[A-Za-z0-9._-]+$)"))) << name;
  const std::set<std::string> expected = {"nodes.json", "report.json",   "report.md", "snapshots",
                                          "tree.dot",   "stacks.folded", "tree.svg",  "watch.json"};
  const auto found = entries(path);
  EXPECT_EQ(std::set<std::string>(found.begin(), found.end()), expected);
  for (const std::string file : {"nodes.json", "report.json", "watch.json"}) {
    const auto parsed = parse_json(file_text(path + "/" + file));
    EXPECT_TRUE(parsed.has_value()) << file << " does not parse";
    if (!parsed) continue;
    if (file == "report.json") files.report = *parsed;
    if (file == "watch.json") files.watch = *parsed;
    if (file == "nodes.json") {
      EXPECT_TRUE(parsed->is_array() && !parsed->empty()) << parsed->dump();
      for (const auto& n : *parsed) EXPECT_EQ(n.value("status", ""), "ok") << n.dump();
    }
  }
  const std::string md = file_text(path + "/report.md");
  EXPECT_EQ(md.rfind("# hangscope: ", 0), 0u) << md.substr(0, 200);
  const std::string dot = file_text(path + "/tree.dot");
  EXPECT_EQ(dot.rfind("digraph ", 0), 0u) << dot.substr(0, 100);
  EXPECT_TRUE(dot.size() >= 2 && dot.substr(dot.size() - 2) == "}\n") << last_lines(dot, 3);
  const std::string svg = file_text(path + "/tree.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_TRUE(svg.size() >= 7 && svg.substr(svg.size() - 7) == "</svg>\n") << last_lines(svg, 3);
  std::istringstream folded(file_text(path + "/stacks.folded"));
  std::string line;
  int stacks = 0;
  while (std::getline(folded, line)) {
    if (line.empty()) continue;
    ++stacks;
    EXPECT_TRUE(std::regex_match(line, std::regex(R"(^.+ [0-9]+$)"))) << line.substr(0, 200);
  }
  EXPECT_GT(stacks, 0) << "stacks.folded holds no stack";
  const auto snapshots = entries(path + "/snapshots");
  EXPECT_FALSE(snapshots.empty()) << "no snapshot";
  for (const auto& s : snapshots) {
    EXPECT_TRUE(std::regex_match(s, std::regex(R"(^[A-Za-z0-9._-]+\.(json|pb)$)"))) << s;
    if (s.size() > 5 && s.substr(s.size() - 5) == ".json") {
      const auto snapshot = parse_json(file_text(path + "/snapshots/" + s));
      EXPECT_TRUE(snapshot && snapshot->contains("snapshots")) << s << " does not parse";
    }
  }
  // watch.json: the incident and the observations that led to it.
  const auto& w = files.watch;
  if (!w.is_null()) {
    EXPECT_EQ(w.value("schema", ""), "hangscope.watch/v1");
    EXPECT_TRUE(w.contains("observations") && w["observations"].is_array() &&
                !w["observations"].empty())
        << "watch.json holds no observation";
    if (!files.report.is_null() && !files.report["verdicts"].empty()) {
      EXPECT_EQ(w["verdict"].value("id", ""), files.report["verdicts"][0].value("id", ""));
    }
  }
  return files;
}

// Checks the directory watch wrote into: no `.<name>.partial` left, every other entry a
// complete incident (expect_complete_incident). Returns the incidents' paths.
std::vector<std::string> expect_no_half_incident(const std::string& dir) {
  std::vector<std::string> incidents;
  for (const auto& e : entries(dir)) {
    EXPECT_EQ(e.find(".partial"), std::string::npos) << "half-written incident left: " << e;
    if (e.find(".partial") != std::string::npos) continue;
    incidents.push_back(dir + "/" + e);
    expect_complete_incident(dir + "/" + e);
  }
  return incidents;
}

// The --on-hang environment as `env | grep ^HANGSCOPE_` wrote it: NAME -> value.
std::map<std::string, std::string> hook_environment(const std::string& path) {
  std::map<std::string, std::string> vars;
  std::istringstream in(file_text(path));
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return vars;
}

// `hangscope watch` on the cluster's agents with `options` after them. (--metrics, once on main:
// add `--metrics PORT` here and read it with curl in the tests' waiting loops, where the stall
// grows, and after the incident, counted.)
std::vector<std::string> watch_options(const testing::VirtualCluster& cluster,
                                       const std::vector<std::string>& options) {
  std::vector<std::string> all = {"--agents", cluster.agents(), "--token-file",
                                  cluster.token_file()};
  all.insert(all.end(), options.begin(), options.end());
  return all;
}

// ---------------------------------------------------------------------------------------------
// Host side of the nodes: their processes, seen from the host's /proc.

// The network namespace (inode) of each node: that of its unshare process (DIR/node<n>.pid),
// in which every process of the node runs.
std::set<ino_t> node_namespaces(const testing::VirtualCluster& cluster, int nodes) {
  std::set<ino_t> namespaces;
  for (int n = 0; n < nodes; ++n) {
    const std::string pid = file_text(cluster.dir() + "/node" + std::to_string(n) + ".pid");
    struct stat st {};
    if (!pid.empty() &&
        ::stat(("/proc/" + std::to_string(std::stoi(pid)) + "/ns/net").c_str(), &st) == 0) {
      namespaces.insert(st.st_ino);
    }
  }
  return namespaces;
}

// Host pids of the Python processes in those namespaces (ranks, launchers, the serving
// chain's API server, engine core and workers).
std::vector<pid_t> python_processes(const std::set<ino_t>& namespaces) {
  std::vector<pid_t> pids;
  for (const auto& e : entries("/proc")) {
    if (e.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat st {};
    if (::stat(("/proc/" + e + "/ns/net").c_str(), &st) != 0 || !namespaces.count(st.st_ino)) {
      continue;
    }
    char exe[4096] = {};
    const ssize_t n = ::readlink(("/proc/" + e + "/exe").c_str(), exe, sizeof exe - 1);
    if (n > 0 && std::string(exe, static_cast<std::size_t>(n)).find("python") != std::string::npos)
      pids.push_back(std::stoi(e));
  }
  return pids;
}

// Samples the state of every thread of every Python process of the nodes ten times a second
// (the process list again every second), from the host, and keeps each thread seen stopped
// (t: ptrace stop, T: job-control stop).
class StopSampler {
 public:
  explicit StopSampler(std::set<ino_t> namespaces)
      : namespaces_(std::move(namespaces)), thread_([this] { run(); }) {}
  ~StopSampler() { stop(); }
  StopSampler(const StopSampler&) = delete;
  StopSampler& operator=(const StopSampler&) = delete;
  void stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int rounds() const { return rounds_; }
  std::size_t processes() const { return seen_.size(); }
  long thread_reads() const { return thread_reads_; }
  std::vector<std::string> stops() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stops_;
  }

 private:
  void run() {
    std::vector<pid_t> pids;
    while (!done_) {
      if (rounds_ % 10 == 0) {
        pids = python_processes(namespaces_);
        seen_.insert(pids.begin(), pids.end());
      }
      for (const pid_t pid : pids) {
        for (const auto& [tid, state] : testing::thread_states(pid)) {
          ++thread_reads_;
          if (state == 't' || state == 'T') {
            std::lock_guard<std::mutex> lock(mutex_);
            stops_.push_back("pid " + std::to_string(pid) + " thread " + std::to_string(tid) +
                             " state " + state + " (" +
                             file_text("/proc/" + std::to_string(pid) + "/comm") + ")");
          }
        }
      }
      ++rounds_;
      std::this_thread::sleep_for(100ms);
    }
  }
  std::set<ino_t> namespaces_;
  std::atomic<bool> done_{false};
  std::atomic<int> rounds_{0};
  std::atomic<long> thread_reads_{0};
  std::set<pid_t> seen_;
  mutable std::mutex mutex_;
  std::vector<std::string> stops_;
  std::thread thread_;
};

std::string load_average() {
  const std::string text = file_text("/proc/loadavg");
  return text.substr(0, text.find(' ', text.find(' ', text.find(' ') + 1) + 1));
}

// ---------------------------------------------------------------------------------------------

// A job that runs healthy, then hangs: 2 nodes x 2 ranks (torchrun, TP 2 x DP 2), decode steps
// every 50 ms; after 20 s the culprit skips its TP all_reduce (tp-skip) and waits in the step's
// world barrier. watch --after 10s --once: the incident within --after + 30 s of the stall,
// naming the culprit; --on-hang gets the four variables; then the job's ranks are killed, as a
// watchdog would, and the bundle is still complete and re-rendered by `hangscope report`.
TEST(Watch, AJobThatHangsAfterRunningHealthyIsKeptWithTheCulprit) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  const auto started = Clock::now();
  const unsigned seed = scenario_seed();
  const int culprit = static_cast<int>(std::mt19937(seed)() % 4u);
  const std::string job = "--launcher torchrun --layout tp=2,dp=2 --scenario tp-skip --culprit " +
                          std::to_string(culprit) + " --stall-after 20 --step-ms 50";
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (replay: HANGSCOPE_SCENARIO_SEED=" + std::to_string(seed) + "), job " + job);
  testing::VirtualCluster cluster({.nodes = 2, .ranks_per_node = 2, .job = job});
  ASSERT_TRUE(cluster.up());
  const std::string dir = cluster.dir() + "/incidents";
  const std::string hook_file = cluster.dir() + "/on-hang.env";
  WatchProcess watch(
      cluster.dir() + "/watch",
      watch_options(cluster, {"--after", "10s", "--poll", "2s", "--once", "-o", dir, "--on-hang",
                              "env | grep ^HANGSCOPE_ > " + hook_file}));
  // The stall (the culprit's "diverged" line) and the incident line, as they appear.
  std::optional<Clock::time_point> stalled, told;
  while (!watch.exited() && seconds_since(started) < 150) {
    if (!stalled && find_announced(announced_in_cluster(cluster, 2), culprit, "diverged")) {
      stalled = Clock::now();
    }
    if (!told && watch.out().find(" incident ") != std::string::npos) told = Clock::now();
    std::this_thread::sleep_for(200ms);
  }
  if (!told && watch.out().find(" incident ") != std::string::npos) told = Clock::now();
  const auto code = watch.wait(10s);
  ASSERT_TRUE(stalled) << "the culprit never stalled: " << file_text(cluster.dir() + "/node0.log")
                       << file_text(cluster.dir() + "/node1.log");
  ASSERT_TRUE(told) << "no incident line:\n" << watch.log();
  const double latency = std::chrono::duration<double>(*told - *stalled).count();
  std::cout << "[watch-test] healthy then hung: culprit rank " << culprit << ", incident "
            << latency << " s after the stall (--after 10s)" << std::endl;
  EXPECT_LE(latency, 10 + 30) << watch.log();
  EXPECT_GE(latency, 10 - 2) << "an incident before --after passed:\n" << watch.log();
  EXPECT_EQ(code, 3) << watch.log();

  const auto lines = incident_lines(watch.out());
  ASSERT_EQ(lines.size(), 1u) << watch.log();
  const auto& line = lines[0];
  EXPECT_EQ(line.job, kClusterJob);
  EXPECT_EQ(line.path.rfind(dir + "/", 0), 0u) << line.path;
  EXPECT_TRUE(names_rank(line.summary, culprit)) << line.summary;
  const auto all = announced_in_cluster(cluster, 2);
  const auto who = find_announced(all, culprit, "diverged");
  ASSERT_TRUE(who);
  EXPECT_EQ(entries(dir), std::vector<std::string>{line.path.substr(dir.size() + 1)});
  const auto files = expect_complete_incident(line.path);
  ASSERT_FALSE(files.report.is_null());
  expect_culprit_named(files.report, *who);
  EXPECT_EQ(line.verdict, files.report["verdicts"][0].value("id", "")) << watch.log();
  const auto& w = files.watch;
  EXPECT_EQ(w.value("kind", ""), "hang");
  EXPECT_EQ(w.value("job", ""), kClusterJob);
  EXPECT_GE(w.value("stalled_seconds", 0.0), 10.0) << w.dump(1).substr(0, 2000);
  // The history holds the healthy polls before the stall and the stalled ones.
  int progressed = 0, stalled_polls = 0;
  for (const auto& o : w.value("observations", json::array())) {
    (o.value("progressed", false) ? progressed : stalled_polls)++;
  }
  EXPECT_GT(progressed, 0) << "no healthy poll in watch.json";
  EXPECT_GE(stalled_polls, 4) << "fewer stalled polls than --after / --poll in watch.json";

  // --on-hang: the four variables, HANGSCOPE_BUNDLE the printed path.
  const auto vars = hook_environment(hook_file);
  EXPECT_EQ(vars.size(), 4u) << file_text(hook_file);
  EXPECT_EQ(vars.count("HANGSCOPE_BUNDLE") ? vars.at("HANGSCOPE_BUNDLE") : "", line.path);
  EXPECT_EQ(vars.count("HANGSCOPE_JOB") ? vars.at("HANGSCOPE_JOB") : "", kClusterJob);
  EXPECT_EQ(vars.count("HANGSCOPE_VERDICT") ? vars.at("HANGSCOPE_VERDICT") : "", line.verdict);
  EXPECT_EQ(vars.count("HANGSCOPE_SUMMARY") ? vars.at("HANGSCOPE_SUMMARY") : "",
            files.report["verdicts"][0].value("summary", ""));

  // A watchdog kills the job's ranks: the bundle stays complete, and `hangscope report`
  // re-renders it from its snapshots alone (exit 3, the same culprit).
  std::map<std::string, std::set<int>> pids_by_node;  // each rank announced itself twice or once
  for (const auto& a : all) pids_by_node[a.node].insert(a.pid);
  for (const auto& [node, pids] : pids_by_node) {
    std::string command = "kill -KILL";
    for (const int pid : pids) command += " " + std::to_string(pid);
    exec_in_node(cluster, std::stoi(node.substr(4)), command);
  }
  const auto namespaces = node_namespaces(cluster, 2);
  EXPECT_TRUE(wait_until(
      [&] {
        for (const pid_t pid : python_processes(namespaces)) {
          if (file_text("/proc/" + std::to_string(pid) + "/cmdline").find("--rank-worker") !=
              std::string::npos)
            return false;
        }
        return true;
      },
      10s))
      << "the job's ranks did not end";
  expect_complete_incident(line.path);
  const auto rerun =
      testing::run_command(std::string(HANGSCOPE_BINARY) + " report " + line.path + " --json");
  EXPECT_EQ(rerun.exit_code, 3) << rerun.err;
  const auto report = parse_json(rerun.out);
  ASSERT_TRUE(report) << rerun.out << rerun.err;
  expect_culprit_named(*report, *who);
  expect_complete_incident(line.path);
  std::cout << "[watch-test] AJobThatHangsAfterRunningHealthyIsKeptWithTheCulprit: "
            << seconds_since(started) << " s" << std::endl;
}

// One rank spins in Python (gloo_barrier_hang.py --scenario busy) while the others wait in
// dist.barrier(): an incident naming it, with an --on-hang that fails (exit 7): the incident is
// still written and watch still exits 3. Then a second job hangs beside it (node 0, 2 ranks on
// loopback, parallel_job.py tp-skip: collective-mismatch, a verdict of higher confidence than
// the straggler's): under one watch both are suspect at the same poll and one capture serves
// both incidents; each bundle leads with its own job's verdict (report.json's top verdict names
// its culprit, report.md's first line is its summary), as its stdout line and --on-hang say.
// Then, on the hung jobs, SIGTERM: while watch only watches (no incident yet; the directory
// holds a `.<name>.partial` as a SIGKILLed watch leaves it, which watch removes), and at two
// moments of an incident's capture and write (when it asks the agents, when their answers are
// in): exit 0 each time, no `.<name>.partial` left, every incident directory complete.
TEST(Watch, HungJobsGetTheirOwnIncidentsAndSigtermLeavesNoHalfIncident) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  const auto started = Clock::now();
  const unsigned seed = scenario_seed();
  std::mt19937 random(seed);
  const int busy = static_cast<int>(random() % 4u);
  const int culprit_b = static_cast<int>(random() % 2u);
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (replay: HANGSCOPE_SCENARIO_SEED=" + std::to_string(seed) + "), busy rank " +
               std::to_string(busy) + ", the second job's culprit " + std::to_string(culprit_b));
  testing::VirtualCluster cluster(
      {.nodes = 2, .ranks_per_node = 2, .diverged = busy, .scenario = "busy"});
  ASSERT_TRUE(cluster.up());
  const auto culprit = find_announced(announced_in_cluster(cluster, 2), busy, "diverged");
  ASSERT_TRUE(culprit);
  {
    const std::string dir = cluster.dir() + "/incidents";
    WatchProcess watch(
        cluster.dir() + "/watch",
        watch_options(cluster, {"--after", "10s", "--poll", "2s", "--once", "-o", dir, "--on-hang",
                                "echo failing on purpose; exit 7"}));
    const auto code = watch.wait(90s);
    std::cout << "[watch-test] busy straggler: exit " << (code ? std::to_string(*code) : "none")
              << " after " << watch.seconds() << " s" << std::endl;
    EXPECT_EQ(code, 3) << watch.log();
    const auto lines = incident_lines(watch.out());
    ASSERT_EQ(lines.size(), 1u) << watch.log();
    EXPECT_EQ(lines[0].job, kClusterJob);
    EXPECT_TRUE(names_rank(lines[0].summary, busy)) << lines[0].summary;
    const auto files = expect_complete_incident(lines[0].path);
    ASSERT_FALSE(files.report.is_null());
    expect_culprit_named(files.report, *culprit);
    EXPECT_EQ(lines[0].verdict, files.report["verdicts"][0].value("id", ""));
    // The failure is logged, with the command's output, and changes nothing else.
    EXPECT_NE(watch.err().find("--on-hang failed: exit status 7"), std::string::npos)
        << watch.log();
    EXPECT_NE(watch.err().find("failing on purpose"), std::string::npos) << watch.log();
  }
  // The second job, hung at its third step: the culprit skipped its TP all_reduce and waits in
  // the world barrier, its peer in the all_reduce.
  const std::string job_b = "127.0.0.1:29610";
  const std::string job_b_log = cluster.dir() + "/job-b.log";
  ASSERT_TRUE(exec_in_node(cluster, 0,
                           "env GLOO_SOCKET_IFNAME=lo /usr/bin/python3 " + kRepro +
                               "parallel_job.py --layout tp=2 --scenario tp-skip --culprit " +
                               std::to_string(culprit_b) + " --master-port 29610",
                           job_b_log));
  ASSERT_TRUE(wait_until([&] { return announced(job_b_log, "node0").size() >= 2; }, 90s))
      << last_lines(file_text(job_b_log));
  const auto announced_b = find_announced(announced(job_b_log, "node0"), culprit_b, "diverged");
  ASSERT_TRUE(announced_b) << last_lines(file_text(job_b_log));
  {
    const std::string dir = cluster.dir() + "/two-jobs";
    WatchProcess watch(
        cluster.dir() + "/two-jobs",
        watch_options(cluster, {"--after", "4s", "--poll", "2s", "-o", dir, "--on-hang",
                                "env | grep ^HANGSCOPE_ > " + cluster.dir() +
                                    "/on-hang-$(basename \"$HANGSCOPE_BUNDLE\")"}));
    wait_until(
        [&] {
          return watch.out().find(job_b) != std::string::npos &&
                 watch.out().find(kClusterJob) != std::string::npos;
        },
        60s);
    watch.signal(SIGTERM);
    const auto code = watch.wait(30s);
    std::cout << "[watch-test] two hung jobs: exit " << (code ? std::to_string(*code) : "none")
              << " after " << watch.seconds() << " s" << std::endl;
    EXPECT_EQ(code, 0) << watch.log();
    const auto lines = incident_lines(watch.out());
    EXPECT_EQ(lines.size(), 2u) << watch.log();
    std::set<std::string> jobs;
    for (const auto& line : lines) {
      SCOPED_TRACE("incident of " + line.job);
      jobs.insert(line.job);
      const auto files = expect_complete_incident(line.path);
      if (files.report.is_null() || files.report["verdicts"].empty()) continue;
      const auto& top = files.report["verdicts"][0];
      EXPECT_EQ(top.value("job", ""), line.job) << "the incident's report leads with another "
                                                   "job's verdict: "
                                                << top.value("summary", "");
      expect_culprit_named(files.report, line.job == job_b ? *announced_b : *culprit);
      EXPECT_EQ(line.verdict, top.value("id", ""));
      const std::string md = file_text(line.path + "/report.md");
      EXPECT_EQ(md.substr(0, md.find('\n')), "# hangscope: " + line.summary);
      const auto vars =
          hook_environment(cluster.dir() + "/on-hang-" + line.path.substr(dir.size() + 1));
      EXPECT_EQ(vars.count("HANGSCOPE_VERDICT") ? vars.at("HANGSCOPE_VERDICT") : "",
                top.value("id", ""));
      EXPECT_EQ(vars.count("HANGSCOPE_SUMMARY") ? vars.at("HANGSCOPE_SUMMARY") : "",
                top.value("summary", ""));
    }
    EXPECT_EQ(jobs, (std::set<std::string>{kClusterJob, job_b})) << watch.log();
  }
  // SIGTERM while watching: a job hung for longer than --after is suspect only after --after
  // counted from watch's first poll, so with --after 60s nothing is captured before the signal.
  // The directory holds what a watch SIGKILLed while writing leaves (a `.<name>.partial` with
  // some of a bundle's files): watch removes it when it starts.
  {
    const std::string dir = cluster.dir() + "/sigterm-watching";
    const std::string partial = dir + "/.20261205T101500Z-198.51.100.1_29500.partial";
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir(partial.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((partial + "/snapshots").c_str(), 0755), 0);
    std::ofstream(partial + "/nodes.json") << "[]\n";
    std::ofstream(partial + "/snapshots/node0.json") << "{\"snapshots\": [";
    WatchProcess watch(cluster.dir() + "/sigterm-watching",
                       watch_options(cluster, {"--after", "60s", "--poll", "2s", "-o", dir}));
    EXPECT_TRUE(wait_until(
        [&] { return watch.err().find("debug: poll: 2 job(s)") != std::string::npos; }, 30s))
        << watch.log();
    const auto signalled = Clock::now();
    watch.signal(SIGTERM);
    const auto code = watch.wait(15s);
    std::cout << "[watch-test] SIGTERM while watching: exit "
              << (code ? std::to_string(*code) : "none") << " " << seconds_since(signalled)
              << " s after the signal" << std::endl;
    EXPECT_EQ(code, 0) << watch.log();
    EXPECT_TRUE(incident_lines(watch.out()).empty()) << watch.log();
    EXPECT_TRUE(entries(dir).empty()) << watch.log();
    EXPECT_NE(watch.err().find("(an interrupted incident)"), std::string::npos) << watch.log();
    EXPECT_NE(watch.err().find("stopped by a signal"), std::string::npos) << watch.log();
  }
  // SIGTERM while an incident is captured and written (--after 2s --poll 1s on the jobs that
  // hang already): the signal is sent when watch asks the agents for the confirming samples,
  // then, in a second run, when the last agent answered (analysis and writing follow).
  for (const std::string moment : {"asking 2 agent(s)", "[2/2]"}) {
    SCOPED_TRACE("SIGTERM at '" + moment + "'");
    const std::string name = moment[0] == 'a' ? "sigterm-asking" : "sigterm-answered";
    const std::string dir = cluster.dir() + "/" + name;
    WatchProcess watch(cluster.dir() + "/" + name,
                       watch_options(cluster, {"--after", "2s", "--poll", "1s", "--samples", "2",
                                               "--interval", "300ms", "-o", dir}));
    const bool reached =
        wait_until([&] { return watch.err().find(moment) != std::string::npos; }, 30s);
    watch.signal(SIGTERM);
    EXPECT_TRUE(reached) << "never reached '" << moment << "':\n" << watch.log();
    const auto code = watch.wait(30s);
    EXPECT_EQ(code, 0) << watch.log();
    const auto incidents = expect_no_half_incident(dir);
    const auto lines = incident_lines(watch.out());
    for (const auto& l : lines) {
      EXPECT_NE(std::find(incidents.begin(), incidents.end(), l.path), incidents.end())
          << "the printed incident " << l.path << " is not in " << dir;
    }
    std::cout << "[watch-test] SIGTERM at '" << moment << "': exit "
              << (code ? std::to_string(*code) : "none") << ", " << incidents.size()
              << " incident(s) in the directory, " << lines.size() << " printed" << std::endl;
  }
  std::cout << "[watch-test] HungJobsGetTheirOwnIncidentsAndSigtermLeavesNoHalfIncident: "
            << seconds_since(started) << " s" << std::endl;
}

// Every rank steps through a store-based barrier (gloo_barrier_hang.py --scenario store-steps,
// 0.2 s of work per step); once watch has seen the job, one rank (not 0, which hosts the
// store) is SIGKILLed: its peers wait in the store barrier forever. A rank-dead incident naming
// it: the stdout line's verdict and report.json's top verdict (diverged_ranks, processes).
TEST(Watch, ARankKilledMidRunIsARankDeadIncident) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  const auto started = Clock::now();
  const unsigned seed = scenario_seed();
  const int victim = 1 + static_cast<int>(std::mt19937(seed)() % 3u);
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: HANGSCOPE_SCENARIO_SEED=" +
               std::to_string(seed) + "), killed rank " + std::to_string(victim));
  testing::VirtualCluster cluster({.nodes = 2, .ranks_per_node = 2, .scenario = "store-steps"});
  ASSERT_TRUE(cluster.up());
  const auto target = find_announced(announced_in_cluster(cluster, 2), victim, "progressing");
  ASSERT_TRUE(target);
  const std::string dir = cluster.dir() + "/incidents";
  WatchProcess watch(cluster.dir() + "/watch", watch_options(cluster, {"--after", "10s", "--poll",
                                                                       "2s", "--once", "-o", dir}));
  // Watch has read the rank (its per-rank debug line) before it dies.
  const std::string reading = "rank " + std::to_string(victim) + " (" + target->node + " pid " +
                              std::to_string(target->pid) + "): ";
  ASSERT_TRUE(wait_until([&] { return watch.err().find(reading) != std::string::npos; }, 30s))
      << watch.log();
  const auto killed = Clock::now();
  ASSERT_TRUE(exec_in_node(cluster, std::stoi(target->node.substr(4)),
                           "kill -KILL " + std::to_string(target->pid)));
  const auto code = watch.wait(60s);
  std::cout << "[watch-test] rank " << victim << " killed: watch exit "
            << (code ? std::to_string(*code) : "none") << " " << seconds_since(killed)
            << " s after the kill" << std::endl;
  EXPECT_EQ(code, 3) << watch.log();
  const auto lines = incident_lines(watch.out());
  ASSERT_EQ(lines.size(), 1u) << watch.log();
  EXPECT_EQ(lines[0].job, kClusterJob);
  EXPECT_EQ(lines[0].verdict, "rank-dead") << watch.log();
  EXPECT_TRUE(names_rank(lines[0].summary, victim)) << lines[0].summary;
  const auto files = expect_complete_incident(lines[0].path);
  ASSERT_FALSE(files.report.is_null());
  EXPECT_EQ(files.report["verdicts"][0].value("id", ""), "rank-dead");
  expect_culprit_named(files.report, *target);
  EXPECT_EQ(files.watch.value("kind", ""), "rank-dead");
  // The last observation before the incident shows the rank gone.
  bool seen_exited = false;
  for (const auto& o : files.watch.value("observations", json::array())) {
    for (const auto& r : o.value("ranks", json::array())) {
      seen_exited =
          seen_exited || (r.value("rank", -1) == victim && r.value("state", "") == "exited");
    }
  }
  EXPECT_TRUE(seen_exited) << "watch.json never shows rank " << victim << " exited";
  // Re-rendered by `hangscope report`: watch's finding (watch.json) leads the report again, word
  // for word, and the re-analysis of the snapshots (the rank missing) follows it.
  const auto rerun =
      testing::run_command(std::string(HANGSCOPE_BINARY) + " report " + lines[0].path + " --json");
  EXPECT_EQ(rerun.exit_code, 3) << rerun.err;
  if (const auto report = parse_json(rerun.out)) {
    ASSERT_GE((*report)["verdicts"].size(), 2u) << report->dump(1);
    const auto& lead = (*report)["verdicts"][0];
    EXPECT_EQ(lead.value("id", ""), "rank-dead");
    EXPECT_EQ(lead.value("summary", ""), files.report["verdicts"][0].value("summary", "?"));
    EXPECT_EQ(lead.value("diverged_ranks", json()), json::array({victim}));
    EXPECT_EQ((*report)["verdicts"][1].value("diverged_ranks", json()), json::array({victim}));
  } else {
    ADD_FAILURE() << "hangscope report printed no JSON: " << rerun.out << rerun.err;
  }
  std::cout << "[watch-test] ARankKilledMidRunIsARankDeadIncident: " << seconds_since(started)
            << " s" << std::endl;
}

// Four healthy jobs on one cluster under one watch for 60 s (--after 10s --poll 2s --timeout
// 60s): the cluster's own job, busy (parallel_job.py busy-healthy, 20 ms of host work per
// step, one rank per node, TP across the nodes); on node 0 a loop of all-reduces with no pause
// (gloo_barrier_hang.py allreduce-loop, HANGSCOPE_STEP_SECONDS=0, 2 ranks); on node 1 a slow
// job (parallel_job.py slow-healthy, 0.5-1.5 s of work between steps, 2 ranks) and an idle
// vLLM-style server (serving_chain.py --idle --tp 2: API server without requests, engine core
// idle in its input queue, workers waiting on the broadcast ring). Watch exits 0 at --timeout,
// prints no incident, writes none, never takes a confirming capture (which stops threads), and
// no thread of any of their Python processes is ever seen in a ptrace stop.
TEST(Watch, QuietJobsGiveNoIncidentAndAreNeverStopped) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  const auto started = Clock::now();
  testing::VirtualCluster cluster(
      {.nodes = 2,
       .ranks_per_node = 1,
       .job = "--launcher torchrun --layout tp=2 --scenario busy-healthy --step-ms 20"});
  ASSERT_TRUE(cluster.up());
  const std::string python = "/usr/bin/python3 ";
  const std::string loop_log = cluster.dir() + "/loop.log";
  const std::string slow_log = cluster.dir() + "/slow.log";
  const std::string serving_log = cluster.dir() + "/serving.log";
  ASSERT_TRUE(exec_in_node(cluster, 0,
                           "env HANGSCOPE_STEP_SECONDS=0 " + python + kRepro +
                               "gloo_barrier_hang.py --scenario allreduce-loop --world-size 2",
                           loop_log));
  ASSERT_TRUE(exec_in_node(cluster, 1,
                           "env GLOO_SOCKET_IFNAME=lo " + python + kRepro +
                               "parallel_job.py --layout tp=2 --scenario slow-healthy "
                               "--master-port 29610",
                           slow_log));
  ASSERT_TRUE(exec_in_node(
      cluster, 1, "env GLOO_SOCKET_IFNAME=lo " + python + kRepro + "serving_chain.py --tp 2 --idle",
      serving_log));
  const bool ready = wait_until(
      [&] {
        return announced(loop_log, "node0").size() >= 2 &&
               announced(slow_log, "node1").size() >= 2 &&
               file_text(serving_log).find("serving chain ready") != std::string::npos;
      },
      120s);
  ASSERT_TRUE(ready) << "the jobs did not start:\n--- loop:\n"
                     << last_lines(file_text(loop_log)) << "\n--- slow:\n"
                     << last_lines(file_text(slow_log)) << "\n--- serving:\n"
                     << last_lines(file_text(serving_log));
  const auto jobs_up = Clock::now();
  const std::string load_before = load_average();
  const std::string dir = cluster.dir() + "/incidents";
  StopSampler sampler(node_namespaces(cluster, 2));
  WatchProcess watch(
      cluster.dir() + "/watch",
      watch_options(cluster, {"--after", "10s", "--poll", "2s", "--timeout", "60s", "-o", dir}));
  const auto code = watch.wait(120s);
  sampler.stop();
  std::cout << "[watch-test] quiet jobs: watch exit " << (code ? std::to_string(*code) : "none")
            << " after " << watch.seconds() << " s; " << sampler.rounds() << " sampling rounds, "
            << sampler.processes() << " Python processes, " << sampler.thread_reads()
            << " thread states read; load average " << load_before << " before, " << load_average()
            << " after" << std::endl;
  EXPECT_EQ(code, 0) << watch.log();
  EXPECT_TRUE(incident_lines(watch.out()).empty()) << watch.log();
  EXPECT_TRUE(entries(dir).empty()) << "incident directory not empty:\n" << watch.log();
  EXPECT_NE(watch.err().find("no incident within --timeout"), std::string::npos) << watch.log();
  // Every job was watched: the cluster's, the loop, the slow one, the server's workers.
  EXPECT_NE(watch.err().find("poll: 4 job(s) on 2 node(s)"), std::string::npos) << watch.log();
  // No suspicion at all: a confirming capture (which stops every thread for a moment) is the
  // only thing that would stop a rank.
  EXPECT_EQ(watch.err().find("asking "), std::string::npos)
      << "watch took a confirming capture of a healthy job:\n"
      << watch.log();
  EXPECT_GE(sampler.processes(), 10u) << "the sampler did not see the jobs' processes";
  EXPECT_GE(sampler.rounds(), 300);
  const auto stops = sampler.stops();
  EXPECT_TRUE(stops.empty()) << stops.size() << " stopped thread(s) seen, first: " << stops.front();
  std::cout << "[watch-test] QuietJobsGiveNoIncidentAndAreNeverStopped: " << seconds_since(started)
            << " s (jobs up after " << std::chrono::duration<double>(jobs_up - started).count()
            << " s)" << std::endl;
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

// vLLM's data-parallel engine cores hang on their stateless DP group (outside torch's registry,
// found in each engine core's `self.dp_group` when watch first describes it): one engine core's
// step never returns (its worker is stuck), the others wait in has_unfinished_dp's all-reduce.
TEST(Watch, DpEngineCoresHungOnTheirStatelessGroupAreAnIncident) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  const auto started = Clock::now();
  const unsigned seed = scenario_seed();
  const int culprit = static_cast<int>(std::mt19937(seed)() % 4u);
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: HANGSCOPE_SCENARIO_SEED=" +
               std::to_string(seed) + "), culprit engine " + std::to_string(culprit));
  testing::VirtualCluster cluster(
      {.nodes = 2,
       .ranks_per_node = 2,
       .job = "group_job.py --scenario dp-step-hang --culprit " + std::to_string(culprit)});
  ASSERT_TRUE(cluster.up());
  // The engine core that diverged, as the job announced it ("engine dp D pid P diverged ...").
  std::optional<std::pair<std::string, int>> diverged;
  static const std::regex line(R"(^engine dp ([0-9]+) pid ([0-9]+) diverged\b)");
  for (int n = 0; n < 2 && !diverged; ++n) {
    std::istringstream in(file_text(cluster.dir() + "/node" + std::to_string(n) + ".log"));
    std::string text;
    std::smatch m;
    while (std::getline(in, text)) {
      if (std::regex_search(text, m, line))
        diverged = {{"node" + std::to_string(n), std::stoi(m[2])}};
    }
  }
  ASSERT_TRUE(diverged) << "no engine core announced it diverged";
  const std::string dir = cluster.dir() + "/incidents";
  WatchProcess watch(cluster.dir() + "/watch", watch_options(cluster, {"--after", "10s", "--poll",
                                                                       "2s", "--once", "-o", dir}));
  const auto code = watch.wait(90s);
  EXPECT_EQ(code, 3) << watch.log();
  const auto lines = incident_lines(watch.out());
  ASSERT_EQ(lines.size(), 1u) << watch.log();
  const auto files = expect_complete_incident(lines[0].path);
  ASSERT_FALSE(files.report.is_null());
  const auto& top = files.report["verdicts"][0];
  bool named = false;
  for (const auto& p : top.value("processes", json::array())) {
    if (p.value("node", "") == diverged->first && p.value("pid", 0) == diverged->second) {
      EXPECT_EQ(p.value("side", ""), "diverged") << top.dump(1);
      EXPECT_EQ(p.value("role", ""), "engine") << top.dump(1);
      named = true;
    }
  }
  EXPECT_TRUE(named) << "the diverged engine core (" << diverged->first << " pid "
                     << diverged->second << ") is not in the top verdict: " << top.dump(1);
  std::cout << "[watch-test] DpEngineCoresHungOnTheirStatelessGroupAreAnIncident: "
            << seconds_since(started) << " s" << std::endl;
}

}  // namespace
}  // namespace hangscope
