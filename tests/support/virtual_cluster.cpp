#include "virtual_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "command.h"
#include "target_process.h"

namespace hangscope::testing {
namespace {

const std::string kCluster = HANGSCOPE_SOURCE_DIR "/tools/testbed/cluster.sh";

// One testbed per machine (one bridge, one subnet): ctest's RESOURCE_LOCK serializes the
// clusters of one ctest run only; this flock also makes clusters of other build trees,
// worktrees and direct runs of the test binaries wait (cluster.sh run takes the same lock).
int lock_testbed() {
  const char* path = std::getenv("HANGSCOPE_TESTBED_LOCK");
  const int fd = ::open(path ? path : "/run/lock/hangscope-testbed.lock",
                        O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return -1;  // no lock: as before, ctest's lock still holds within one run
  while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  return fd;
}

}  // namespace

VirtualCluster::VirtualCluster(const ClusterOptions& options)
    : dir_(temp_path("cluster")), testbed_lock_(lock_testbed()) {
  const auto result = run_command(
      kCluster + " up --dir " + dir_ + " --nodes " + std::to_string(options.nodes) + " --ranks " +
      std::to_string(options.ranks_per_node) + " --diverged " + std::to_string(options.diverged) +
      " --scenario " + options.scenario + (options.variety ? " --variety" : "") +
      (options.job.empty() ? "" : " --job '" + options.job + "'") +
      (options.fabric ? " --fabric" : "") + " --hangscope " + HANGSCOPE_BINARY + " 2>&1");
  up_ = result.exit_code == 0;
  if (!up_) ADD_FAILURE() << "cluster did not come up:\n" << result.out << result.err;
}

VirtualCluster::~VirtualCluster() {
  run_command(kCluster + " down --dir " + dir_ + " 2>&1");
  run_command("rm -rf " + dir_);
  if (testbed_lock_ >= 0) ::close(testbed_lock_);  // releases the flock
}

bool VirtualCluster::cut(int node) const {
  const auto result =
      run_command(kCluster + " cut --dir " + dir_ + " --node " + std::to_string(node) + " 2>&1");
  if (result.exit_code != 0) ADD_FAILURE() << "cluster.sh cut failed:\n" << result.out;
  return result.exit_code == 0;
}

std::string VirtualCluster::agents() const {
  std::ifstream in(dir_ + "/agents");
  std::string line, all;
  while (std::getline(in, line)) all += (all.empty() ? "" : ",") + line;
  return all;
}

Diagnosis VirtualCluster::diagnose(const std::string& name, const std::string& extra,
                                   const std::string& token_file) const {
  return run_diagnose(
      "--agents " + agents() + " --token-file " +
          (token_file.empty() ? this->token_file() : token_file) +
          // `extra` may set its own sampling (a slow job's steps outlast 300 ms).
          (extra.find("--interval") == std::string::npos ? " --samples 3 --interval 300ms" : "") +
          " --quiet " + extra,
      dir_ + "/" + name);
}

}  // namespace hangscope::testing
