// Unwinds a copied thread stack with libunwind, driven by hangscope's own memory accessors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hangscope/common/diagnostic.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/native/freezer.h"

namespace hangscope::native {

struct RawFrame {
  std::uint64_t pc = 0;
  bool signal_frame = false;  // the frame of a signal handler's caller: pc is exact
};

struct UnwindResult {
  std::vector<RawFrame> frames;      // innermost first
  WalkEnd end = WalkEnd::kComplete;  // why the walk ended: what callers test
  std::string stop_reason;           // the same for people ("" when it reached the outermost frame)
  std::size_t live_reads = 0;        // reads the copy could not serve, taken from the live process
};

// One per process: caches unwind information across its threads.
class Unwinder {
 public:
  // `live` (nullable) serves reads outside the stack copy and the mapped files, after release.
  Unwinder(elf::ProcessImage& image, memory::MemoryReader* live);
  ~Unwinder();
  Unwinder(const Unwinder&) = delete;
  Unwinder& operator=(const Unwinder&) = delete;

  UnwindResult unwind(const ThreadCopy& thread, std::size_t max_frames = 256);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hangscope::native
