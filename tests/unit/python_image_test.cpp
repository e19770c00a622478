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

namespace hangscope::python {
namespace {

// Sparse memory: regions at fixed addresses, each also listed in a MemoryMap.
class MemoryImage final : public memory::MemoryReader {
 public:
  std::vector<std::byte>& region(std::uint64_t base, std::size_t size) {
    auto& bytes = regions_[base];
    bytes.resize(size);
    return bytes;
  }
  template <typename T>
  void put(std::uint64_t address, const T& value) {
    auto [base, bytes] = locate(address, sizeof(T));
    std::memcpy(bytes->data() + (address - base), &value, sizeof(T));
  }
  void put_bytes(std::uint64_t address, const void* data, std::size_t size) {
    auto [base, bytes] = locate(address, size);
    std::memcpy(bytes->data() + (address - base), data, size);
  }
  std::size_t read(std::uint64_t address, void* out, std::size_t size) override {
    for (auto& [base, bytes] : regions_) {
      if (address >= base && address + size <= base + bytes.size()) {
        std::memcpy(out, bytes.data() + (address - base), size);
        return size;
      }
    }
    return 0;
  }
  proc::MemoryMap maps() const {
    std::vector<proc::Mapping> mappings;
    for (const auto& [base, bytes] : regions_) {
      proc::Mapping m;
      m.start = base;
      m.end = base + bytes.size();
      m.readable = true;
      mappings.push_back(m);
    }
    return proc::MemoryMap(mappings);
  }

 private:
  std::pair<std::uint64_t, std::vector<std::byte>*> locate(std::uint64_t address,
                                                           std::size_t size) {
    for (auto& [base, bytes] : regions_) {
      if (address >= base && address + size <= base + bytes.size()) return {base, &bytes};
    }
    throw std::runtime_error("address outside the image");
  }
  std::map<std::uint64_t, std::vector<std::byte>> regions_;
};

constexpr std::uint64_t kRuntime = 0x10000000, kInterp = 0x10100000, kGil = 0x10200000,
                        kThread = 0x10300000, kFrames = 0x10400000, kCode = 0x10500000,
                        kStrings = 0x10600000, kTypes = 0x10700000;
// Type objects in the kTypes region: code at its start, then str and bytes (tp_name at +24).
constexpr std::uint64_t kStrType = kTypes + 32, kBytesType = kTypes + 64;

// 3.14's _Py_DebugOffsets for a GIL build on Linux x86-64 (positions from the 3.14 header).
void write_debug_offsets_314(MemoryImage& image) {
  image.put_bytes(kRuntime, "xdebugpy", 8);
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> fields = {
      {8, 0x030E00F0},
      {16, 0},    // version, free_threaded
      {40, 808},  // interpreters_head
      {64, 7272},
      {72, 7336},
      {96, 7680},
      {120, 16},
      {128, 7768},
      {144, 7784},
      {152, 7776},
      {192, 8},
      {200, 16},
      {208, 72},
      {216, 152},
      {224, 160},  // thread state
      {248, 88},
      {256, 8},
      {264, 0},
      {272, 56},
      {280, 80},
      {288, 74},  // interpreter
                  // frame
      {312, 216},
      {320, 112},
      {328, 120},
      {336, 128},
      {344, 136},
      {352, 68},
      {368, 96},
      {376, 104},
      {384, 208},  // code object
      {408, 8},
      {424, 24},
      {456, 32},
      {480, 24},
      {536, 32},
      {544, 40},
      {560, 16},
      {584, 24},
      {608, 32},
      {624, 32},
      {632, 16},
      {640, 40}};
  for (const auto& [position, value] : fields) image.put(kRuntime + position, value);
}

// A compact str of the given kind (1, 2 or 4 bytes per code point) at address.
void write_string(MemoryImage& image, std::uint64_t address, const std::u32string& text,
                  unsigned kind) {
  bool ascii = kind == 1;
  for (char32_t c : text) ascii = ascii && c < 0x80;
  const std::uint32_t state = (kind << 2) | (1u << 5) | (ascii ? 1u << 6 : 0u);
  image.put(address + 8, kStrType);  // ob_type = <class 'str'>
  image.put(address + 16, static_cast<std::int64_t>(text.size()));
  image.put(address + 32, state);
  const std::uint64_t data = address + (ascii ? 40 : 56);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::uint32_t cp = text[i];
    image.put_bytes(data + i * kind, &cp, kind);
  }
}

void write_bytes_object(MemoryImage& image, std::uint64_t address,
                        const std::vector<std::uint8_t>& data) {
  image.put(address + 8, kBytesType);  // ob_type = <class 'bytes'>
  image.put(address + 16, static_cast<std::int64_t>(data.size()));
  image.put_bytes(address + 32, data.data(), data.size());
}

// A code object: names, first line, a line table whose entries cover 4 units each.
void write_code(MemoryImage& image, std::uint64_t code, std::uint64_t strings,
                const std::u32string& name, unsigned name_kind, const std::u32string& qualname,
                unsigned qual_kind, int first_line) {
  image.put(code + 8, kTypes);             // ob_type = <class 'code'>
  image.put(code + 112, strings);          // co_filename
  image.put(code + 120, strings + 0x100);  // co_name
  image.put(code + 128, strings + 0x200);  // co_qualname
  image.put(code + 136, strings + 0x300);  // co_linetable
  image.put(code + 68, static_cast<std::int32_t>(first_line));
  write_string(image, strings, U"/srv/vllm/modèle.py", 1);  // Latin-1, not ASCII
  write_string(image, strings + 0x100, name, name_kind);
  write_string(image, strings + 0x200, qualname, qual_kind);
  // units 0-3: first line; units 4-7: +2 (one-line form code 12); units 8-11: +5 (no-column form).
  write_bytes_object(
      image, strings + 0x300,
      {0x80 | (1 << 3) | 3, 0x00, 0x80 | (12 << 3) | 3, 1, 2, 0x80 | (13 << 3) | 3, 10});
}

class Python314Image : public ::testing::Test {
 protected:
  void SetUp() override {
    image.region(kRuntime, 4096);
    image.region(kInterp, 8192);
    image.region(kGil, 256);
    image.region(kThread, 512);
    image.region(kFrames, 1024);
    image.region(kCode, 4096);
    image.region(kStrings, 8192);
    image.region(kTypes, 512);
    write_debug_offsets_314(image);
    image.put(kTypes + 24, kTypes + 128);  // tp_name
    image.put_bytes(kTypes + 128, "code", 5);
    image.put(kStrType + 24, kTypes + 144);
    image.put_bytes(kTypes + 144, "str", 4);
    image.put(kBytesType + 24, kTypes + 160);
    image.put_bytes(kTypes + 160, "bytes", 6);
    image.put(kRuntime + 808, kInterp);
    image.put(kInterp + 7336, kThread);  // threads.head
    image.put(kInterp + 16, kGil);       // ceval.gil
    image.put(kGil + 16, std::int32_t{1});
    image.put(kGil + 8, kThread);
    image.put(kThread + 8, std::uint64_t{0});  // next
    image.put(kThread + 72, kFrames);          // current_frame
    image.put(kThread + 152, std::uint64_t{0x7f0000aa0000});
    image.put(kThread + 160, std::uint64_t{4242});
    // Innermost frame: executable tagged as a borrowed reference (low bit set).
    const std::uint64_t f1 = kFrames, shim = kFrames + 0x100, f2 = kFrames + 0x200;
    const std::uint64_t c1 = kCode, c2 = kCode + 0x400;
    image.put(f1 + 0, c1 | 1);
    image.put(f1 + 8, shim);
    image.put(f1 + 56, c1 + 208 + 2 * 5);  // unit 5: first line + 2
    image.put(f1 + 74, std::uint8_t{0});
    image.put(shim + 8, f2);
    image.put(shim + 74, std::uint8_t{4});  // FRAME_OWNED_BY_CSTACK in 3.14
    image.put(f2 + 0, c2);
    image.put(f2 + 8, std::uint64_t{0});
    image.put(f2 + 56, c2 + 208 + 2 * 9);  // unit 9: first line + 7
    image.put(f2 + 74, std::uint8_t{1});   // a generator's frame
    write_code(image, c1, kStrings, U"barrier", 1, U"GroupCoordinator.barrier", 1, 100);
    write_code(image, c2, kStrings + 0x1000, U"ждать", 2, U"𝔣𝔞𝔰𝔱", 4, 40);
  }
  MemoryImage image;

  // The image read as hangscope reads a 3.14 process: its _Py_DebugOffsets table, then every
  // thread's stack. The table is read in full or the test fails.
  std::vector<PyThread> read_threads(StackReaderOptions options = {}) {
    std::vector<std::byte> table(760);
    EXPECT_TRUE(image.read_exact(kRuntime, table.data(), table.size()));
    const Layout layout = layout_from_debug_offsets(table);
    const auto maps = image.maps();
    ObjectReader objects(image, maps, layout);
    return StackReader(objects, kRuntime, options).read_threads();
  }
};

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
