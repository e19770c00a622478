#include "hangscope/capture/node_observer.h"

#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "hangscope/capture/node_capture.h"
#include "hangscope/common/clock.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/elf/module_cache.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/python/merge.h"
#include "hangscope/waits/wait_point.h"
#include "python_session.h"
#include "wait_probes.h"

namespace hangscope::capture {
namespace {

// Discovery walks every process's cmdline, exe and environment: done again at most this often
// (a rank started later is watched from the next one on).
constexpr std::chrono::seconds kRediscoverEvery{10};

std::string hostname() {
  char buffer[256] = {};
  ::gethostname(buffer, sizeof buffer - 1);
  return buffer;
}

// A zombie's exit as its stat's exit_code field (52) says: "exit status 1", "killed by signal
// 9"; "" when unreadable.
std::string zombie_exit(pid_t pid) {
  const auto read = read_proc_file("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!read.text) return "";
  const auto close = read.text->rfind(')');
  if (close == std::string::npos) return "";
  std::size_t field = 2;  // the state, after ')', is field 3
  std::size_t at = close + 1;
  while (at < read.text->size()) {
    while (at < read.text->size() && (*read.text)[at] == ' ') ++at;
    const std::size_t end = read.text->find(' ', at);
    ++field;
    if (field == 52) {
      const std::string token = read.text->substr(at, end == std::string::npos ? end : end - at);
      const long status = std::strtol(token.c_str(), nullptr, 10);
      if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
      return "exit status " + std::to_string(WEXITSTATUS(status));
    }
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

// Whose stacks an observation reads: ranks and the processes of a serving chain. A launcher,
// a helper or an unrelated Python program on the node is followed by its /proc state only.
bool stacks_matter(const model::ProcessRecord& r) {
  switch (r.identity.role) {
    case model::ProcessRole::kRank:
    case model::ProcessRole::kEngine:
    case model::ProcessRole::kApi:
    case model::ProcessRole::kCoordinator:
    case model::ProcessRole::kDriver:
      return true;
    default:
      return !r.identity.job.empty();
  }
}

// Whether a thread's frames (Python only) stand in a wait on peers: the threads probes watch.
bool waits_on_peers(const model::ThreadDump& thread) {
  return waits::waits_on_peers(waits::classify_thread(thread).kind);
}

}  // namespace

// Which processes to look at: the options' pids, else discovery, done again every
// kRediscoverEvery.
struct NodeObserver::Discovery {
  std::vector<pid_t> found;
  std::chrono::steady_clock::time_point at{};
  bool done = false;
  std::set<std::pair<pid_t, std::uint64_t>> rejected;  // (pid, start): not selected, not ranks
};

// One process as watched: what its description said, and its interpreter kept open.
struct NodeObserver::Watched {
  model::ProcessRecord record;            // identity, groups; no threads, logs or environment
  std::map<std::uint64_t, pid_t> tid_of;  // Python thread id -> host tid, from the description
  std::unique_ptr<proc::ProcessFs> fs;
  std::unique_ptr<elf::ProcessImage> image;
  std::unique_ptr<memory::ProcessMemory> memory;
  std::unique_ptr<PythonSession> python;
  // The probes of the current observation: each watched thread against its first read.
  ProbeTallies tallies;

  std::vector<python::PyThread> read_threads(int attempts, bool names) {
    if (!python) return {};
    try {
      return python->read_threads(/*locals=*/false, attempts, names);
    } catch (const Error&) {
      return {};  // finalising or exited: no threads this time
    }
  }

  void probe() {
    tallies.probe([this] { return read_threads(1, /*names=*/false); });
  }

  // The process now: its state and CPU times, its Python threads (frames only) with their
  // /proc facts, its groups' sequence numbers. nullopt when it is gone or is another process.
  std::optional<model::ProcessRecord> read(bool first) {
    const auto stat = fs->task_stat(record.pid);
    if (!stat || stat->start_time_ticks != record.start_time_ticks) return std::nullopt;
    model::ProcessRecord now = record;
    now.state = stat->state;
    now.utime_ticks = stat->utime_ticks;
    now.stime_ticks = stat->stime_ticks;
    if (stat->state == 'Z') {
      const std::string exit = zombie_exit(record.pid);
      if (!exit.empty()) now.facts[kProcessExitFact] = exit;
      if (now.dump) now.dump->threads.clear();
      return now;
    }
    if (!now.dump) return now;
    // One read; read again (until two agree) only when it caught a frame chain mid-change.
    // threading's names are left out (a dict walk per read): the tids name the threads.
    auto threads = read_threads(1, /*names=*/false);
    if (std::any_of(threads.begin(), threads.end(),
                    [](const python::PyThread& t) { return python::torn(t); })) {
      threads = read_threads(2, /*names=*/false);
    }
    if (first) tallies.clear();
    // The last read is also the next window's first when the next observation follows at once
    // (a watcher's calls come back to back): its threads are the next probes' references.
    ProbeTallies next;
    for (const auto& py : threads) {
      model::ThreadDump t;
      auto tid = tid_of.find(py.thread_id);
      t.tid = tid != tid_of.end()   ? tid->second
              : py.native_thread_id ? static_cast<pid_t>(*py.native_thread_id)
              : threads.size() == 1 ? record.pid
                                    : 0;
      if (t.tid != 0) {
        if (const auto s = fs->task_stat(t.tid)) {
          t.name = s->comm;
          t.state = s->state;
          t.utime_ticks = s->utime_ticks;
          t.stime_ticks = s->stime_ticks;
        }
      }
      t.py_thread_id = py.thread_id;
      t.py_thread_name = py.name;
      t.holds_gil = py.holds_gil;
      for (const auto& f : py.frames) t.python_frames.push_back(python::to_frame(f));
      t.frames = t.python_frames;
      t.merge = "python only: nothing stopped (an observation)";
      if (first) {
        // Probes watch the threads that wait on peers: whether they leave the wait between
        // the first and last read is what a probe can tell; a thread at work moves anyway.
        if (waits_on_peers(t)) tallies.watch(py.thread_id, outermost_first(py.frames));
      } else {
        if (const auto* tally = tallies.tally(py.thread_id)) t.probes = *tally;
        if (waits_on_peers(t)) next.watch(py.thread_id, outermost_first(py.frames));
      }
      now.dump->threads.push_back(std::move(t));
    }
    if (!first) tallies = std::move(next);
    if (now.dump->distributed && python) {
      python->refresh_sequences(*now.dump->distributed);
      record.dump->distributed = now.dump->distributed;  // the numbers only grow
    }
    return now;
  }
};

NodeObserver::NodeObserver() : discovery_(std::make_unique<Discovery>()) {}
NodeObserver::~NodeObserver() = default;

std::size_t NodeObserver::watched() const {
  return processes_.size();
}

std::vector<pid_t> NodeObserver::candidates(const ObserveOptions& options) {
  if (!options.selection.pids.empty()) return options.selection.pids;
  const auto now = std::chrono::steady_clock::now();
  if (!discovery_->done || now - discovery_->at >= kRediscoverEvery) {
    discovery_->found = discover_processes();
    discovery_->at = now;
    discovery_->done = true;
    // Processes left out earlier that are gone are forgotten: a watch runs for months.
    const std::set<pid_t> present(discovery_->found.begin(), discovery_->found.end());
    std::erase_if(discovery_->rejected, [&](const auto& r) { return !present.count(r.first); });
  }
  return discovery_->found;
}

void NodeObserver::describe_new(const std::vector<pid_t>& pids, const ObserveOptions& options) {
  if (pids.empty()) return;
  NodeCaptureOptions o;
  o.selection = options.selection;
  o.selection.pids = pids;
  o.process.stacks = StackKinds::kPythonOnly;
  // Locals once, when a process is described: the groups outside torch's registry that its
  // frames hold (vLLM's stateless DP group in an engine core's `self.dp_group`) are found
  // only through them, and each observation reads their sequence numbers again.
  o.process.locals = true;
  o.process.modules = modules_;
  const auto described = capture_node(o);
  for (const auto& r : described.processes) {
    spdlog::debug("observation: described pid {} ({}, {})", r.pid, r.comm,
                  model::to_string(r.identity.role));
  }
  std::set<pid_t> seen;
  for (const auto& r : described.processes) {
    seen.insert(r.pid);
    auto w = std::make_unique<Watched>();
    w->record = r;
    w->record.logs.clear();
    w->record.environment.clear();
    if (w->record.dump) {
      for (const auto& t : w->record.dump->threads) {
        if (t.py_thread_id && t.tid != 0) w->tid_of[*t.py_thread_id] = t.tid;
      }
      w->record.dump->threads.clear();
      w->record.dump->tasks.clear();
    }
    w->fs = std::make_unique<proc::ProcessFs>(r.pid);
    if (r.dump && r.dump->python && stacks_matter(r)) {
      int error = 0;
      if (auto maps = proc::read_memory_map(r.pid, &error)) {
        w->image = std::make_unique<elf::ProcessImage>(*w->fs, std::move(*maps), modules_);
        w->memory = std::make_unique<memory::ProcessMemory>(r.pid);
        Diagnostic note;
        w->python = PythonSession::open(*w->image, *w->memory, &note);
      }
    }
    processes_[r.pid] = std::move(w);
  }
  for (const pid_t pid : pids) {
    if (seen.count(pid)) continue;
    if (const auto stat = proc::ProcessFs(pid).task_stat(pid)) {
      discovery_->rejected.insert({pid, stat->start_time_ticks});
    }
  }
}

std::optional<std::array<model::NodeSnapshot, 2>> NodeObserver::observe(
    const ObserveOptions& options, const std::function<bool(std::int64_t)>& wait_until) {
  if (!modules_) modules_ = std::make_shared<elf::ModuleCache>();
  const auto begin = std::chrono::steady_clock::now();
  // Which processes: the known ones still there (same start), and the new ones described.
  PhaseTimer timer("observation, ");
  std::vector<pid_t> fresh;
  const auto pids = candidates(options);
  timer.lap("candidates");
  for (const pid_t pid : pids) {
    const auto stat = proc::ProcessFs(pid).task_stat(pid);
    if (!stat) continue;
    const auto known = processes_.find(pid);
    if (known != processes_.end() &&
        known->second->record.start_time_ticks == stat->start_time_ticks) {
      continue;
    }
    if (discovery_->rejected.count({pid, stat->start_time_ticks})) continue;
    if (known != processes_.end()) processes_.erase(known);  // the pid was reused
    if (stat->state != 'Z') fresh.push_back(pid);
  }
  describe_new(fresh, options);
  timer.lap("new processes described");

  std::array<model::NodeSnapshot, 2> samples;
  const std::string host = hostname();
  const auto read_all = [&](model::NodeSnapshot& node, bool first) {
    node.hostname = host;
    node.node_name = options.selection.node_name_or(host);
    node.capture_unix_ns = unix_now_ns();
    node.sample_index = first ? 0 : 1;
    for (auto it = processes_.begin(); it != processes_.end();) {
      auto record = it->second->read(first);
      if (!record) {
        it = processes_.erase(it);  // gone: a later sample simply lacks it
        continue;
      }
      node.processes.push_back(std::move(*record));
      ++it;
    }
  };
  // A watcher's next call comes right after the previous one's answer: the last read then
  // stands for this window's first (the threads were armed for it), which saves a read of every
  // process per poll. After a pause, or with processes described just now, read again.
  constexpr std::int64_t kReuseWithinNs = 250'000'000;
  if (last_read_ && fresh.empty() && options.selection.pids == last_pids_ &&
      unix_now_ns() - last_read_->capture_unix_ns < kReuseWithinNs) {
    samples[0] = *last_read_;
    samples[0].sample_index = 0;
    timer.lap("first read (the last one's)");
  } else {
    read_all(samples[0], true);
    timer.lap("first read");
  }
  std::chrono::nanoseconds probing{0};
  const std::int64_t from = samples[0].capture_unix_ns;
  const std::int64_t until = from + options.window.count();
  if (options.probes > 0 && options.window.count() > 0) {
    std::minstd_rand random(std::random_device{}());
    const std::int64_t slot = options.window.count() / options.probes;
    std::uniform_int_distribution<std::int64_t> within(0, std::max<std::int64_t>(slot - 1, 0));
    for (int k = 0; k < options.probes; ++k) {
      const std::int64_t at = from + k * slot + within(random);
      if (at >= until) break;
      if (!wait_until(at)) return std::nullopt;
      const auto probe_began = std::chrono::steady_clock::now();
      for (auto& [pid, w] : processes_) w->probe();
      probing += std::chrono::steady_clock::now() - probe_began;
    }
  }
  if (!wait_until(until)) return std::nullopt;
  spdlog::debug("observation, probes: {:.3f} ms", static_cast<double>(probing.count()) / 1e6);
  timer = PhaseTimer("observation, ");
  read_all(samples[1], false);
  timer.lap("last read");
  samples[1].capture_time = std::chrono::steady_clock::now() - begin;
  last_read_ = samples[1];
  last_pids_ = options.selection.pids;
  return samples;
}

}  // namespace hangscope::capture
