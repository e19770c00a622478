#include "hangscope/watch/incidents.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <regex>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/snapshot/bundle_layout.h"

namespace hangscope::watch {
namespace {

constexpr std::size_t kMaxHookOutput = 64 * 1024;

void make_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    throw_errno("cannot create " + printable(path), errno);
  }
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// An incident directory's name: a stamp, a dash and a sanitised job (and a "-N" suffix).
bool is_incident_name(const std::string& name) {
  static const std::regex pattern(R"(^\d{8}T\d{6}Z-[A-Za-z0-9._-]+$)");
  return std::regex_match(name, pattern);
}

bool is_partial_name(const std::string& name) {
  static const std::regex pattern(R"(^\.\d{8}T\d{6}Z-[A-Za-z0-9._-]+\.partial$)");
  return std::regex_match(name, pattern);
}

nlohmann::json watch_json(const Incident& incident, const std::deque<JobPoll>& history) {
  nlohmann::json j;
  j["schema"] = "hangscope.watch/v1";
  j["kind"] = std::string(to_string(incident.finding.kind));
  j["job"] = valid_utf8(incident.finding.job);  // also at the top, as watch.json always had it
  j["label"] = valid_utf8(incident.label);
  j["detected"] = utc_iso(incident.detected_unix_ns);
  j["detected_unix_ns"] = incident.detected_unix_ns;
  if (incident.stalled_since_unix_ns != 0) {
    j["stalled_since"] = utc_iso(incident.stalled_since_unix_ns);
    j["stalled_seconds"] =
        static_cast<double>(incident.detected_unix_ns - incident.stalled_since_unix_ns) / 1e9;
  }
  j["after_seconds"] = incident.after_seconds;
  j["poll_seconds"] = incident.poll_seconds;
  j["verdict"] = {{"id", incident.verdict}, {"summary", valid_utf8(incident.summary)}};
  j["finding"] = finding_json(incident.finding);
  auto& observations = j["observations"] = nlohmann::json::array();
  for (const auto& poll : history) {
    nlohmann::json o = {{"time", utc_iso(poll.unix_ns)},       {"unix_ns", poll.unix_ns},
                        {"until_unix_ns", poll.until_unix_ns}, {"progressed", poll.progressed},
                        {"waiting", poll.waiting()},           {"progressing", poll.progressing()}};
    auto& ranks = o["ranks"] = nlohmann::json::array();
    for (const auto& r : poll.ranks) ranks.push_back(rank_reading_json(r));
    observations.push_back(std::move(o));
  }
  return j;
}

// Removes the files of one incident directory watch wrote (bundle files, snapshots/,
// watch.json) and the directory; "" when done, else what was left and why.
std::string remove_incident(const std::string& path) {
  const auto entries = list_directory(path);
  if (!entries) return printable(path) + ": cannot list it (" + std::strerror(errno) + ")";
  for (const auto& e : *entries) {
    const bool ours = e == kWatchFile || e == snapshot::kSnapshotsDir ||
                      std::find(snapshot::kBundleFiles.begin(), snapshot::kBundleFiles.end(), e) !=
                          snapshot::kBundleFiles.end();
    if (!ours) return printable(path) + ": left in place, it holds " + printable(e);
  }
  const std::string watch_file = path + "/" + std::string(kWatchFile);
  if (::unlink(watch_file.c_str()) != 0 && errno != ENOENT) {
    return printable(watch_file) + ": cannot remove it (" + std::strerror(errno) + ")";
  }
  try {
    const auto foreign = report::remove_earlier_bundle(path);
    if (!foreign.empty())
      return printable(path) + ": left in place, it holds " + printable(foreign);
  } catch (const Error& e) {
    return e.what();
  }
  if (::rmdir(path.c_str()) != 0) {
    return printable(path) + ": cannot remove it (" + std::strerror(errno) + ")";
  }
  return "";
}

}  // namespace

std::string sanitize_job(const std::string& job) {
  std::string out;
  for (const char c : job.substr(0, 100)) {
    const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    out += plain ? c : '_';
  }
  return out.empty() ? "unknown-job" : out;
}

std::string utc_stamp(std::int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%SZ", &tm);
  return buffer;
}

std::string utc_iso(std::int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[40];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  char millis[8];
  std::snprintf(millis, sizeof millis, ".%03dZ",
                static_cast<int>((unix_ns / 1'000'000) % 1000 + 1000) % 1000);
  return std::string(buffer) + millis;
}

std::string write_incident(const std::string& dir, const Incident& incident,
                           const model::Bundle& bundle, const analysis::Analysis& analysis,
                           const std::deque<JobPoll>& history) {
  make_directory(dir);
  const std::string name =
      utc_stamp(incident.detected_unix_ns) + "-" + sanitize_job(incident.finding.job);
  const std::string partial = dir + "/." + name + ".partial";
  if (is_directory(partial)) {
    const auto left = remove_incident(partial);
    if (!left.empty()) throw Error(left);
  }
  report::write_bundle_data(partial, bundle);
  report::write_reports(partial, bundle, analysis);
  write_file_replacing(partial + "/" + std::string(kWatchFile),
                       watch_json(incident, history).dump(2) + "\n");
  for (int n = 1;; ++n) {
    const std::string final_path = dir + "/" + name + (n == 1 ? "" : "-" + std::to_string(n));
    // renameat2(RENAME_NOREPLACE) would do it in one step; a directory there makes rename fail
    // with ENOTEMPTY/EEXIST only when it is not empty, so look first.
    if (::access(final_path.c_str(), F_OK) == 0) continue;
    if (::rename(partial.c_str(), final_path.c_str()) != 0) {
      throw_errno("cannot rename " + printable(partial) + " to " + printable(final_path), errno);
    }
    return final_path;
  }
}

std::vector<std::string> tidy_incidents(const std::string& dir, std::size_t keep) {
  std::vector<std::string> said;
  const auto entries = list_directory(dir);
  if (!entries) return said;
  std::vector<std::string> incidents;
  for (const auto& e : *entries) {
    const std::string path = dir + "/" + e;
    if (!is_directory(path)) continue;
    if (is_partial_name(e)) {
      const auto left = remove_incident(path);
      said.push_back(left.empty() ? "removed " + printable(path) + " (an interrupted incident)"
                                  : left);
    } else if (is_incident_name(e) &&
               ::access((path + "/" + std::string(kWatchFile)).c_str(), F_OK) == 0) {
      incidents.push_back(e);
    }
  }
  std::sort(incidents.begin(), incidents.end());  // by time: the stamp leads the name
  for (std::size_t i = 0; i + keep < incidents.size(); ++i) {
    const std::string path = dir + "/" + incidents[i];
    const auto left = remove_incident(path);
    said.push_back(left.empty()
                       ? "removed " + printable(path) + " (--keep " + std::to_string(keep) + ")"
                       : left);
  }
  return said;
}

HookResult run_on_hang(const std::string& command, const std::string& bundle,
                       const Incident& incident, std::chrono::milliseconds limit) {
  HookResult result;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.ended = std::string("could not start: pipe: ") + std::strerror(errno);
    return result;
  }
  // Everything the child needs is made before fork: it only calls async-signal-safe functions.
  const std::vector<std::string> variables = {"HANGSCOPE_BUNDLE=" + printable(bundle),
                                              "HANGSCOPE_JOB=" + printable(incident.finding.job),
                                              "HANGSCOPE_VERDICT=" + printable(incident.verdict),
                                              "HANGSCOPE_SUMMARY=" + printable(incident.summary)};
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (entry.rfind("HANGSCOPE_", 0) == 0) continue;  // ours only, never the token
    environment.push_back(entry);
  }
  environment.insert(environment.end(), variables.begin(), variables.end());
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    result.ended = std::string("could not start: fork: ") + std::strerror(errno);
    return result;
  }
  if (child == 0) {
    ::setpgid(0, 0);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);  // the metrics server ignores it for the whole process
    ::execve("/bin/sh", const_cast<char**>(argv), envp.data());
    ::_exit(127);
  }
  ::setpgid(child, child);
  ::close(pipe_fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{pipe_fds[0], POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::min<long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;  // every writer closed it (the command and what it started ended)
    if (result.output.size() < kMaxHookOutput) {
      result.output.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(pipe_fds[0]);
  if (timed_out) ::kill(-child, SIGKILL);
  int status = 0;
  // The shell may have ended before its own children closed the pipe: wait for it bounded.
  for (int i = 0; i < 500; ++i) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (i == 100) ::kill(-child, SIGKILL);  // still there a second after the pipe closed
    ::usleep(10'000);
  }
  if (result.output.size() > kMaxHookOutput) result.output.resize(kMaxHookOutput);
  if (timed_out) {
    result.ended = "killed after " + std::to_string(limit.count() / 1000) + " s";
  } else if (WIFEXITED(status)) {
    result.ok = WEXITSTATUS(status) == 0;
    result.ended = "exit status " + std::to_string(WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    result.ended = "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return result;
}

}  // namespace hangscope::watch
