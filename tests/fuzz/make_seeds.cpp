// Writes the fuzz seeds that no fixture of the repository is: snapshot files (the analysis
// tests' hand-built jobs, with flight-recorder dumps from tests/fixtures, in both formats; and
// any JSON snapshot file converted to .pb) and CPython memory images for python_frames_fuzz.
// The output is kept in tests/fuzz/corpus/; run again only to refresh it:
//
//   cmake --build build-fuzz --target hangscope_fuzz_seeds
//   build-fuzz/tests/fuzz/hangscope_fuzz_seeds snapshots tests/fuzz/corpus SOURCE_DIR
//   build-fuzz/tests/fuzz/hangscope_fuzz_seeds convert IN.json OUT.pb
//   build-fuzz/tests/fuzz/hangscope_fuzz_seeds python tests/fuzz/corpus/python_frames
//   build-fuzz/tests/fuzz/hangscope_fuzz_seeds check-python IMAGE   (prints its threads)
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>

#include "analysis_builders.h"
#include "hangscope/collectives/flight_recorder.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/python/layout.h"
#include "hangscope/python/stack_reader.h"
#include "hangscope/snapshot/codec.h"

namespace {

using namespace hangscope;
using namespace hangscope::analysis::testing_builders;

void write_both(const std::string& corpus, const std::string& name, const model::Bundle& bundle) {
  snapshot::write_file(corpus + "/snapshot_json/" + name + ".json", bundle.snapshots);
  snapshot::write_file(corpus + "/snapshot_pb/" + name + ".pb", bundle.snapshots);
}

void snapshots(const std::string& corpus, const std::string& source_dir) {
  {  // a store barrier: rank 2 waits for a key, the others in the barrier; 2 samples
    JobBuilder job(4, "127.0.0.1:29500", 2);
    job.rank(0, barrier_stack())
        .rank(1, barrier_stack())
        .rank(2, store_wait_stack(2), 'S', 2)
        .rank(3, barrier_stack())
        .fact(0, "version.torch", "2.5.1")
        .fact(2, "net.tcp", "127.0.0.1:29500>127.0.0.1:40000")
        .env(2, "MASTER_ADDR", "127.0.0.1")
        .env(2, "MASTER_PORT", "29500");
    write_both(corpus, "store_barrier", job.bundle());
  }
  {  // idle ranks whose locals name peers: rank 2 waits for a store key, ranks 0-1 in an
     // all_reduce of a listed group, rank 3 in the barrier (the wait-for graph reads them)
    JobBuilder job(4, "127.0.0.1:29500", 2);
    const auto listed = [](int line) {
      auto stack = all_reduce_stack();
      stack[2].locals = {{"ranks", "[0, 1, 3]"}, {"group", "<ProcessGroup object>"}};
      stack[2].line = line;
      return stack;
    };
    job.rank(0, listed(1536))
        .rank(1, listed(1536))
        .rank(2, store_wait_stack(2))
        .rank(3, barrier_stack())
        .fact(2, "version.torch", "2.5.1+cu124");
    write_both(corpus, "locals_name_peers", job.bundle());
  }
  {  // every rank in all_reduce, rank 3 one collective behind (flight-recorder dumps)
    JobBuilder job(4, "127.0.0.1:29500", 1);
    for (int r = 0; r < 4; ++r) {
      job.rank(r, all_reduce_stack());
      const auto read = read_file(source_dir + "/tests/fixtures/flight_recorder/behind/json/" +
                                  "nccl_trace_rank_" + std::to_string(r));
      if (!read.text) throw Error("missing flight-recorder fixture for rank " + std::to_string(r));
      auto record = collectives::parse_flight_record(*read.text);
      record.rank = r;
      job.flight(r, record);
    }
    write_both(corpus, "collective_behind", job.bundle());
  }
  {  // a world of 2^31 - 1 ranks, four in the default group's barrier (its size from memory):
     // the missing ranks are one range (issue 21)
    constexpr int kWorld = std::numeric_limits<int>::max();
    JobBuilder job(kWorld, "127.0.0.1:29500", 2);
    for (int r = 0; r < 4; ++r) {
      model::DistributedState state;
      state.rank = r;
      state.world_size = kWorld;
      state.groups = {pg("0", {}, r)};
      state.groups[0].size = kWorld;
      auto stack = barrier_stack();
      stack[2].locals = {{"group", "None"}};
      job.rank(r, stack).distributed(r, state);
    }
    write_both(corpus, "world_int_max", job.bundle());
  }
}

// ---- CPython memory images ----------------------------------------------------------------

constexpr std::uint64_t kBase = 0x10000000;  // python_frames_fuzz's kImageBase
constexpr std::uint64_t kInterp = 0x1000, kGil = 0x3000, kThread = 0x3100, kCFrame = 0x3400,
                        kFrame1 = 0x3800, kShim = 0x3a00, kFrame2 = 0x3c00, kCode1 = 0x4000,
                        kCode2 = 0x4400, kStrings = 0x5000, kTypes = 0x7000, kValues = 0x7800,
                        kSize = 0x7c00;

class Image {
 public:
  Image() : bytes_(kSize) {}
  template <typename T>
  void put(std::uint64_t offset, T value) {
    if (offset + sizeof(T) > bytes_.size()) throw Error("image offset out of range");
    std::memcpy(bytes_.data() + offset, &value, sizeof(T));
  }
  void put_bytes(std::uint64_t offset, const void* data, std::size_t size) {
    if (offset + size > bytes_.size()) throw Error("image offset out of range");
    std::memcpy(bytes_.data() + offset, data, size);
  }
  void pointer(std::uint64_t offset, std::uint64_t target) { put(offset, kBase + target); }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

// _Py_DebugOffsets of a GIL build: the values of tests/unit/python_image_test.cpp's 3.14 table,
// at the positions of the 3.13 or 3.14 table (src/python/layout.cpp).
void write_debug_offsets(Image& image, int minor) {
  struct Field {
    std::size_t at313, at314;
    std::uint64_t value;
  };
  const std::vector<Field> fields = {
      {40, 40, 808},    {64, 64, 7272},   {72, 72, 7336},   {88, 96, 7680},  {112, 120, 16},
      {120, 128, 7768}, {136, 144, 7784}, {144, 152, 7776}, {168, 192, 8},   {176, 200, 16},
      {184, 208, 72},   {192, 216, 152},  {200, 224, 160},  {224, 248, 88},  {232, 256, 8},
      {240, 264, 0},    {248, 272, 56},   {256, 280, 80},   {264, 288, 74},  {272, 312, 216},
      {280, 320, 112},  {288, 328, 120},  {296, 336, 128},  {304, 344, 136}, {312, 352, 68},
      {328, 368, 96},   {336, 376, 104},  {344, 384, 208},  {360, 408, 8},   {376, 424, 24},
      {408, 456, 32},   {432, 480, 24},   {456, 536, 32},   {464, 544, 40},  {480, 560, 16},
      {504, 584, 24},   {528, 608, 32},   {544, 624, 32},   {552, 632, 16},  {560, 640, 40}};
  image.put_bytes(0, "xdebugpy", 8);
  image.put<std::uint64_t>(8, minor == 13 ? 0x030D00F0 : 0x030E00F0);
  image.put<std::uint64_t>(16, 0);  // not free-threaded
  for (const auto& f : fields) image.put<std::uint64_t>(minor == 13 ? f.at313 : f.at314, f.value);
}

struct ImageWriter {
  Image& image;
  const python::Layout& l;
  std::uint64_t next_string = kStrings;

  void type(std::uint64_t at, const char* name) {
    image.pointer(l.type_name.in(at), at + 0x80);
    image.put_bytes(at + 0x80, name, std::strlen(name) + 1);
  }
  void typed(std::uint64_t object, std::uint64_t type_at) {
    image.pointer(l.object_type.in(object), type_at);
  }
  // A compact ASCII str; returns its offset.
  std::uint64_t str(const std::string& text) {
    const std::uint64_t at = next_string;
    next_string += 0x80;
    typed(at, kTypes + 0x100);
    image.put<std::int64_t>(l.unicode_length.in(at), static_cast<std::int64_t>(text.size()));
    image.put<std::uint32_t>(l.unicode_state.in(at), (1u << 2) | (1u << 5) | (1u << 6));
    image.put_bytes(at + l.unicode_ascii_data, text.data(), text.size());
    return at;
  }
  std::uint64_t bytes(const std::vector<std::uint8_t>& data) {
    const std::uint64_t at = next_string;
    next_string += 0x80;
    typed(at, kTypes + 0x200);
    image.put<std::int64_t>(l.var_size.in(at), static_cast<std::int64_t>(data.size()));
    image.put_bytes(l.bytes_data.in(at), data.data(), data.size());
    return at;
  }
  std::uint64_t tuple(const std::vector<std::uint64_t>& items) {
    const std::uint64_t at = next_string;
    next_string += 0x80;
    typed(at, kTypes + 0x300);
    image.put<std::int64_t>(l.var_size.in(at), static_cast<std::int64_t>(items.size()));
    for (std::size_t i = 0; i < items.size(); ++i) {
      image.pointer(l.tuple_items.item(at, i), items[i]);
    }
    return at;
  }
  // A code object with two locals (x, name) whose line table puts units 4-7 two lines and
  // units 8-11 five lines after the first.
  void code(std::uint64_t at, const std::string& name, int first_line) {
    typed(at, kTypes);
    image.pointer(l.code_filename.in(at), str("/srv/vllm/distributed/parallel_state.py"));
    image.pointer(l.code_name.in(at), str(name));
    if (l.code_qualname) image.pointer(l.code_qualname->in(at), str("GroupCoordinator." + name));
    image.put<std::int32_t>(l.code_firstlineno.in(at), first_line);
    if (l.code_firsttraceable) image.put<std::int32_t>(l.code_firsttraceable->in(at), 0);
    const std::vector<std::uint8_t> table =
        l.line_encoding == python::LineEncoding::kLocationTable
            ? std::vector<std::uint8_t>{0x80 | (1 << 3) | 3,  0x00, 0x80 | (12 << 3) | 3, 1, 2,
                                        0x80 | (13 << 3) | 3, 10}
            : std::vector<std::uint8_t>{8, 0, 8, 2, 8, 3};  // 3.10: (bytes, line delta) pairs
    image.pointer(l.code_linetable.in(at), bytes(table));
    const auto names = tuple({str("x"), str("name")});
    if (l.locals_names == python::LocalsNames::kLocalsPlus) {
      image.pointer(l.code_localsplusnames->in(at), names);
      image.pointer(l.code_localspluskinds->in(at), bytes({0x20, 0x20}));  // CO_FAST_LOCAL
    } else {
      image.pointer(l.code_varnames->in(at), names);
      image.pointer(l.code_cellvars->in(at), tuple({}));
      image.pointer(l.code_freevars->in(at), tuple({}));
    }
  }
  // A frame running `code` at code unit `unit`, its locals x = 42 and name = 'worker'.
  void frame(std::uint64_t at, std::uint64_t code_at, int unit, std::uint64_t previous,
             std::uint8_t owner, bool entry) {
    image.pointer(l.frame_code.in(at), code_at);
    if (l.stack_refs && entry) image.put(l.frame_code.in(at), kBase + code_at + 1);
    if (previous) image.pointer(l.frame_previous.in(at), previous);
    if (l.frame_kind == python::FrameKind::kInterpreterFrame) {
      image.put<std::uint64_t>(
          l.frame_instr_ptr->in(at),
          kBase + l.code_code_adaptive->in(code_at) + 2 * static_cast<std::uint64_t>(unit));
      image.put<std::uint8_t>(l.frame_owner->in(at), owner);
    } else {
      image.put<std::int32_t>(l.frame_lasti->in(at), unit);  // f_lasti, in code units
    }
    if (l.eval_calls == python::EvalCalls::kEntryFlag) {
      image.put<std::uint8_t>(l.frame_is_entry->in(at), entry ? 1 : 0);
    }
    image.pointer(l.frame_localsplus.item(at, 0), kValues);
    image.pointer(l.frame_localsplus.item(at, 1), kValues + 0x40);
  }
};

std::vector<std::uint8_t> python_image(int minor) {
  Image image;
  python::Layout layout;
  if (minor >= 13) {
    write_debug_offsets(image, minor);
    std::vector<std::byte> table(python::debug_offsets_size({3, minor, 0, 0}));
    std::memcpy(table.data(), image.bytes().data(), table.size());
    layout = python::layout_from_debug_offsets(table);
  } else {
    layout = *python::builtin_layout({3, minor, 0, 0});
  }
  const auto& l = layout;
  ImageWriter w{image, l};
  w.type(kTypes, "code");
  w.type(kTypes + 0x100, "str");
  w.type(kTypes + 0x200, "bytes");
  w.type(kTypes + 0x300, "tuple");
  w.type(kTypes + 0x400, "int");

  image.pointer(l.runtime_interpreters_head.offset, kInterp);
  image.pointer(l.interp_threads_head.in(kInterp), kThread);
  // The GIL, held by the thread.
  std::uint64_t gil = kGil;
  if (l.gil_place == python::GilPlace::kRuntime) {
    gil = *l.runtime_gil;
  } else {
    image.pointer(l.interp_gil_pointer->in(kInterp), kGil);
  }
  image.put<std::int32_t>(l.gil_locked.in(gil), 1);
  image.pointer(l.gil_last_holder.in(gil), kThread);

  image.put<std::uint64_t>(l.tstate_thread_id.in(kThread), 0x7f00deadb000);
  if (l.tstate_native_thread_id)
    image.put<std::int64_t>(l.tstate_native_thread_id->in(kThread), 4242);
  if (l.frame_link == python::FrameLink::kCFrame) {
    image.pointer(l.tstate_frame.in(kThread), kCFrame);
    image.pointer(l.cframe_current_frame.in(kCFrame), kFrame1);
  } else {
    image.pointer(l.tstate_frame.in(kThread), kFrame1);
  }
  // Innermost frame (unit 5: first line + 2), a C-stack shim (3.12+), the outer frame (unit 9).
  const bool shims = minor >= 12;
  w.frame(kFrame1, kCode1, 5, shims ? kShim : kFrame2, 0, false);
  if (shims) {
    image.pointer(l.frame_previous.in(kShim), kFrame2);
    image.put<std::uint8_t>(l.frame_owner->in(kShim), minor >= 14 ? 4 : 3);
  }
  w.frame(kFrame2, kCode2, 9, 0, 0, true);
  w.code(kCode1, "barrier", 1100);
  w.code(kCode2, "broadcast_object", 1230);
  // Locals: x = 42 (an int at kValues), name = 'worker' (a str at kValues + 0x40).
  w.typed(kValues, kTypes + 0x400);
  image.put<std::int64_t>(l.var_size.in(kValues),
                          l.long_format == python::LongFormat::kTagged ? (1 << 3) : 1);
  image.put<std::uint32_t>(l.long_digits.in(kValues), 42);
  w.typed(kValues + 0x40, kTypes + 0x100);
  image.put<std::int64_t>(l.unicode_length.in(kValues + 0x40), 6);
  image.put<std::uint32_t>(l.unicode_state.in(kValues + 0x40), (1u << 2) | (1u << 5) | (1u << 6));
  image.put_bytes(kValues + 0x40 + l.unicode_ascii_data, "worker", 6);

  std::vector<std::uint8_t> out = {static_cast<std::uint8_t>(minor - 10), 1};  // version, locals
  out.insert(out.end(), image.bytes().begin(), image.bytes().end());
  return out;
}

// Walks an image as python_frames_fuzz does and prints what it finds (checks a seed).
void check_python(const std::string& path) {
  const auto read = read_file(path);
  if (!read.text || read.text->size() < 2) throw Error("cannot read " + path);
  const std::string& text = *read.text;
  const int minor = 10 + static_cast<unsigned char>(text[0]) % 5;
  memory::BufferMemory image(kBase, reinterpret_cast<const std::byte*>(text.data() + 2),
                             text.size() - 2);
  proc::Mapping mapping;
  mapping.start = kBase;
  mapping.end = kBase + text.size() - 2;
  mapping.readable = true;
  const proc::MemoryMap maps({mapping});
  python::Layout layout;
  if (minor >= 13) {
    std::vector<std::byte> table(python::debug_offsets_size({3, minor, 0, 0}));
    image.read_exact(kBase, table.data(), table.size());
    layout = python::layout_from_debug_offsets(table);
  } else {
    layout = *python::builtin_layout({3, minor, 0, 0});
  }
  python::ObjectReader objects(image, maps, layout);
  python::StackReader reader(objects, kBase, {.locals = (text[1] & 1) != 0});
  for (const auto& t : reader.read_threads()) {
    std::cout << "3." << minor << " thread " << t.native_thread_id.value_or(0)
              << (t.holds_gil ? " (GIL)" : "") << (t.error ? " error: " + t.error->text : "")
              << "\n";
    for (const auto& f : t.frames) {
      std::cout << "  " << f.qualname << " " << f.file << ":" << f.line
                << (f.eval_entry ? " [entry]" : "");
      for (const auto& [name, value] : f.locals) std::cout << " " << name << "=" << value;
      std::cout << "\n";
    }
  }
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "snapshots" && argc == 4) {
      snapshots(argv[2], argv[3]);
    } else if (mode == "convert" && argc == 4) {
      snapshot::write_file(argv[3], snapshot::read_file(argv[2]));
    } else if (mode == "python" && argc == 3) {
      for (int minor = 10; minor <= 14; ++minor) {
        write_bytes(std::string(argv[2]) + "/cpython_3_" + std::to_string(minor) + ".img",
                    python_image(minor));
      }
    } else if (mode == "check-python" && argc == 3) {
      check_python(argv[2]);
    } else {
      std::cerr << "usage: hangscope_fuzz_seeds snapshots CORPUS_DIR SOURCE_DIR\n"
                   "       hangscope_fuzz_seeds convert IN.json OUT.pb\n"
                   "       hangscope_fuzz_seeds python OUT_DIR\n"
                   "       hangscope_fuzz_seeds check-python IMAGE\n";
      return 2;
    }
  } catch (const Error& e) {
    std::cerr << "hangscope_fuzz_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
