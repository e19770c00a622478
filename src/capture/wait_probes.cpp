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

void ProbeTallies::watch(std::uint64_t thread_id, std::vector<ProbedFrame> reference) {
  threads_[thread_id] = {std::move(reference), {}};
}

const model::ProbeTally* ProbeTallies::tally(std::uint64_t thread_id) const {
  const auto it = threads_.find(thread_id);
  return it == threads_.end() || it->second.tally.taken == 0 ? nullptr : &it->second.tally;
}

std::optional<std::uint32_t> ProbeTallies::kept_by(const python::PyThread& t) const {
  const auto it = threads_.find(t.thread_id);
  if (it == threads_.end() || it->second.reference.empty() || python::torn(t) || t.frames.empty()) {
    return std::nullopt;
  }
  const auto seen = outermost_first(t.frames);
  // A thread's outermost frame stays for its life: a read that ends anywhere else caught the
  // chain mid-change (a spin loop pushing and popping frames) and says nothing.
  const auto& bottom = it->second.reference.front();
  if (seen.front().function != bottom.function || seen.front().file != bottom.file) {
    return std::nullopt;
  }
  return frames_kept(it->second.reference, seen);
}

void ProbeTallies::probe(const std::function<std::vector<python::PyThread>()>& read) {
  if (threads_.empty()) return;
  std::map<std::uint64_t, std::uint32_t> kept;  // by thread id
  bool moved = false;                           // some thread stands outside part of its stack
  for (const auto& t : read()) {
    if (const auto k = kept_by(t)) {
      kept[t.thread_id] = *k;
      moved = moved || *k < threads_.at(t.thread_id).reference.size();
    }
  }
  if (moved) {
    std::map<std::uint64_t, std::uint32_t> again;
    for (const auto& t : read()) {
      if (const auto k = kept_by(t)) again[t.thread_id] = *k;
    }
    std::erase_if(kept, [&](const auto& entry) {
      const bool whole = entry.second == threads_.at(entry.first).reference.size();
      const auto second = again.find(entry.first);
      return !whole && (second == again.end() || second->second != entry.second);
    });
  }
  for (const auto& [id, k] : kept) threads_.at(id).tally.count(k);
}

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
    tallies_.watch(*t.py_thread_id, outermost_first(t.python_frames));
  }
}

std::vector<python::PyThread> ProcessProbe::read() {
  try {
    return python_->read_threads(/*locals=*/false, /*attempts=*/1);
  } catch (const Error&) {
    return {};  // the interpreter could not be read this time (finalising, exited)
  }
}

void ProcessProbe::probe() {
  tallies_.probe([this] { return read(); });
}

void ProcessProbe::attach(model::ProcessRecord& next) const {
  if (next.pid != pid_ || next.start_time_ticks != start_time_ticks_ || !next.dump) return;
  for (auto& t : next.dump->threads) {
    if (!t.py_thread_id) continue;
    if (const auto* tally = tallies_.tally(*t.py_thread_id)) t.probes = *tally;
  }
}

}  // namespace hangscope::capture
