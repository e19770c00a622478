#include "wait_probes.h"

#include <algorithm>

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

std::unique_ptr<ProcessProbe> ProcessProbe::open(const model::ProcessRecord& record,
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

ProcessProbe::ProcessProbe(const model::ProcessRecord& record, proc::MemoryMap maps,
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

std::optional<std::uint32_t> ProcessProbe::kept_by(const python::PyThread& t) const {
  const auto it = threads_.find(t.thread_id);
  if (it == threads_.end() || python::torn(t) || t.frames.empty()) return std::nullopt;
  const auto seen = outermost_first(t.frames);
  // A thread's outermost frame stays for its life: a read that ends anywhere else caught the
  // chain mid-change (a spin loop pushing and popping frames) and says nothing.
  const auto& bottom = it->second.reference.front();
  if (seen.front().function != bottom.function || seen.front().file != bottom.file) {
    return std::nullopt;
  }
  return frames_kept(it->second.reference, seen);
}

std::vector<python::PyThread> ProcessProbe::read() {
  try {
    return python_->read_threads(/*locals=*/false, /*attempts=*/1);
  } catch (const Error&) {
    return {};  // the interpreter could not be read this time (finalising, exited)
  }
}

void ProcessProbe::probe() {
  std::map<std::uint64_t, std::uint32_t> kept;  // by thread id
  bool moved = false;                           // some thread stands outside part of its stack
  for (const auto& t : read()) {
    if (const auto k = kept_by(t)) {
      kept[t.thread_id] = *k;
      moved = moved || *k < threads_.at(t.thread_id).reference.size();
    }
  }
  // A thread that seems to stand elsewhere is read once more at once, and counts only when both
  // reads agree: a read that caught a spinning thread's frame chain mid-change (a stale frame
  // linked to an outer one) is not repeated, while a thread that left its wait is still there
  // a moment later. One that moved on between the two reads is not counted either way.
  if (moved) {
    std::map<std::uint64_t, std::uint32_t> again;
    for (const auto& t : read()) {
      if (const auto k = kept_by(t)) again[t.thread_id] = *k;
    }
    for (auto it = kept.begin(); it != kept.end();) {
      const bool whole = it->second == threads_.at(it->first).reference.size();
      const auto second = again.find(it->first);
      if (whole || (second != again.end() && second->second == it->second)) {
        ++it;
      } else {
        it = kept.erase(it);
      }
    }
  }
  for (const auto& [id, k] : kept) threads_.at(id).tally.count(k);
}

void ProcessProbe::attach(model::ProcessRecord& next) const {
  if (next.pid != pid_ || next.start_time_ticks != start_time_ticks_ || !next.dump) return;
  for (auto& t : next.dump->threads) {
    if (!t.py_thread_id) continue;
    const auto it = threads_.find(*t.py_thread_id);
    if (it != threads_.end() && it->second.tally.taken > 0) t.probes = it->second.tally;
  }
}

}  // namespace hangscope::capture
