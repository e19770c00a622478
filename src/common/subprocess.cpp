#include "hangscope/common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"

extern char** environ;

namespace hangscope {
namespace {

// Waits for the child until the deadline; true when it was reaped (status set).
bool reap_until(pid_t child, int& status, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) return true;
    if (r < 0 && errno != EINTR) return true;  // already gone
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

ProgramResult run_program(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          std::size_t max_output) {
  ProgramResult result;
  if (argv.empty()) {
    result.error = "no program given";
    return result;
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.error = errno_message("pipe", errno);
    return result;
  }
  FileDescriptor read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  ::posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> args = argv;
  std::vector<char*> c_args;
  for (auto& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  pid_t child = 0;
  const int rc = ::posix_spawnp(&child, c_args[0], &actions, nullptr, c_args.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  write_end.reset();
  if (rc != 0) {
    result.error = rc == ENOENT ? "`" + argv[0] + "` is not installed"
                                : "`" + argv[0] + "` could not be started: " + std::strerror(rc);
    return result;
  }
  result.started = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[8192];
  for (bool open = true; open;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    const ssize_t got = ::read(read_end.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      open = false;
      continue;
    }
    const std::size_t room = max_output - std::min(max_output, result.output.size());
    result.output.append(buffer, std::min(room, static_cast<std::size_t>(got)));
  }
  int status = 0;
  bool reaped = !result.timed_out && reap_until(child, status, deadline);
  if (!reaped) {
    result.timed_out = true;
    ::kill(child, SIGKILL);
    reaped = reap_until(child, status,
                        std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
  }
  if (result.timed_out) {
    result.error = "`" + argv[0] + "` did not finish within " + std::to_string(timeout.count()) +
                   " ms and was killed" + (reaped ? "" : " (it did not die at once: state D?)");
    return result;
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (result.exit_code == 127) {
    result.started = false;
    result.error = "`" + argv[0] + "` is not installed";
  } else if (result.exit_code != 0) {
    result.error = "`" + argv[0] + "` failed (exit code " + std::to_string(result.exit_code) + ")";
  }
  return result;
}

}  // namespace hangscope
