#include "wait_probes.h"

#include "hangscope/common/diagnostic.h"
#include "hangscope/common/error.h"
#include "hangscope/proc/maps.h"

namespace hangscope::capture {

std::uint32_t frames_kept(const std::vector<ProbedFrame>& reference,
                          const std::vector<ProbedFrame>& seen) {
  std::uint32_t kept = 0;
  for (std::size_t i = 0; i < reference.size() && i < seen.size(); ++i) {
    if (reference[i].function != seen[i].function || reference[i].file != seen[i].file) break;
    ++kept;
    if (reference[i].line != seen[i].line) break;  // inside this frame, elsewhere in it
  }
  return kept;
}

namespace {

std::vector<ProbedFrame> outermost_first(const model::FrameList& frames) {
  std::vector<ProbedFrame> out;
  for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
    out.push_back({f->file, f->function, f->line});
  }
  return out;
}

std::vector<ProbedFrame> outermost_first(const std::vector<python::PyFrame>& frames) {
  std::vector<ProbedFrame> out;
  for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
    out.push_back({f->file, f->function, f->line});
  }
  return out;
}

}  // namespace

std::unique_ptr<ProcessProbe> ProcessProbe::open(const snapshot::ProcessRecord& record,
                                                 std::shared_ptr<elf::ModuleCache> modules) {
  if (!record.dump || !record.dump->python) return nullptr;
  const auto& threads = record.dump->threads;
  if (std::none_of(threads.begin(), threads.end(), [](const model::ThreadDump& t) {
        return t.py_thread_id && !t.python_frames.empty();
      })) {
    return nullptr;
  }
  int error = 0;
  auto maps = proc::read_memory_map(record.pid, &error);
  if (!maps) return nullptr;  // gone since the sample
  std::unique_ptr<ProcessProbe> probe(
      new ProcessProbe(record, std::move(*maps), std::move(modules)));
  if (!probe->python_) return nullptr;
  return probe;
}

ProcessProbe::ProcessProbe(const snapshot::ProcessRecord& record, proc::MemoryMap maps,
                           std::shared_ptr<elf::ModuleCache> modules)
    : pid_(record.pid),
      start_time_ticks_(record.start_time_ticks),
      fs_(record.pid),
      image_(fs_, std::move(maps), std::move(modules)),
      memory_(record.pid) {
  Diagnostic note;
  python_ = PythonSession::open(image_, memory_, &note);
  for (const auto& t : record.dump->threads) {
    if (!t.py_thread_id || t.python_frames.empty()) continue;
    threads_[*t.py_thread_id].reference = outermost_first(t.python_frames);
  }
}

void ProcessProbe::probe() {
  std::vector<python::PyThread> read;
  try {
    read = python_->read_threads(/*locals=*/false, /*attempts=*/1);
  } catch (const Error&) {
    return;  // the interpreter could not be read this time (finalising, exited)
  }
  for (const auto& t : read) {
    const auto it = threads_.find(t.thread_id);
    if (it == threads_.end() || python::torn(t)) continue;
    it->second.tally.count(frames_kept(it->second.reference, outermost_first(t.frames)));
  }
}

void ProcessProbe::attach(snapshot::ProcessRecord& next) const {
  if (next.pid != pid_ || next.start_time_ticks != start_time_ticks_ || !next.dump) return;
  for (auto& t : next.dump->threads) {
    if (!t.py_thread_id) continue;
    const auto it = threads_.find(*t.py_thread_id);
    if (it != threads_.end() && it->second.tally.taken > 0) t.probes = it->second.tally;
  }
}

}  // namespace hangscope::capture
