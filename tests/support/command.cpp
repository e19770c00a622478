#include "command.h"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "target_process.h"

namespace hangscope::testing {

CommandResult run_command(const std::string& shell_command) {
  const std::string err_path = temp_path("stderr");
  CommandResult result;
  FILE* pipe = ::popen((shell_command + " 2>" + err_path).c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* err = std::fopen(err_path.c_str(), "r")) {
    while ((n = std::fread(buffer.data(), 1, buffer.size(), err)) > 0)
      result.err.append(buffer.data(), n);
    std::fclose(err);
  }
  ::unlink(err_path.c_str());
  return result;
}

bool have_strace() {
  return run_command("strace -V >/dev/null 2>&1").exit_code == 0;
}

std::string strace_command(const std::string& syscalls, const std::string& trace_file,
                           const std::string& command) {
  return "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" strace -f -qq -e trace=" +
         syscalls + " -o '" + trace_file + "' " + command;
}

CommandResult run_on_terminal(const std::string& shell_command, int timeout_seconds,
                              unsigned short columns) {
  CommandResult result;
  winsize size{};
  size.ws_row = 50;
  size.ws_col = columns;
  int master = -1;
  const pid_t child = ::forkpty(&master, nullptr, nullptr, &size);
  if (child < 0) return result;
  if (child == 0) {
    ::setenv("TERM", "xterm", 1);
    ::execl("/bin/sh", "sh", "-c", shell_command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // forkpty made the child a session (and process group) leader: killing -child ends all of it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  std::array<char, 4096> buffer;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{master, POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(master, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EIO: every process holding the terminal has closed it
    result.out.append(buffer.data(), static_cast<std::size_t>(n));
  }
  if (timed_out) ::kill(-child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  ::close(master);
  result.exit_code = !timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace hangscope::testing
