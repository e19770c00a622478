#include "hangscope/python/stack_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "hangscope/common/error.h"
#include "hangscope/python/line_table.h"

namespace hangscope::python {
namespace {

// A field of a copied frame or code object header, or T{} when it lies outside the copy.
template <typename T>
T field(const std::vector<std::uint8_t>& bytes, memory::FieldOffset<T> offset) {
  return memory::field_in(std::span<const std::uint8_t>(bytes), offset).value_or(T{});
}

// The frame's current instruction: its index (3.10's f_lasti) or its address (3.11+ prev_instr /
// instr_ptr), as the layout says.
std::uint64_t instruction_of(const std::vector<std::uint8_t>& frame, const Layout& layout) {
  switch (layout.frame_kind) {
    case FrameKind::kFrameObject:
      return static_cast<std::uint64_t>(field(frame, *layout.frame_lasti));
    case FrameKind::kInterpreterFrame:
      return field(frame, *layout.frame_instr_ptr);
  }
  return 0;
}

constexpr std::uint64_t kCodeUnit = 2;      // sizeof(_Py_CODEUNIT)
constexpr std::uint8_t kFastHidden = 0x10;  // CO_FAST_HIDDEN (3.12+): comprehension temporaries
constexpr std::uint8_t kFastCell = 0x40;
constexpr std::uint8_t kFastFree = 0x80;

}  // namespace

bool torn(const PyThread& thread) {
  switch (thread.end) {
    case WalkEnd::kComplete:  // whole, unless a frame's code object could not be read
      return thread.error && thread.error->code == DiagnosticCode::kDamagedFrame;
    case WalkEnd::kFrameLimit:  // cut where the caller asked: the frames read are sound
      return false;
    default:  // an unreadable frame or a loop: the chain changed under the read
      return true;
  }
}

std::vector<PyThread> StackReader::read_threads() {
  const auto interp = objects_.read_field(runtime_, layout_.runtime_interpreters_head);
  if (!interp || *interp == 0) {
    throw Error("the Python interpreter is not initialised (or is shutting down)");
  }
  if (!objects_.plausible(*interp)) {
    throw Error("_PyRuntime does not match the CPython " + layout_.version.to_string() + " layout");
  }
  const auto holder = gil_holder(*interp);
  const auto names =
      options_.thread_names ? thread_names(*interp) : std::map<std::uint64_t, std::string>{};
  std::vector<PyThread> threads;
  std::set<std::uint64_t> seen;
  auto tstate = objects_.read_field(*interp, layout_.interp_threads_head);
  while (tstate && *tstate != 0 && threads.size() < options_.max_threads) {
    if (!objects_.plausible(*tstate) || !seen.insert(*tstate).second) break;
    PyThread thread;
    thread.tstate = *tstate;
    thread.thread_id = objects_.read_field(*tstate, layout_.tstate_thread_id).value_or(0);
    if (layout_.tstate_native_thread_id) {  // 3.10 has none
      const auto native = objects_.read_field(*tstate, *layout_.tstate_native_thread_id);
      if (native && static_cast<std::int64_t>(*native) > 0) {
        thread.native_thread_id = static_cast<std::int64_t>(*native);
      }
    }
    thread.holds_gil = holder && *holder == *tstate;
    if (const auto it = names.find(thread.thread_id); it != names.end()) thread.name = it->second;
    if (const auto frame = first_frame(*tstate)) walk_frames(*frame, thread);
    threads.push_back(std::move(thread));
    tstate = objects_.read_field(*tstate, layout_.tstate_next);
  }
  return threads;
}

std::optional<std::uint64_t> StackReader::gil_holder(std::uint64_t interp) {
  std::optional<std::uint64_t> gil;
  switch (layout_.gil_place) {
    case GilPlace::kRuntime:
      gil = runtime_ + *layout_.runtime_gil;
      break;
    case GilPlace::kInterpreter:
      gil = objects_.read_field(interp, *layout_.interp_gil_pointer);
      break;
  }
  if (!gil || *gil == 0) return std::nullopt;
  if (objects_.read_field(*gil, layout_.gil_locked) != 1) return std::nullopt;
  return objects_.read_field(*gil, layout_.gil_last_holder);
}

std::map<std::uint64_t, std::string> StackReader::thread_names(std::uint64_t interp) {
  std::map<std::uint64_t, std::string> names;
  const auto modules = objects_.read_field(interp, layout_.interp_modules);
  if (!modules || !objects_.plausible(*modules)) return names;
  const auto threading = objects_.dict_get(*modules, "threading");
  if (!threading) return names;  // threading was never imported
  const auto globals = objects_.read_field(*threading, layout_.module_dict);
  if (!globals || !objects_.plausible(*globals)) return names;
  const auto active = objects_.dict_get(*globals, "_active");
  if (!active || !objects_.plausible(*active)) return names;
  for (const auto& [ident, thread] : objects_.dict_items(*active, options_.max_threads)) {
    const auto id = objects_.int_value(ident);
    const auto name = objects_.attribute(thread, "_name");
    if (!id || !name) continue;
    if (auto text = objects_.string(*name, 256)) names[*id] = std::move(*text);
  }
  return names;
}

std::optional<std::uint64_t> StackReader::first_frame(std::uint64_t tstate) {
  auto pointer = objects_.read_field(tstate, layout_.tstate_frame);
  if (!pointer || *pointer == 0) return std::nullopt;
  if (layout_.frame_link == FrameLink::kCFrame) {
    pointer = objects_.read_field(*pointer, layout_.cframe_current_frame);
    if (!pointer || *pointer == 0) return std::nullopt;
  }
  return pointer;
}

const StackReader::CodeInfo& StackReader::code_info(std::uint64_t code) {
  if (const auto it = codes_.find(code); it != codes_.end()) return it->second;
  CodeInfo& info = codes_[code];
  std::vector<std::uint8_t> header(layout_.code_size);
  if (options_.codes != nullptr) {
    // A session's earlier decoding of this code object, when its header still says the same.
    const auto cached = options_.codes->find(code);
    if (cached != options_.codes->end() && (cached->second.with_locals || !options_.locals) &&
        objects_.read(code, header.data(), header.size()) &&
        field(header, layout_.code_name) == cached->second.name &&
        field(header, layout_.code_filename) == cached->second.file &&
        field(header, layout_.code_linetable) == cached->second.line_table &&
        static_cast<int>(field(header, layout_.code_firstlineno)) == cached->second.first_line) {
      info = *std::static_pointer_cast<CodeInfo>(cached->second.info);
      return info;
    }
  }
  if (objects_.type_name(code) != "code" || !objects_.read(code, header.data(), header.size())) {
    return info;
  }
  struct Remember {  // the decoded code object goes into the session's cache when valid
    StackReader& reader;
    std::uint64_t code;
    const std::vector<std::uint8_t>& header;
    CodeInfo& info;
    ~Remember() {
      if (reader.options_.codes == nullptr || !info.valid) return;
      auto& entry = (*reader.options_.codes)[code];
      entry.name = field(header, reader.layout_.code_name);
      entry.file = field(header, reader.layout_.code_filename);
      entry.line_table = field(header, reader.layout_.code_linetable);
      entry.first_line = static_cast<int>(field(header, reader.layout_.code_firstlineno));
      entry.with_locals = reader.options_.locals;
      entry.info = std::make_shared<CodeInfo>(info);
    }
  } remember{*this, code, header, info};
  const auto name = objects_.string(field(header, layout_.code_name));
  const auto file = objects_.string(field(header, layout_.code_filename), 4096);
  const auto table = objects_.bytes(field(header, layout_.code_linetable));
  if (!name || !file || !table) return info;
  info.name = *name;
  info.file = *file;
  info.line_table = *table;
  info.first_line = field(header, layout_.code_firstlineno);
  info.qualname = info.name;
  if (layout_.code_qualname) {  // 3.10 has none: co_name is shown
    if (auto q = objects_.string(field(header, *layout_.code_qualname))) info.qualname = *q;
  }
  if (layout_.code_firsttraceable) {  // not in 3.14's debug table: 0
    info.first_traceable = field(header, *layout_.code_firsttraceable);
  }
  if (options_.locals) {
    std::vector<RemoteAddress> name_tuples;
    switch (layout_.locals_names) {
      case LocalsNames::kLocalsPlus:
        name_tuples.push_back(field(header, *layout_.code_localsplusnames));
        info.local_kinds =
            objects_.bytes(field(header, *layout_.code_localspluskinds)).value_or("");
        break;
      case LocalsNames::kSeparateTuples:
        for (const auto& offset :
             {*layout_.code_varnames, *layout_.code_cellvars, *layout_.code_freevars}) {
          name_tuples.push_back(field(header, offset));
        }
        break;
    }
    for (const auto tuple : name_tuples) {
      const auto count = objects_.var_size(tuple);
      for (std::int64_t i = 0; count && i < std::min<std::int64_t>(*count, 512); ++i) {
        const auto item = objects_.tuple_item(tuple, i);
        info.local_names.push_back(item ? objects_.string(*item, 256).value_or("?") : "?");
      }
    }
  }
  info.valid = true;
  return info;
}

int StackReader::line_of(const CodeInfo& code, std::uint64_t code_address,
                         std::uint64_t instr) const {
  const auto table = std::as_bytes(std::span(code.line_table.data(), code.line_table.size()));
  std::optional<int> line;
  // Offsets past what an int holds are past every table (a torn or corrupt frame): clamped.
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  // The instruction's index in code units (-1: the frame has not started).
  std::int64_t unit = -1;
  switch (layout_.frame_kind) {
    case FrameKind::kFrameObject: {
      const std::int64_t lasti = static_cast<std::int32_t>(instr);  // f_lasti, in code units
      unit = lasti < 0 ? -1 : std::min(lasti, kMax);
      break;
    }
    case FrameKind::kInterpreterFrame: {
      const std::uint64_t start = layout_.code_code_adaptive->in(code_address);
      unit = instr < start ? -1
                           : static_cast<std::int64_t>(
                                 std::min<std::uint64_t>((instr - start) / kCodeUnit, kMax));
      break;
    }
  }
  switch (layout_.line_encoding) {
    case LineEncoding::kLineTable310:  // by byte offset
      line = line_for_offset_310(table, code.first_line,
                                 static_cast<int>(unit < 0 ? -1 : std::min(unit * 2, kMax)));
      break;
    case LineEncoding::kLocationTable:  // by code unit
      line = line_for_offset_311(table, code.first_line, static_cast<int>(unit));
      break;
  }
  return line.value_or(0);
}

void StackReader::read_locals(const CodeInfo& code, std::uint64_t frame_address, PyFrame& frame) {
  for (std::size_t i = 0; i < code.local_names.size(); ++i) {
    const auto kind =
        i < code.local_kinds.size() ? static_cast<std::uint8_t>(code.local_kinds[i]) : 0;
    if (kind & kFastHidden) continue;
    auto value = objects_.pointer_at(layout_.frame_localsplus.item(frame_address, i));
    if (!value || *value == 0) continue;  // unbound
    if (layout_.stack_refs) *value &= ~std::uint64_t{3};
    // Cells hold the value one level down (3.10: every cell/free slot; 3.11+: by kind).
    const bool cell = layout_.locals_names == LocalsNames::kLocalsPlus
                          ? (kind & (kFastCell | kFastFree)) != 0
                          : objects_.type_name(*value) == "cell";
    if (cell) {
      value = objects_.read_field(*value, layout_.cell_ref);
      if (!value || *value == 0) continue;
    }
    if (options_.observer != nullptr)
      options_.observer->local(code.local_names[i], *value, objects_);
    frame.locals.emplace_back(code.local_names[i], objects_.repr(*value));
  }
}

std::optional<PyFrame> StackReader::read_frame(std::uint64_t frame_address) {
  std::vector<std::uint8_t> frame(layout_.frame_size);
  if (!objects_.plausible(frame_address) ||
      !objects_.read(frame_address, frame.data(), frame.size())) {
    return std::nullopt;
  }
  std::uint64_t code = field(frame, layout_.frame_code);
  if (layout_.stack_refs) code &= ~std::uint64_t{3};
  const CodeInfo& info = code_info(code);
  if (!info.valid) return std::nullopt;
  const std::uint64_t instr = instruction_of(frame, layout_);
  PyFrame py;
  py.function = info.name;
  py.qualname = info.qualname;
  py.file = info.file;
  py.line = line_of(info, code, instr);
  if (options_.locals) read_locals(info, frame_address, py);
  return py;
}

void StackReader::walk_frames(std::uint64_t frame_address, PyThread& thread) {
  std::set<std::uint64_t> seen;
  std::vector<std::uint8_t> frame(layout_.frame_size);
  std::uint64_t address = frame_address;
  while (address != 0) {
    if (thread.frames.size() >= options_.max_frames) {
      thread.end = WalkEnd::kFrameLimit;
      thread.error =
          Diagnostic{DiagnosticCode::kStackCut,
                     "stopped after " + std::to_string(options_.max_frames) + " Python frames"};
      return;
    }
    const bool readable = objects_.plausible(address);
    const bool again = readable && !seen.insert(address).second;
    if (!readable || again || !objects_.read(address, frame.data(), frame.size())) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(address));
      thread.end = again ? WalkEnd::kLoop : WalkEnd::kUnreadableMemory;
      thread.error =
          Diagnostic{DiagnosticCode::kStackBroken, std::string("frame chain broken at ") + hex};
      return;
    }
    const auto previous = field(frame, layout_.frame_previous);
    std::uint64_t code = field(frame, layout_.frame_code);
    if (layout_.stack_refs) code &= ~std::uint64_t{3};
    const int owner =
        layout_.frame_kind == FrameKind::kInterpreterFrame ? field(frame, *layout_.frame_owner) : 0;
    if (owner >= layout_.owner_shim_first) {
      // A shim between two native eval calls: the Python frame before it started an eval call.
      if (!thread.frames.empty()) thread.frames.back().eval_entry = true;
      address = previous;
      continue;
    }
    const CodeInfo& info = code_info(code);
    bool entry = false;  // kShimFrames: the shim under the frame says so
    switch (layout_.eval_calls) {
      case EvalCalls::kFramePerCall:
        entry = true;
        break;
      case EvalCalls::kEntryFlag:
        entry = field(frame, *layout_.frame_is_entry) != 0;
        break;
      case EvalCalls::kShimFrames:
        break;
    }
    if (!info.valid) {
      // The frame chain is intact: name the damaged frame and go on to its callers.
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(code));
      if (!thread.error) {
        thread.error = Diagnostic{DiagnosticCode::kDamagedFrame,
                                  std::string("unreadable code object ") + hex + " in frame " +
                                      std::to_string(thread.frames.size()) +
                                      " (torn read, damaged interpreter state or unknown layout)"};
      }
      PyFrame damaged;
      damaged.function = damaged.qualname = std::string("<unreadable code object ") + hex + ">";
      damaged.eval_entry = entry;
      thread.frames.push_back(std::move(damaged));
      address = previous;
      continue;
    }
    const std::uint64_t instr = instruction_of(frame, layout_);
    // Frames still being set up are not shown by CPython either (_PyFrame_IsIncomplete).
    // (32-bit arithmetic as before: a corrupt negative index stays a small wrap.)
    const bool incomplete =
        layout_.frame_kind == FrameKind::kInterpreterFrame && owner != layout_.owner_generator &&
        instr < layout_.code_code_adaptive->in(code) +
                    static_cast<unsigned>(kCodeUnit) * static_cast<unsigned>(info.first_traceable);
    if (!incomplete) {
      PyFrame py;
      py.function = info.name;
      py.qualname = info.qualname;
      py.file = info.file;
      py.line = line_of(info, code, instr);
      py.eval_entry = entry;
      if (options_.locals) read_locals(info, address, py);
      thread.frames.push_back(std::move(py));
    }
    address = previous;
  }
  if (!thread.frames.empty()) thread.frames.back().eval_entry = true;
}

}  // namespace hangscope::python
