// Test helper: the virtual cluster of tools/testbed/cluster.sh (nodes as network, PID, UTS and
// mount namespaces with real agents and real gloo ranks), brought up for a test and always torn
// down; and diagnose run against its agents.
#pragma once

#include <string>

#include "diagnose_run.h"

namespace hangscope::testing {

struct ClusterOptions {
  int nodes = 2;
  int ranks_per_node = 2;
  int diverged = 3;
  std::string scenario = "store-wait";  // tools/repro/gloo_barrier_hang.py --scenario
  bool variety = false;                 // identity variety and a second job on node 1
  // Non-empty: tools/repro/parallel_job.py's arguments (cluster.sh --job): each node runs that
  // job's launcher instead of gloo_barrier_hang.py; diverged, scenario and variety are ignored.
  std::string job{};
  // A second network, the fabric, for the job's ranks (cluster.sh --fabric): cut() takes a
  // node's fabric link down while its agent still answers.
  bool fabric = false;
};

class VirtualCluster {
 public:
  explicit VirtualCluster(const ClusterOptions& options);
  ~VirtualCluster();
  VirtualCluster(const VirtualCluster&) = delete;
  VirtualCluster& operator=(const VirtualCluster&) = delete;

  bool up() const { return up_; }
  std::string agents() const;  // "host:port,host:port"
  std::string token_file() const { return dir_ + "/token"; }
  std::string dir() const { return dir_; }
  // Takes node `node`'s fabric link down (cluster.sh cut); false when that failed.
  bool cut(int node) const;

  // `hangscope diagnose --agents … --token-file … --json` with `extra` options (run_diagnose);
  // the bundle goes to dir()/NAME and stays there until the cluster goes down.
  Diagnosis diagnose(const std::string& name, const std::string& extra = "",
                     const std::string& token_file = "") const;

 private:
  std::string dir_;
  bool up_ = false;
  int testbed_lock_ = -1;  // the machine-wide testbed lock, held from up to down
};

}  // namespace hangscope::testing
