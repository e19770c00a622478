#include "hangscope/python/layout.h"

#include <cstring>

#include "hangscope/common/error.h"

namespace hangscope::python {
namespace {

// Offsets measured from each version's headers (offsetof, cross-checked against the DWARF of
// pyenv's libpython builds); see docs/python-capture.md.
Layout layout_310() {
  Layout l;
  l.runtime_interpreters_head = 32;
  l.runtime_gil = 352;
  l.interp_next = 0;
  l.interp_threads_head = 8;
  l.interp_modules = 856;
  l.tstate_next = 8;
  l.tstate_interp = 16;
  l.tstate_thread_id = 176;
  l.frame_link = FrameLink::kFrameObject;
  l.tstate_frame = 24;
  l.frame_size = 360;
  l.frame_previous = 24;  // f_back
  l.frame_code = 32;
  l.frame_instr = 96;  // int f_lasti, in code units
  l.frame_localsplus = 352;
  l.code_size = 176;
  l.code_filename = 104;
  l.code_name = 112;
  l.code_firstlineno = 40;
  l.code_linetable = 120;
  l.code_varnames = 72;
  l.code_freevars = 80;
  l.code_cellvars = 88;
  l.unicode_ascii_data = 48;
  l.unicode_compact_data = 72;
  l.unicode_legacy_data = 72;
  l.dict_keys_310 = true;
  l.heap_type_cached_keys = 872;
  return l;
}

Layout layout_311() {
  Layout l;
  l.runtime_interpreters_head = 40;
  l.runtime_gil = 360;
  l.interp_next = 0;
  l.interp_threads_head = 16;
  l.interp_modules = 888;
  l.tstate_next = 8;
  l.tstate_interp = 16;
  l.tstate_thread_id = 152;
  l.tstate_native_thread_id = 160;
  l.frame_link = FrameLink::kCFrame;
  l.tstate_frame = 56;
  l.cframe_current_frame = 8;
  l.frame_size = 72;
  l.frame_code = 32;
  l.frame_previous = 48;
  l.frame_instr = 56;  // prev_instr
  l.frame_is_entry = 68;
  l.frame_owner = 69;
  l.frame_localsplus = 72;
  l.owner_shim_first = 3;  // 3.11 has no shim frames; owners are 0..2
  l.code_size = 184;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_firstlineno = 72;
  l.code_linetable = 136;
  l.code_code_adaptive = 184;
  l.code_firsttraceable = 168;
  l.code_localsplusnames = 96;
  l.code_localspluskinds = 104;
  l.unicode_ascii_data = 48;
  l.unicode_compact_data = 72;
  l.unicode_legacy_data = 72;
  l.heap_type_cached_keys = 872;
  l.managed_dict = Layout::ManagedDict::kValuesAtMinus4;
  return l;
}

Layout layout_312() {
  Layout l;
  l.runtime_interpreters_head = 40;
  l.interp_next = 0;
  l.interp_threads_head = 72;
  l.interp_gil_pointer = 384;
  l.interp_modules = 944;
  l.tstate_next = 8;
  l.tstate_interp = 16;
  l.tstate_thread_id = 136;
  l.tstate_native_thread_id = 144;
  l.frame_link = FrameLink::kCFrame;
  l.tstate_frame = 56;
  l.cframe_current_frame = 0;
  l.frame_size = 72;
  l.frame_code = 0;
  l.frame_previous = 8;
  l.frame_instr = 56;  // prev_instr
  l.frame_owner = 70;
  l.frame_localsplus = 72;
  l.code_size = 192;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_firstlineno = 68;
  l.code_linetable = 136;
  l.code_code_adaptive = 192;
  l.code_firsttraceable = 176;
  l.code_localsplusnames = 96;
  l.code_localspluskinds = 104;
  l.unicode_ascii_data = 40;
  l.unicode_compact_data = 56;
  l.unicode_legacy_data = 56;
  l.long_has_tag = true;
  l.heap_type_cached_keys = 880;
  l.managed_dict = Layout::ManagedDict::kTaggedAtMinus3;
  return l;
}

// Positions of the fields hangscope uses inside _Py_DebugOffsets, per minor version.
struct TablePositions {
  std::size_t size;
  std::size_t runtime_interpreters_head;
  std::size_t interp_next, interp_threads_head, interp_imports_modules, interp_ceval_gil,
      interp_gil_runtime_state, interp_gil_locked, interp_gil_holder;
  std::size_t ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_thread_id;
  std::size_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_localsplus, fr_owner;
  std::size_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno,
      co_localsplusnames, co_localspluskinds, co_code_adaptive;
  std::size_t ob_type, tp_name, tp_flags, tuple_ob_item, list_ob_item, dict_ma_keys, dict_ma_values,
      float_fval, long_digit, bytes_ob_sval, unicode_state, unicode_length, unicode_ascii_size;
};

constexpr TablePositions kTable313{.size = 584,
                                   .runtime_interpreters_head = 40,
                                   .interp_next = 64,
                                   .interp_threads_head = 72,
                                   .interp_imports_modules = 88,
                                   .interp_ceval_gil = 112,
                                   .interp_gil_runtime_state = 120,
                                   .interp_gil_locked = 136,
                                   .interp_gil_holder = 144,
                                   .ts_next = 168,
                                   .ts_interp = 176,
                                   .ts_current_frame = 184,
                                   .ts_thread_id = 192,
                                   .ts_native_thread_id = 200,
                                   .fr_size = 224,
                                   .fr_previous = 232,
                                   .fr_executable = 240,
                                   .fr_instr_ptr = 248,
                                   .fr_localsplus = 256,
                                   .fr_owner = 264,
                                   .co_size = 272,
                                   .co_filename = 280,
                                   .co_name = 288,
                                   .co_qualname = 296,
                                   .co_linetable = 304,
                                   .co_firstlineno = 312,
                                   .co_localsplusnames = 328,
                                   .co_localspluskinds = 336,
                                   .co_code_adaptive = 344,
                                   .ob_type = 360,
                                   .tp_name = 376,
                                   .tp_flags = 392,
                                   .tuple_ob_item = 408,
                                   .list_ob_item = 432,
                                   .dict_ma_keys = 456,
                                   .dict_ma_values = 464,
                                   .float_fval = 480,
                                   .long_digit = 504,
                                   .bytes_ob_sval = 528,
                                   .unicode_state = 544,
                                   .unicode_length = 552,
                                   .unicode_ascii_size = 560};

// 3.14 adds threads_main, code_object_generation, tlbc_generation, stackpointer, tlbc_index,
// co_tlbc, set_object, gen_object, llist_node and debugger_support (see docs/python-capture.md).
constexpr TablePositions kTable314{.size = 760,
                                   .runtime_interpreters_head = 40,
                                   .interp_next = 64,
                                   .interp_threads_head = 72,
                                   .interp_imports_modules = 96,
                                   .interp_ceval_gil = 120,
                                   .interp_gil_runtime_state = 128,
                                   .interp_gil_locked = 144,
                                   .interp_gil_holder = 152,
                                   .ts_next = 192,
                                   .ts_interp = 200,
                                   .ts_current_frame = 208,
                                   .ts_thread_id = 216,
                                   .ts_native_thread_id = 224,
                                   .fr_size = 248,
                                   .fr_previous = 256,
                                   .fr_executable = 264,
                                   .fr_instr_ptr = 272,
                                   .fr_localsplus = 280,
                                   .fr_owner = 288,
                                   .co_size = 312,
                                   .co_filename = 320,
                                   .co_name = 328,
                                   .co_qualname = 336,
                                   .co_linetable = 344,
                                   .co_firstlineno = 352,
                                   .co_localsplusnames = 368,
                                   .co_localspluskinds = 376,
                                   .co_code_adaptive = 384,
                                   .ob_type = 408,
                                   .tp_name = 424,
                                   .tp_flags = 440,
                                   .tuple_ob_item = 456,
                                   .list_ob_item = 480,
                                   .dict_ma_keys = 536,
                                   .dict_ma_values = 544,
                                   .float_fval = 560,
                                   .long_digit = 584,
                                   .bytes_ob_sval = 608,
                                   .unicode_state = 624,
                                   .unicode_length = 632,
                                   .unicode_ascii_size = 640};

std::uint64_t table_u64(std::span<const std::byte> table, std::size_t at) {
  std::uint64_t value = 0;
  std::memcpy(&value, table.data() + at, sizeof value);
  return value;
}

}  // namespace

std::optional<Layout> builtin_layout(const PythonVersion& version) {
  if (version.major != 3) return std::nullopt;
  std::optional<Layout> layout;
  switch (version.minor) {
    case 10:
      layout = layout_310();
      break;
    case 11:
      layout = layout_311();
      break;
    case 12:
      layout = layout_312();
      break;
    default:
      return std::nullopt;
  }
  layout->version = version;
  return layout;
}

std::size_t debug_offsets_size(const PythonVersion& version) {
  if (version.major != 3) return 0;
  if (version.minor == 13) return kTable313.size;
  if (version.minor == 14) return kTable314.size;
  return 0;
}

Layout layout_from_debug_offsets(std::span<const std::byte> table) {
  if (table.size() < 24 || std::memcmp(table.data(), "xdebugpy", 8) != 0) {
    throw Error("_PyRuntime does not start with the _Py_DebugOffsets cookie \"xdebugpy\"");
  }
  const PythonVersion version = PythonVersion::from_hex(table_u64(table, 8));
  if (table_u64(table, 16) != 0) {
    throw Error("free-threaded CPython " + version.to_string() + " is not supported yet");
  }
  const TablePositions* p = nullptr;
  if (version.major == 3 && version.minor == 13) p = &kTable313;
  if (version.major == 3 && version.minor == 14) p = &kTable314;
  if (p == nullptr) {
    throw Error("CPython " + version.to_string() + " is not supported (known: 3.10 to 3.14)");
  }
  if (table.size() < p->size) throw Error("_Py_DebugOffsets table is truncated");
  const auto at = [&](std::size_t position) { return table_u64(table, position); };

  Layout l;
  l.version = version;
  l.runtime_interpreters_head = at(p->runtime_interpreters_head);
  l.interp_next = at(p->interp_next);
  l.interp_threads_head = at(p->interp_threads_head);
  l.interp_modules = at(p->interp_imports_modules);
  l.interp_gil_pointer = at(p->interp_ceval_gil);
  l.gil_locked = at(p->interp_gil_locked) - at(p->interp_gil_runtime_state);
  l.gil_last_holder = at(p->interp_gil_holder) - at(p->interp_gil_runtime_state);
  l.tstate_next = at(p->ts_next);
  l.tstate_interp = at(p->ts_interp);
  l.tstate_thread_id = at(p->ts_thread_id);
  l.tstate_native_thread_id = at(p->ts_native_thread_id);
  l.frame_link = FrameLink::kDirect;
  l.tstate_frame = at(p->ts_current_frame);
  l.frame_size = at(p->fr_localsplus);  // everything before the locals
  l.frame_previous = at(p->fr_previous);
  l.frame_code = at(p->fr_executable);
  l.frame_instr = at(p->fr_instr_ptr);
  l.frame_localsplus = at(p->fr_localsplus);
  l.frame_owner = at(p->fr_owner);
  l.owner_shim_first = 3;  // 3.13: CSTACK = 3; 3.14: INTERPRETER = 3, CSTACK = 4
  l.executable_is_stackref = version.minor >= 14;
  l.code_size = at(p->co_code_adaptive);
  l.code_filename = at(p->co_filename);
  l.code_name = at(p->co_name);
  l.code_qualname = at(p->co_qualname);
  l.code_firstlineno = at(p->co_firstlineno);
  l.code_linetable = at(p->co_linetable);
  l.code_code_adaptive = at(p->co_code_adaptive);
  if (version.minor == 13) l.code_firsttraceable = 184;  // not in the table; from 3.13's headers
  l.code_localsplusnames = at(p->co_localsplusnames);
  l.code_localspluskinds = at(p->co_localspluskinds);
  l.object_type = at(p->ob_type);
  l.type_name = at(p->tp_name);
  l.tuple_items = at(p->tuple_ob_item);
  l.list_items = at(p->list_ob_item);
  l.dict_keys = at(p->dict_ma_keys);
  l.dict_values = at(p->dict_ma_values);
  l.float_value = at(p->float_fval);
  l.long_digits = at(p->long_digit);
  l.long_has_tag = true;
  l.bytes_data = at(p->bytes_ob_sval);
  l.unicode_state = at(p->unicode_state);
  l.unicode_length = at(p->unicode_length);
  l.unicode_ascii_data = at(p->unicode_ascii_size);
  l.unicode_compact_data = l.unicode_ascii_data + 16;  // + utf8_length, utf8
  l.unicode_legacy_data = l.unicode_compact_data;
  l.dict_values_items = 8;
  l.type_flags = at(p->tp_flags);
  l.heap_type_cached_keys = 880;  // not in the table; PyTypeObject is 416 bytes in 3.13 and 3.14
  l.managed_dict = Layout::ManagedDict::kInlineValues;
  // Every offset is used to read a few bytes at it, and the frame and code sizes are how much
  // is copied per frame and code object: reject tables that point far away.
  for (const std::uint64_t offset :
       {l.frame_previous, l.frame_code, l.frame_instr, *l.frame_owner, l.frame_size,
        l.frame_localsplus, l.code_filename, l.code_name, *l.code_qualname, l.code_firstlineno,
        l.code_linetable, *l.code_localsplusnames, *l.code_localspluskinds, l.code_size,
        l.tstate_frame, l.tstate_thread_id, *l.tstate_native_thread_id}) {
    if (offset > 4096) throw Error("_Py_DebugOffsets holds an implausible offset");
  }
  return l;
}

}  // namespace hangscope::python
