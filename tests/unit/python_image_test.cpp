// The stack reader on a memory image laid out like a CPython 3.14 process (no 3.14 interpreter
// exists on this machine): the _Py_DebugOffsets table, an interpreter, a thread, frames with
// tagged executables and a shim frame, code objects, and strings of every kind; how each walk
// ended (WalkEnd, Diagnostic codes). And the interpreter search on this native test process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <vector>

#include "hangscope/common/diagnostic.h"
#include "hangscope/common/error.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/python/interpreter.h"
#include "hangscope/python/layout.h"
#include "hangscope/python/objects.h"
#include "hangscope/python/stack_reader.h"
#include "python314_image.h"

namespace hangscope::python {
namespace {

using namespace image314;

TEST_F(Python314Image, LayoutComesFromTheDebugTable) {
  std::vector<std::byte> table(debug_offsets_size(PythonVersion::from_hex(0x030E00F0)));
  ASSERT_EQ(table.size(), 760u);
  ASSERT_TRUE(image.read_exact(kRuntime, table.data(), table.size()));
  const Layout layout = layout_from_debug_offsets(table);
  EXPECT_EQ(layout.version.to_string(), "3.14.0");
  EXPECT_TRUE(layout.stack_refs);
  EXPECT_EQ(layout.frame_link, FrameLink::kDirect);
  EXPECT_EQ(layout.eval_calls, EvalCalls::kShimFrames);
  EXPECT_EQ(layout.line_encoding, LineEncoding::kLocationTable);
  EXPECT_EQ(layout.gil_place, GilPlace::kInterpreter);
  EXPECT_EQ(layout.interp_threads_head.offset, 7336u);
  EXPECT_EQ(layout.gil_locked.offset, 16u);
  EXPECT_EQ(layout.gil_last_holder.offset, 8u);
  EXPECT_EQ(layout.frame_owner->offset, 74u);
  EXPECT_EQ(layout.code_code_adaptive->offset, 208u);
  EXPECT_EQ(layout.tuple_items.offset, 32u);
  EXPECT_EQ(layout.unicode_compact_data, 56u);
  EXPECT_FALSE(layout.code_firsttraceable);  // not in 3.14's table
}

TEST_F(Python314Image, ThreadsFramesLinesAndStringsOfEveryKind) {
  std::vector<std::byte> table(760);
  ASSERT_TRUE(image.read_exact(kRuntime, table.data(), table.size()));
  const Layout layout = layout_from_debug_offsets(table);
  const auto maps = image.maps();
  ObjectReader objects(image, maps, layout);
  StackReader reader(objects, kRuntime, {});
  const auto threads = reader.read_threads();
  ASSERT_EQ(threads.size(), 1u);
  const auto& thread = threads[0];
  EXPECT_EQ(thread.native_thread_id, 4242);
  EXPECT_EQ(thread.thread_id, 0x7f0000aa0000u);
  EXPECT_TRUE(thread.holds_gil);
  EXPECT_EQ(thread.end, WalkEnd::kComplete);
  EXPECT_FALSE(thread.error.has_value());
  EXPECT_FALSE(torn(thread));
  ASSERT_EQ(thread.frames.size(), 2u);  // the shim is not a Python frame
  EXPECT_EQ(thread.frames[0].function, "barrier");
  EXPECT_EQ(thread.frames[0].qualname, "GroupCoordinator.barrier");
  EXPECT_EQ(thread.frames[0].file, "/srv/vllm/modèle.py");
  EXPECT_EQ(thread.frames[0].line, 102);
  EXPECT_TRUE(thread.frames[0].eval_entry);  // the frame before the shim starts an eval call
  EXPECT_EQ(thread.frames[1].function, "ждать");
  EXPECT_EQ(thread.frames[1].qualname, "𝔣𝔞𝔰𝔱");
  EXPECT_EQ(thread.frames[1].line, 47);
  EXPECT_TRUE(thread.frames[1].eval_entry);
}

TEST_F(Python314Image, FrameCyclesAndBrokenPointersEndTheWalkWithANote) {
  image.put(kFrames + 0x200 + 8, kFrames);  // outermost frame points back to the innermost
  const auto threads = read_threads();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads[0].frames.size(), 2u);
  EXPECT_EQ(threads[0].end, WalkEnd::kLoop);
  ASSERT_TRUE(threads[0].error.has_value());
  EXPECT_EQ(threads[0].error->code, DiagnosticCode::kStackBroken);
  EXPECT_FALSE(threads[0].error->text.empty());
  EXPECT_TRUE(torn(threads[0]));

  image.put(kFrames + 0x200 + 8, std::uint64_t{0xdead0000});  // points nowhere
  const auto again = read_threads();
  EXPECT_EQ(again[0].frames.size(), 2u);
  EXPECT_EQ(again[0].end, WalkEnd::kUnreadableMemory);
  ASSERT_TRUE(again[0].error.has_value());
  EXPECT_EQ(again[0].error->code, DiagnosticCode::kStackBroken);
  EXPECT_TRUE(torn(again[0]));
}

// A walk cut at the frame limit is sound: its code says so, and it is not a torn read.
TEST_F(Python314Image, AWalkCutAtTheFrameLimitSaysSoAndIsNotTorn) {
  StackReaderOptions options;
  options.max_frames = 1;
  const auto threads = read_threads(options);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads[0].frames.size(), 1u);
  EXPECT_EQ(threads[0].end, WalkEnd::kFrameLimit);
  ASSERT_TRUE(threads[0].error.has_value());
  EXPECT_EQ(threads[0].error->code, DiagnosticCode::kStackCut);
  EXPECT_FALSE(torn(threads[0]));
}

// A frame whose code object is unreadable is named and passed: the walk reaches the bottom,
// and the read counts as torn (a running process is read again).
TEST_F(Python314Image, ADamagedCodeObjectIsPassedAndMakesTheReadTorn) {
  image.put(kFrames + 0x200, kStrings);  // the outer frame's code is a str, not a code object
  const auto threads = read_threads();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads[0].frames.size(), 2u);
  EXPECT_EQ(threads[0].end, WalkEnd::kComplete);
  ASSERT_TRUE(threads[0].error.has_value());
  EXPECT_EQ(threads[0].error->code, DiagnosticCode::kDamagedFrame);
  EXPECT_TRUE(torn(threads[0]));
}

// This test binary maps no interpreter: the search says so with its code.
TEST(InterpreterSearch, ANativeProcessIsNotPython) {
  int error = 0;
  auto maps = proc::read_memory_map(::getpid(), &error);
  ASSERT_TRUE(maps) << error;
  proc::ProcessFs fs(::getpid());
  elf::ProcessImage image(fs, std::move(*maps));
  memory::ProcessMemory memory(::getpid());
  const auto search = find_interpreter(image, memory);
  EXPECT_FALSE(search.interpreter.has_value());
  EXPECT_EQ(search.problem.code, DiagnosticCode::kNotPython) << search.problem.text;
  EXPECT_FALSE(search.problem.text.empty());
}

TEST(Diagnostics, CodesAndWalkEndsHaveStableNames) {
  EXPECT_EQ(to_string(DiagnosticCode::kUnknown), "unknown");
  EXPECT_EQ(to_string(DiagnosticCode::kNotPython), "not-python");
  EXPECT_EQ(to_string(DiagnosticCode::kPythonUnsupported), "python-unsupported");
  EXPECT_EQ(to_string(DiagnosticCode::kPythonUnreadable), "python-unreadable");
  EXPECT_EQ(to_string(DiagnosticCode::kStackCut), "stack-cut");
  EXPECT_EQ(to_string(DiagnosticCode::kStackBroken), "stack-broken");
  EXPECT_EQ(to_string(DiagnosticCode::kDamagedFrame), "damaged-frame");
  EXPECT_EQ(to_string(WalkEnd::kComplete), "complete");
  EXPECT_EQ(to_string(WalkEnd::kFrameLimit), "frame-limit");
  EXPECT_EQ(to_string(WalkEnd::kUnreadableMemory), "unreadable-memory");
  EXPECT_EQ(to_string(WalkEnd::kLoop), "loop");
  EXPECT_EQ(to_string(WalkEnd::kStackPointerBackwards), "stack-pointer-backwards");
  EXPECT_EQ(to_string(WalkEnd::kNoUnwindInfo), "no-unwind-info");
  EXPECT_EQ(to_string(WalkEnd::kUnwindFailed), "unwind-failed");
}

TEST(DebugOffsets, RejectsBadCookieFreeThreadingAndUnknownVersions) {
  std::vector<std::byte> table(760);
  EXPECT_THROW(layout_from_debug_offsets(table), Error);
  std::memcpy(table.data(), "xdebugpy", 8);
  std::uint64_t value = 0x030E00F0;
  std::memcpy(table.data() + 8, &value, 8);
  value = 1;
  std::memcpy(table.data() + 16, &value, 8);
  try {
    layout_from_debug_offsets(table);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "free-threaded CPython 3.14.0 is not supported yet");
  }
  value = 0;
  std::memcpy(table.data() + 16, &value, 8);
  value = 0x030F00A1;
  std::memcpy(table.data() + 8, &value, 8);
  EXPECT_THROW(layout_from_debug_offsets(table), Error);
}

TEST(BuiltinLayouts, VersionDifferencesAreNamedProperties) {
  const auto l310 = builtin_layout({3, 10, 0, 0});
  const auto l311 = builtin_layout({3, 11, 0, 0});
  const auto l312 = builtin_layout({3, 12, 0, 0});
  ASSERT_TRUE(l310 && l311 && l312);
  EXPECT_EQ(l310->frame_kind, FrameKind::kFrameObject);
  EXPECT_EQ(l310->line_encoding, LineEncoding::kLineTable310);
  EXPECT_EQ(l310->eval_calls, EvalCalls::kFramePerCall);
  EXPECT_EQ(l310->locals_names, LocalsNames::kSeparateTuples);
  EXPECT_EQ(l310->dict_keys_format, DictKeysFormat::k310);
  EXPECT_EQ(l311->frame_link, FrameLink::kCFrame);
  EXPECT_EQ(l311->eval_calls, EvalCalls::kEntryFlag);
  EXPECT_EQ(l311->gil_place, GilPlace::kRuntime);
  EXPECT_EQ(l311->long_format, LongFormat::kSignedSize);
  EXPECT_EQ(l312->eval_calls, EvalCalls::kShimFrames);
  EXPECT_EQ(l312->gil_place, GilPlace::kInterpreter);
  EXPECT_EQ(l312->long_format, LongFormat::kTagged);
  for (const auto* l : {&*l310, &*l311, &*l312}) EXPECT_NO_THROW(l->check());
  // A property without the offsets it reads is refused.
  Layout broken = *l311;
  broken.frame_is_entry.reset();
  EXPECT_THROW(broken.check(), Error);
}

TEST(BuiltinLayouts, KnownVersionsOnly) {
  EXPECT_TRUE(builtin_layout({3, 10, 0, 0}));
  EXPECT_TRUE(builtin_layout({3, 11, 0, 0}));
  EXPECT_TRUE(builtin_layout({3, 12, 0, 0}));
  EXPECT_FALSE(builtin_layout({3, 13, 0, 0}));  // from its debug table
  EXPECT_FALSE(builtin_layout({3, 9, 0, 0}));
  EXPECT_EQ(debug_offsets_size({3, 13, 0, 0}), 584u);
  EXPECT_EQ(debug_offsets_size({3, 12, 0, 0}), 0u);
  EXPECT_EQ(PythonVersion::from_file_name("/usr/lib/libpython3.12.so.1.0")->minor, 12);
  EXPECT_EQ(PythonVersion::from_file_name("/usr/bin/python3.11")->minor, 11);
  EXPECT_FALSE(PythonVersion::from_file_name("/usr/bin/python"));
  EXPECT_FALSE(PythonVersion::from_file_name("/usr/lib/libpythonista.so"));
}

}  // namespace
}  // namespace hangscope::python
