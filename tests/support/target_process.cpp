#include "target_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <thread>

#include "hangscope/common/files.h"
#include "hangscope/proc/task_stat.h"

namespace hangscope::testing {

TargetProcess::TargetProcess(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& extra_env) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], STDOUT_FILENO);
    for (const auto& [key, value] : extra_env) ::setenv(key.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also from the parent, so killpg works before the child runs
  ::close(fds[1]);
  stdout_fd_ = fds[0];
}

TargetProcess::~TargetProcess() {
  kill_all();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

std::string TargetProcess::wait_for_line(const std::string& prefix,
                                         std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Every complete line stays available: targets may print in any order.
    for (const auto& line : lines_) {
      if (line.rfind(prefix, 0) == 0) return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      throw std::runtime_error("timed out waiting for '" + prefix + "'; output so far: " + output_);
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(stdout_fd_, buffer, sizeof buffer);
    if (n <= 0)
      throw std::runtime_error("target closed stdout before '" + prefix + "': " + output_);
    output_.append(buffer, static_cast<std::size_t>(n));
    pending_.append(buffer, static_cast<std::size_t>(n));
    std::size_t newline;
    while ((newline = pending_.find('\n')) != std::string::npos) {
      lines_.push_back(pending_.substr(0, newline));
      pending_.erase(0, newline + 1);
    }
  }
}

void TargetProcess::kill_all() {
  if (pid_ <= 0 || reaped_) return;
  ::killpg(pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
}

bool TargetProcess::try_reap() {
  if (reaped_) return true;
  int status;
  const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
  if (reaped == pid_) {
    reaped_ = true;
    if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
    ::killpg(pid_, SIGKILL);  // whatever it left behind in its group
  } else if (reaped < 0 && errno == ECHILD) {
    // Reaped by another wait of this process: a test that captures its own child is both the
    // target's parent and its tracer, and the capture's waitpid on the leader thread (__WALL)
    // takes the exit of a target that ends mid-capture. Gone all the same (its exit code
    // unknown); waiting for it again would loop forever.
    reaped_ = true;
    ::killpg(pid_, SIGKILL);
  }
  return reaped_;
}

bool wait_until_settled(pid_t pid, std::size_t running, std::chrono::milliseconds timeout) {
  const auto runnable = [pid] {
    std::size_t n = 0;
    for (const auto& [tid, state] : thread_states(pid)) n += state == 'R';
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int settled_reads = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    settled_reads = runnable() <= running ? settled_reads + 1 : 0;
    if (settled_reads == 2) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::map<pid_t, char> thread_states(pid_t pid) {
  std::map<pid_t, char> states;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return states;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const auto read = read_file(dir + "/" + e->d_name + "/stat");
    if (!read.text) continue;
    if (const auto stat = proc::parse_task_stat(*read.text)) states[stat->tid] = stat->state;
  }
  ::closedir(d);
  return states;
}

bool no_thread_stopped(pid_t pid) {
  for (const auto& [tid, state] : thread_states(pid)) {
    if (state == 'T' || state == 't') return false;
  }
  return true;
}

std::string temp_path(const std::string& stem) {
  static int counter = 0;
  return "/tmp/hangscope-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) +
         "-" + stem;
}

}  // namespace hangscope::testing
