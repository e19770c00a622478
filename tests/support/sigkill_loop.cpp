#include "sigkill_loop.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "target_process.h"

namespace hangscope::testing {

namespace {

unsigned long read_counter(const std::string& path) {
  unsigned long value = 0;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    if (::pread(fd, &value, sizeof value, 0) != static_cast<ssize_t>(sizeof value)) value = 0;
    ::close(fd);
  }
  return value;
}

}  // namespace

SigkillLoopResult sigkill_loop(pid_t target, int iterations, int max_delay_us,
                               const std::string& stop_mode, unsigned seed,
                               const std::string& counter_file) {
  SigkillLoopResult result;
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> delay(0, max_delay_us);
  const std::string pid_text = std::to_string(target);
  for (int i = 0; i < iterations; ++i) {
    const pid_t child = ::fork();
    if (child == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, STDOUT_FILENO);
      ::dup2(devnull, STDERR_FILENO);
      ::execl(HANGSCOPE_BINARY, HANGSCOPE_BINARY, "dump", "--pid", pid_text.c_str(), "--stop-mode",
              stop_mode.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::usleep(static_cast<useconds_t>(delay(random)));
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == 0) ++result.killed_mid_capture;
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    ++result.iterations;
    if (!eventually([&] { return no_thread_stopped(target); }, std::chrono::seconds(1))) {
      ++result.left_stopped;
    }
    if (!counter_file.empty()) {
      const unsigned long before = read_counter(counter_file);
      if (!eventually([&] { return read_counter(counter_file) != before; },
                      std::chrono::seconds(1))) {
        ++result.stalled;
      }
    }
  }
  return result;
}

}  // namespace hangscope::testing
