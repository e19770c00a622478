// Hand-built snapshots for the analysis and report tests: frames, threads and a job builder
// that lays ranks out on nodes over several samples.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hangscope/model/bundle.h"

namespace hangscope::analysis::testing_builders {

inline const std::string kC10d =
    "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py";
inline const std::string kUser = "/srv/app/tools/repro/gloo_barrier_hang.py";

inline model::Frame py(const std::string& function, const std::string& file, int line,
                       std::vector<std::pair<std::string, std::string>> locals = {}) {
  model::Frame f;
  f.kind = model::Frame::Kind::kPython;
  f.function = function;
  f.qualname = function;
  f.file = file;
  f.line = line;
  f.locals = std::move(locals);
  return f;
}

// A Python method frame: co_qualname `qualname` ("Worker.execute_model"), its co_name the part
// after the last dot.
inline model::Frame method(const std::string& qualname, const std::string& file, int line,
                           std::vector<std::pair<std::string, std::string>> locals = {}) {
  auto f = py(qualname.substr(qualname.rfind('.') + 1), file, line, std::move(locals));
  f.qualname = qualname;
  return f;
}

inline model::Frame native(const std::string& function) {
  model::Frame f;
  f.function = function;
  f.module = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so";
  return f;
}

inline std::vector<model::Frame> barrier_stack() {
  return {native("__futex_abstimed_wait_common"), native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          py("barrier", kC10d, 3152), py("run_rank", kUser, 70), py("<module>", kUser, 120)};
}

inline std::vector<model::Frame> all_reduce_stack() {
  return {native("__futex_abstimed_wait_common"), native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          py("all_reduce", kC10d, 1536), py("decode_step", kUser, 90), py("<module>", kUser, 120)};
}

inline std::vector<model::Frame> store_wait_stack(int rank) {
  return {native("__GI___poll"),
          native("c10d::TCPStore::doWait(c10::ArrayRef<std::string>, std::chrono::duration<long, "
                 "std::ratio<1l, 1000l> >)"),
          native("c10d::TCPStore::wait"),
          py("load_weights", kUser, 37,
             {{"store", "<torch._C._distributed_c10d.TCPStore object at 0x7f>"},
              {"key", "'weights/" + std::to_string(rank) + "/ready'"}}),
          py("run_rank", kUser, 62),
          py("<module>", kUser, 120)};
}

inline model::ThreadDump thread(pid_t tid, char state, std::vector<model::Frame> frames) {
  model::ThreadDump t;
  t.tid = tid;
  t.name = "python3";
  t.state = state;
  for (const auto& f : frames) {
    (f.kind == model::Frame::Kind::kPython ? t.python_frames : t.native_frames).push_back(f);
  }
  t.frames = std::move(frames);
  return t;
}

class JobBuilder {
 public:
  explicit JobBuilder(int world_size, std::string job = "127.0.0.1:29500", int samples = 3)
      : world_size_(world_size), job_(std::move(job)), samples_(samples) {}

  // Rank `rank` on node "node<rank / ranks_per_node>", the same stack in every sample.
  JobBuilder& rank(int rank, std::vector<model::Frame> frames, char state = 'S',
                   std::uint64_t cpu_per_sample = 0, int ranks_per_node = 2) {
    ranks_.push_back({rank, std::move(frames), state, cpu_per_sample,
                      "node" + std::to_string(rank / ranks_per_node)});
    return *this;
  }

  // A fact of a rank's process in every sample ("net.tcp", "version.vllm", …).
  JobBuilder& fact(int rank, const std::string& key, const std::string& value) {
    facts_[rank][key] = value;
    return *this;
  }

  // An (allowlisted) environment variable of a rank's process.
  JobBuilder& env(int rank, const std::string& key, const std::string& value) {
    env_[rank][key] = value;
    return *this;
  }

  // The parent pid of every rank process (the engine core or API server that started them).
  JobBuilder& parent(pid_t ppid) {
    ppid_ = ppid;
    return *this;
  }

  // torch.distributed's state read from the rank's memory, in every sample.
  JobBuilder& distributed(int rank, model::DistributedState state) {
    distributed_[rank] = std::move(state);
    return *this;
  }

  // Context switches of the rank's thread per sample (a polling wait wakes up all the time).
  JobBuilder& wakeups(int rank, std::uint64_t per_sample) {
    wakeups_[rank] = per_sample;
    return *this;
  }

  // Probes between samples (in every sample after the first): `taken` per interval, of which
  // `outside` found the rank's thread outside every frame of its stack.
  JobBuilder& probes(int rank, std::uint32_t taken, std::uint32_t outside) {
    probes_[rank] = {taken, outside};
    return *this;
  }

  // Every sequence number of the rank's groups (distributed()) grows by `per_sample` per sample.
  JobBuilder& sequence_step(int rank, std::uint64_t per_sample) {
    sequence_steps_[rank] = per_sample;
    return *this;
  }

  // The rank's flight-recorder record in every sample.
  JobBuilder& flight(int rank, model::FlightRecord record) {
    flights_[rank] = std::move(record);
    return *this;
  }

  model::Bundle bundle() const {
    model::Bundle bundle;
    std::map<std::string, std::vector<model::NodeSnapshot>> nodes;
    for (int s = 0; s < samples_; ++s) {
      std::map<std::string, model::NodeSnapshot> per_node;
      for (const auto& r : ranks_) {
        auto& node = per_node[r.node];
        node.node_name = r.node;
        node.hostname = r.node;
        node.sample_index = s;
        node.capture_unix_ns =
            1'790'000'000'000'000'000 + static_cast<std::int64_t>(s) * 1'000'000'000;
        node.processes.push_back(process(r, s));
      }
      for (auto& [name, node] : per_node) nodes[name].push_back(std::move(node));
    }
    for (auto& [name, samples] : nodes) {
      bundle.nodes.push_back({name, name + ":7447", model::NodeState::kOk, "", 0});
      for (auto& s : samples) bundle.snapshots.push_back(std::move(s));
    }
    return bundle;
  }

 private:
  struct Rank {
    int rank;
    std::vector<model::Frame> frames;
    char state;
    std::uint64_t cpu_per_sample;
    std::string node;
  };

  model::ProcessRecord process(const Rank& r, int sample) const {
    model::ProcessRecord p;
    p.pid = 1000 + r.rank;
    p.ppid = ppid_;
    p.comm = "python3";
    p.state = r.state;
    p.start_time_ticks = 500;
    p.utime_ticks = 100 + r.cpu_per_sample * static_cast<std::uint64_t>(sample);
    p.identity.role = model::ProcessRole::kRank;
    p.identity.rank = r.rank;
    p.identity.world_size = world_size_;
    p.identity.job = job_;
    p.identity.source = model::IdentitySource::kEnv;
    if (auto it = facts_.find(r.rank); it != facts_.end()) p.facts = it->second;
    if (auto it = flights_.find(r.rank); it != flights_.end()) p.flight_record = it->second;
    if (auto it = env_.find(r.rank); it != env_.end()) {
      p.environment = it->second;
      p.environment_source = "proc";
    }
    model::ProcessDump dump;
    dump.pid = p.pid;
    dump.python = "3.11.2";
    dump.threads.push_back(thread(p.pid, r.state, r.frames));
    if (auto it = wakeups_.find(r.rank); it != wakeups_.end()) {
      dump.threads.back().context_switches = it->second * static_cast<std::uint64_t>(sample);
    }
    if (auto it = distributed_.find(r.rank); it != distributed_.end()) {
      dump.distributed = it->second;
      if (auto step = sequence_steps_.find(r.rank); step != sequence_steps_.end()) {
        for (auto& g : dump.distributed->groups) {
          if (g.sequence) *g.sequence += step->second * static_cast<std::uint64_t>(sample);
        }
      }
    }
    if (auto it = probes_.find(r.rank); it != probes_.end() && sample > 0) {
      auto& t = dump.threads.back();
      model::ProbeTally tally;
      const auto [taken, outside] = it->second;
      for (std::uint32_t i = 0; i < taken; ++i) {
        tally.count(i < outside ? 0 : static_cast<std::uint32_t>(t.python_frames.size()));
      }
      t.probes = tally;
    }
    p.dump = std::move(dump);
    return p;
  }

  int world_size_;
  pid_t ppid_ = 1;
  std::string job_;
  int samples_;
  std::vector<Rank> ranks_;
  std::map<int, std::map<std::string, std::string>> facts_, env_;
  std::map<int, model::FlightRecord> flights_;
  std::map<int, model::DistributedState> distributed_;
  std::map<int, std::uint64_t> wakeups_;
  std::map<int, std::pair<std::uint32_t, std::uint32_t>> probes_;  // rank → (taken, outside)
  std::map<int, std::uint64_t> sequence_steps_;
};

// A process group as a rank holds it.
inline model::ProcessGroupState pg(const std::string& name, std::vector<int> ranks,
                                   std::optional<int> group_rank = std::nullopt,
                                   std::optional<std::uint64_t> sequence = std::nullopt) {
  model::ProcessGroupState g;
  g.name = name;
  g.backend = "gloo";
  g.size = static_cast<int>(ranks.size());
  g.ranks = std::move(ranks);
  g.group_rank = group_rank;
  g.sequence = sequence;
  g.is_default = name == "0";
  return g;
}

}  // namespace hangscope::analysis::testing_builders
