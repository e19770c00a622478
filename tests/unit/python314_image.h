// A memory image laid out like a CPython 3.14 process, for tests on this machine, which has no
// 3.14 interpreter: sparse memory regions, 3.14's _Py_DebugOffsets table, an interpreter, a
// thread whose frames hold tagged executables and a shim frame, code objects, strings of every
// kind. Used by python_image_test.cpp (stacks) and asyncio314_image_test.cpp (asyncio tasks).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "hangscope/memory/memory_reader.h"
#include "hangscope/proc/maps.h"
#include "hangscope/python/layout.h"
#include "hangscope/python/objects.h"
#include "hangscope/python/stack_reader.h"

namespace hangscope::python::image314 {

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

inline constexpr std::uint64_t kRuntime = 0x10000000, kInterp = 0x10100000, kGil = 0x10200000,
                               kThread = 0x10300000, kFrames = 0x10400000, kCode = 0x10500000,
                               kStrings = 0x10600000, kTypes = 0x10700000;
// Type objects in the kTypes region: code at its start, then str and bytes (tp_name at +24).
inline constexpr std::uint64_t kStrType = kTypes + 32, kBytesType = kTypes + 64;

// 3.14's _Py_DebugOffsets for a GIL build on Linux x86-64 (positions from the 3.14 header).
inline void write_debug_offsets_314(MemoryImage& image) {
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
inline void write_string(MemoryImage& image, std::uint64_t address, const std::u32string& text,
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

inline void write_bytes_object(MemoryImage& image, std::uint64_t address,
                               const std::vector<std::uint8_t>& data) {
  image.put(address + 8, kBytesType);  // ob_type = <class 'bytes'>
  image.put(address + 16, static_cast<std::int64_t>(data.size()));
  image.put_bytes(address + 32, data.data(), data.size());
}

// A code object: names, first line, a line table whose entries cover 4 units each.
inline void write_code(MemoryImage& image, std::uint64_t code, std::uint64_t strings,
                       const std::u32string& name, unsigned name_kind,
                       const std::u32string& qualname, unsigned qual_kind, int first_line) {
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
    image.region(kThread, 4096);  // room for _PyThreadStateImpl's asyncio fields
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

  // The layout hangscope takes from the image's _Py_DebugOffsets table, read in full or the
  // test fails.
  Layout read_layout() {
    std::vector<std::byte> table(760);
    EXPECT_TRUE(image.read_exact(kRuntime, table.data(), table.size()));
    return layout_from_debug_offsets(table);
  }

  // The image read as hangscope reads a 3.14 process: its _Py_DebugOffsets table, then every
  // thread's stack.
  std::vector<PyThread> read_threads(StackReaderOptions options = {}) {
    const Layout layout = read_layout();
    const auto maps = image.maps();
    ObjectReader objects(image, maps, layout);
    return StackReader(objects, kRuntime, options).read_threads();
  }
};

}  // namespace hangscope::python::image314
