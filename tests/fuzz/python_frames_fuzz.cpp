// Fuzz target: the Python frame walker over a target's memory. The input is a memory image of
// a CPython process, mapped at kImageBase (one readable mapping); _PyRuntime is at its start.
// Byte 0 picks the version (3.10, 3.11, 3.12 with their built-in layouts; 3.13, 3.14 with the
// layout read from the _Py_DebugOffsets table at the start of _PyRuntime, as
// capture::PythonSession::open does), byte 1 bit 0 asks for locals; the image follows. Walks
// every thread and frame (python::StackReader over a PageCache, at most 16 threads of 128
// frames: bounded work), reads thread names, GIL holder, code objects, strings, line tables
// and local values, then merges each thread's frames with a native stack (python::merge_stacks).
#include <vector>

#include "fuzz_support.h"
#include "hangscope/common/error.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/memory/page_cache.h"
#include "hangscope/proc/maps.h"
#include "hangscope/python/layout.h"
#include "hangscope/python/merge.h"
#include "hangscope/python/objects.h"
#include "hangscope/python/stack_reader.h"

namespace {

using namespace hangscope;

constexpr std::uint64_t kImageBase = 0x10000000;
constexpr int kMinors[] = {10, 11, 12, 13, 14};

std::optional<python::Layout> layout_of(int minor, memory::MemoryReader& memory) {
  python::PythonVersion version{3, minor, 0, 0};
  if (auto layout = python::builtin_layout(version)) return layout;
  std::vector<std::byte> table(python::debug_offsets_size(version));
  if (table.empty() || !memory.read_exact(kImageBase, table.data(), table.size())) {
    return std::nullopt;
  }
  try {
    return python::layout_from_debug_offsets(table);
  } catch (const Error&) {
    return std::nullopt;  // the session falls back to native stacks only
  }
}

model::Frame native_frame(const std::string& function) {
  model::Frame f;
  f.function = function;
  f.module = "/usr/lib/x86_64-linux-gnu/libpython3.so";
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int minor = kMinors[data[0] % 5];
  const bool locals = data[1] & 1;
  memory::BufferMemory image(kImageBase, reinterpret_cast<const std::byte*>(data + 2), size - 2);
  proc::Mapping mapping;
  mapping.start = kImageBase;
  mapping.end = kImageBase + (size - 2);
  mapping.readable = true;
  const proc::MemoryMap maps({mapping});
  const auto layout = layout_of(minor, image);
  if (!layout) return 0;

  memory::PageCache pages(image);
  python::ObjectReader objects(pages, maps, *layout);
  python::StackReaderOptions options;
  options.locals = locals;
  options.max_frames = 128;
  options.max_threads = 16;
  python::StackReader reader(objects, kImageBase, options);
  std::vector<python::PyThread> threads;
  try {
    threads = reader.read_threads();
  } catch (const Error&) {
    return 0;
  }
  for (const auto& thread : threads) {
    std::vector<model::Frame> native_stack = {native_frame("__futex_abstimed_wait_common")};
    for (const auto& f : thread.frames) {
      if (f.eval_entry) native_stack.push_back(native_frame("_PyEval_EvalFrameDefault"));
    }
    native_stack.push_back(native_frame("Py_RunMain"));
    (void)python::merge_stacks(native_stack, thread.frames,
                               "/usr/lib/x86_64-linux-gnu/libpython3.so");
  }
  return 0;
}
