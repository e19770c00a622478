#include "hangscope/python/layout.h"

#include <array>
#include <cstring>

#include "hangscope/common/error.h"

namespace hangscope::python {
namespace {

// Settings shared by every 3.11+ layout (the same in 3.11-3.14 GIL builds).
void interpreter_frames(Layout& l) {
  l.frame_kind = FrameKind::kInterpreterFrame;
  l.line_encoding = LineEncoding::kLocationTable;
  l.locals_names = LocalsNames::kLocalsPlus;
  l.dict_keys_format = DictKeysFormat::k311;
  l.keys_log2_index_bytes = FieldOffset<std::uint8_t>(9);
  l.keys_kind = FieldOffset<std::uint8_t>(10);
  l.keys_nentries = FieldOffset<std::int64_t>(24);
  l.keys_indices = FieldOffset<char>(32);
}

// Offsets checked against each version's headers by tests/unit/layout_headers_test.cpp (it
// compiles offsetof over the installed headers of every version on the machine); see
// docs/python-capture.md.
Layout layout_310() {
  Layout l;
  l.frame_link = FrameLink::kFrameObject;
  l.frame_kind = FrameKind::kFrameObject;
  l.eval_calls = EvalCalls::kFramePerCall;
  l.line_encoding = LineEncoding::kLineTable310;
  l.locals_names = LocalsNames::kSeparateTuples;
  l.gil_place = GilPlace::kRuntime;
  l.dict_keys_format = DictKeysFormat::k310;
  l.long_format = LongFormat::kSignedSize;
  l.runtime_interpreters_head = FieldOffset<RemoteAddress>(32);
  l.runtime_gil = 352;
  l.interp_next = FieldOffset<RemoteAddress>(0);
  l.interp_threads_head = FieldOffset<RemoteAddress>(8);
  l.interp_modules = FieldOffset<RemoteAddress>(856);
  l.tstate_next = FieldOffset<RemoteAddress>(8);
  l.tstate_interp = FieldOffset<RemoteAddress>(16);
  l.tstate_thread_id = FieldOffset<std::uint64_t>(176);
  l.tstate_frame = FieldOffset<RemoteAddress>(24);
  l.frame_size = 360;
  l.frame_previous = FieldOffset<RemoteAddress>(24);  // f_back
  l.frame_code = FieldOffset<RemoteAddress>(32);
  l.frame_lasti = FieldOffset<std::int32_t>(96);  // in code units
  l.frame_localsplus = FieldOffset<RemoteAddress>(352);
  l.code_size = 176;
  l.code_filename = FieldOffset<RemoteAddress>(104);
  l.code_name = FieldOffset<RemoteAddress>(112);
  l.code_firstlineno = FieldOffset<std::int32_t>(40);
  l.code_linetable = FieldOffset<RemoteAddress>(120);
  l.code_varnames = FieldOffset<RemoteAddress>(72);
  l.code_freevars = FieldOffset<RemoteAddress>(80);
  l.code_cellvars = FieldOffset<RemoteAddress>(88);
  l.unicode_ascii_data = 48;
  l.unicode_compact_data = 72;
  l.unicode_legacy_data = FieldOffset<RemoteAddress>(72);
  // Objects/dict-common.h: not among the installed headers, so not checked by offsetof.
  l.keys_size = FieldOffset<std::int64_t>(8);
  l.keys_nentries = FieldOffset<std::int64_t>(32);
  l.keys_indices = FieldOffset<char>(40);
  l.heap_type_cached_keys = FieldOffset<RemoteAddress>(872);
  l.managed_dict = Layout::ManagedDict::kNone;
  return l;
}

Layout layout_311() {
  Layout l;
  interpreter_frames(l);
  l.frame_link = FrameLink::kCFrame;
  l.eval_calls = EvalCalls::kEntryFlag;
  l.gil_place = GilPlace::kRuntime;
  l.long_format = LongFormat::kSignedSize;
  l.runtime_interpreters_head = FieldOffset<RemoteAddress>(40);
  l.runtime_gil = 360;
  l.interp_next = FieldOffset<RemoteAddress>(0);
  l.interp_threads_head = FieldOffset<RemoteAddress>(16);
  l.interp_modules = FieldOffset<RemoteAddress>(888);
  l.tstate_next = FieldOffset<RemoteAddress>(8);
  l.tstate_interp = FieldOffset<RemoteAddress>(16);
  l.tstate_thread_id = FieldOffset<std::uint64_t>(152);
  l.tstate_native_thread_id = FieldOffset<std::uint64_t>(160);
  l.tstate_frame = FieldOffset<RemoteAddress>(56);
  l.cframe_current_frame = FieldOffset<RemoteAddress>(8);
  l.frame_size = 72;
  l.frame_code = FieldOffset<RemoteAddress>(32);
  l.frame_previous = FieldOffset<RemoteAddress>(48);
  l.frame_instr_ptr = FieldOffset<RemoteAddress>(56);  // prev_instr
  l.frame_is_entry = FieldOffset<std::uint8_t>(68);
  l.frame_owner = FieldOffset<std::uint8_t>(69);
  l.frame_localsplus = FieldOffset<RemoteAddress>(72);
  l.owner_shim_first = 3;  // 3.11 has no shim frames; owners are 0..2
  l.code_size = 184;
  l.code_filename = FieldOffset<RemoteAddress>(112);
  l.code_name = FieldOffset<RemoteAddress>(120);
  l.code_qualname = FieldOffset<RemoteAddress>(128);
  l.code_firstlineno = FieldOffset<std::int32_t>(72);
  l.code_linetable = FieldOffset<RemoteAddress>(136);
  l.code_code_adaptive = FieldOffset<std::uint8_t>(184);
  l.code_firsttraceable = FieldOffset<std::int32_t>(168);
  l.code_localsplusnames = FieldOffset<RemoteAddress>(96);
  l.code_localspluskinds = FieldOffset<RemoteAddress>(104);
  l.unicode_ascii_data = 48;
  l.unicode_compact_data = 72;
  l.unicode_legacy_data = FieldOffset<RemoteAddress>(72);
  l.dict_values_items = FieldOffset<RemoteAddress>(0);
  l.heap_type_cached_keys = FieldOffset<RemoteAddress>(872);
  l.managed_dict = Layout::ManagedDict::kValuesAtMinus4;
  return l;
}

Layout layout_312() {
  Layout l;
  interpreter_frames(l);
  l.frame_link = FrameLink::kCFrame;
  l.eval_calls = EvalCalls::kShimFrames;
  l.gil_place = GilPlace::kInterpreter;
  l.long_format = LongFormat::kTagged;
  l.runtime_interpreters_head = FieldOffset<RemoteAddress>(40);
  l.interp_next = FieldOffset<RemoteAddress>(0);
  l.interp_threads_head = FieldOffset<RemoteAddress>(72);
  l.interp_gil_pointer = FieldOffset<RemoteAddress>(384);
  l.interp_modules = FieldOffset<RemoteAddress>(944);
  l.tstate_next = FieldOffset<RemoteAddress>(8);
  l.tstate_interp = FieldOffset<RemoteAddress>(16);
  l.tstate_thread_id = FieldOffset<std::uint64_t>(136);
  l.tstate_native_thread_id = FieldOffset<std::uint64_t>(144);
  l.tstate_frame = FieldOffset<RemoteAddress>(56);
  l.cframe_current_frame = FieldOffset<RemoteAddress>(0);
  l.frame_size = 72;
  l.frame_code = FieldOffset<RemoteAddress>(0);
  l.frame_previous = FieldOffset<RemoteAddress>(8);
  l.frame_instr_ptr = FieldOffset<RemoteAddress>(56);  // prev_instr
  l.frame_owner = FieldOffset<std::uint8_t>(70);
  l.frame_localsplus = FieldOffset<RemoteAddress>(72);
  l.owner_shim_first = 3;  // FRAME_OWNED_BY_CSTACK
  l.code_size = 192;
  l.code_filename = FieldOffset<RemoteAddress>(112);
  l.code_name = FieldOffset<RemoteAddress>(120);
  l.code_qualname = FieldOffset<RemoteAddress>(128);
  l.code_firstlineno = FieldOffset<std::int32_t>(68);
  l.code_linetable = FieldOffset<RemoteAddress>(136);
  l.code_code_adaptive = FieldOffset<std::uint8_t>(192);
  l.code_firsttraceable = FieldOffset<std::int32_t>(176);
  l.code_localsplusnames = FieldOffset<RemoteAddress>(96);
  l.code_localspluskinds = FieldOffset<RemoteAddress>(104);
  l.unicode_ascii_data = 40;
  l.unicode_compact_data = 56;
  l.unicode_legacy_data = FieldOffset<RemoteAddress>(56);
  l.dict_values_items = FieldOffset<RemoteAddress>(0);
  l.heap_type_cached_keys = FieldOffset<RemoteAddress>(880);
  l.managed_dict = Layout::ManagedDict::kTaggedAtMinus3;
  return l;
}

// The fields hangscope reads from _Py_DebugOffsets (3.13+): each with its member path in the
// C struct and its position in the 3.13 and the 3.14 table. 3.14 adds threads_main,
// code_object_generation, tlbc_generation, stackpointer, tlbc_index, co_tlbc, set_object,
// gen_object, llist_node and debugger_support (see docs/python-capture.md).
enum Entry : std::size_t {
  kRuntimeInterpretersHead,
  kInterpNext,
  kInterpThreadsHead,
  kInterpImportsModules,
  kInterpCevalGil,
  kInterpGilRuntimeState,
  kInterpGilLocked,
  kInterpGilHolder,
  kTsNext,
  kTsInterp,
  kTsCurrentFrame,
  kTsThreadId,
  kTsNativeThreadId,
  kFrPrevious,
  kFrExecutable,
  kFrInstrPtr,
  kFrLocalsplus,
  kFrOwner,
  kCoFilename,
  kCoName,
  kCoQualname,
  kCoLinetable,
  kCoFirstlineno,
  kCoLocalsplusnames,
  kCoLocalspluskinds,
  kCoCodeAdaptive,
  kObType,
  kTpName,
  kTpFlags,
  kTupleObItem,
  kListObItem,
  kDictMaKeys,
  kDictMaValues,
  kFloatFval,
  kLongDigit,
  kBytesObSval,
  kUnicodeState,
  kUnicodeLength,
  kUnicodeAsciiSize,
  kEntries
};

struct TableRow {
  Entry entry;
  std::string_view member;
  std::size_t at313, at314;
};

constexpr std::array<TableRow, kEntries> kRows = {{
    {kRuntimeInterpretersHead, "runtime_state.interpreters_head", 40, 40},
    {kInterpNext, "interpreter_state.next", 64, 64},
    {kInterpThreadsHead, "interpreter_state.threads_head", 72, 72},
    {kInterpImportsModules, "interpreter_state.imports_modules", 88, 96},
    {kInterpCevalGil, "interpreter_state.ceval_gil", 112, 120},
    {kInterpGilRuntimeState, "interpreter_state.gil_runtime_state", 120, 128},
    {kInterpGilLocked, "interpreter_state.gil_runtime_state_locked", 136, 144},
    {kInterpGilHolder, "interpreter_state.gil_runtime_state_holder", 144, 152},
    {kTsNext, "thread_state.next", 168, 192},
    {kTsInterp, "thread_state.interp", 176, 200},
    {kTsCurrentFrame, "thread_state.current_frame", 184, 208},
    {kTsThreadId, "thread_state.thread_id", 192, 216},
    {kTsNativeThreadId, "thread_state.native_thread_id", 200, 224},
    {kFrPrevious, "interpreter_frame.previous", 232, 256},
    {kFrExecutable, "interpreter_frame.executable", 240, 264},
    {kFrInstrPtr, "interpreter_frame.instr_ptr", 248, 272},
    {kFrLocalsplus, "interpreter_frame.localsplus", 256, 280},
    {kFrOwner, "interpreter_frame.owner", 264, 288},
    {kCoFilename, "code_object.filename", 280, 320},
    {kCoName, "code_object.name", 288, 328},
    {kCoQualname, "code_object.qualname", 296, 336},
    {kCoLinetable, "code_object.linetable", 304, 344},
    {kCoFirstlineno, "code_object.firstlineno", 312, 352},
    {kCoLocalsplusnames, "code_object.localsplusnames", 328, 368},
    {kCoLocalspluskinds, "code_object.localspluskinds", 336, 376},
    {kCoCodeAdaptive, "code_object.co_code_adaptive", 344, 384},
    {kObType, "pyobject.ob_type", 360, 408},
    {kTpName, "type_object.tp_name", 376, 424},
    {kTpFlags, "type_object.tp_flags", 392, 440},
    {kTupleObItem, "tuple_object.ob_item", 408, 456},
    {kListObItem, "list_object.ob_item", 432, 480},
    {kDictMaKeys, "dict_object.ma_keys", 456, 536},
    {kDictMaValues, "dict_object.ma_values", 464, 544},
    {kFloatFval, "float_object.ob_fval", 480, 560},
    {kLongDigit, "long_object.ob_digit", 504, 584},
    {kBytesObSval, "bytes_object.ob_sval", 528, 608},
    {kUnicodeState, "unicode_object.state", 544, 624},
    {kUnicodeLength, "unicode_object.length", 552, 632},
    {kUnicodeAsciiSize, "unicode_object.asciiobject_size", 560, 640},
}};

constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < kRows.size(); ++i) {
    if (kRows[i].entry != i) return false;
  }
  return true;
}
static_assert(rows_in_order(), "kRows must list every Entry once, in order");

// A version's table: its size (sizeof(_Py_DebugOffsets), all of which is read) and which
// column of kRows holds its positions.
struct TableSpec {
  std::size_t size;
  std::size_t TableRow::*position;
};

std::optional<TableSpec> table_spec(const PythonVersion& version) {
  if (version.major != 3) return std::nullopt;
  if (version.minor == 13) return TableSpec{584, &TableRow::at313};
  if (version.minor == 14) return TableSpec{760, &TableRow::at314};
  return std::nullopt;
}

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
  layout->check();
  return layout;
}

std::size_t debug_offsets_size(const PythonVersion& version) {
  const auto spec = table_spec(version);
  return spec ? spec->size : 0;
}

std::vector<DebugTableField> debug_table_fields(const PythonVersion& version) {
  std::vector<DebugTableField> fields;
  if (const auto spec = table_spec(version)) {
    for (const auto& row : kRows) fields.push_back({row.member, row.*(spec->position)});
  }
  return fields;
}

Layout layout_from_debug_offsets(std::span<const std::byte> table) {
  if (table.size() < 24 || std::memcmp(table.data(), "xdebugpy", 8) != 0) {
    throw Error("_PyRuntime does not start with the _Py_DebugOffsets cookie \"xdebugpy\"");
  }
  const PythonVersion version = PythonVersion::from_hex(table_u64(table, 8));
  if (table_u64(table, 16) != 0) {
    throw Error("free-threaded CPython " + version.to_string() + " is not supported yet");
  }
  const auto spec = table_spec(version);
  if (!spec) {
    throw Error("CPython " + version.to_string() +
                " is not supported (known: " + supported_versions() + ")");
  }
  if (table.size() < spec->size) throw Error("_Py_DebugOffsets table is truncated");
  const auto at = [&](Entry entry) { return table_u64(table, kRows[entry].*(spec->position)); };

  Layout l;
  l.version = version;
  interpreter_frames(l);
  l.frame_link = FrameLink::kDirect;
  l.eval_calls = EvalCalls::kShimFrames;
  l.gil_place = GilPlace::kInterpreter;
  l.long_format = LongFormat::kTagged;
  l.stack_refs = version.minor >= 14;
  l.owner_shim_first = 3;  // 3.13: CSTACK = 3; 3.14: INTERPRETER = 3, CSTACK = 4
  l.runtime_interpreters_head.offset = at(kRuntimeInterpretersHead);
  l.interp_next.offset = at(kInterpNext);
  l.interp_threads_head.offset = at(kInterpThreadsHead);
  l.interp_modules.offset = at(kInterpImportsModules);
  l.interp_gil_pointer = FieldOffset<RemoteAddress>(at(kInterpCevalGil));
  l.gil_locked.offset = at(kInterpGilLocked) - at(kInterpGilRuntimeState);
  l.gil_last_holder.offset = at(kInterpGilHolder) - at(kInterpGilRuntimeState);
  l.tstate_next.offset = at(kTsNext);
  l.tstate_interp.offset = at(kTsInterp);
  l.tstate_thread_id.offset = at(kTsThreadId);
  l.tstate_native_thread_id = FieldOffset<std::uint64_t>(at(kTsNativeThreadId));
  l.tstate_frame.offset = at(kTsCurrentFrame);
  l.frame_size = at(kFrLocalsplus);  // everything before the locals
  l.frame_previous.offset = at(kFrPrevious);
  l.frame_code.offset = at(kFrExecutable);
  l.frame_instr_ptr = FieldOffset<RemoteAddress>(at(kFrInstrPtr));
  l.frame_localsplus.offset = at(kFrLocalsplus);
  l.frame_owner = FieldOffset<std::uint8_t>(at(kFrOwner));
  l.code_size = at(kCoCodeAdaptive);
  l.code_filename.offset = at(kCoFilename);
  l.code_name.offset = at(kCoName);
  l.code_qualname = FieldOffset<RemoteAddress>(at(kCoQualname));
  l.code_firstlineno.offset = at(kCoFirstlineno);
  l.code_linetable.offset = at(kCoLinetable);
  l.code_code_adaptive = FieldOffset<std::uint8_t>(at(kCoCodeAdaptive));
  // Not in the table; from 3.13's headers (checked by tests/unit/layout_headers_test.cpp).
  if (version.minor == 13) l.code_firsttraceable = FieldOffset<std::int32_t>(184);
  l.code_localsplusnames = FieldOffset<RemoteAddress>(at(kCoLocalsplusnames));
  l.code_localspluskinds = FieldOffset<RemoteAddress>(at(kCoLocalspluskinds));
  l.object_type.offset = at(kObType);
  l.type_name.offset = at(kTpName);
  l.tuple_items.offset = at(kTupleObItem);
  l.list_items.offset = at(kListObItem);
  l.dict_keys.offset = at(kDictMaKeys);
  l.dict_values.offset = at(kDictMaValues);
  l.float_value.offset = at(kFloatFval);
  l.long_digits.offset = at(kLongDigit);
  l.bytes_data.offset = at(kBytesObSval);
  l.unicode_state.offset = at(kUnicodeState);
  l.unicode_length.offset = at(kUnicodeLength);
  l.unicode_ascii_data = at(kUnicodeAsciiSize);
  l.unicode_compact_data = l.unicode_ascii_data + 16;  // + utf8_length, utf8
  l.unicode_legacy_data.offset = l.unicode_compact_data;
  l.dict_values_items = FieldOffset<RemoteAddress>(8);  // not in the table, nor what follow
  l.dict_values_valid = FieldOffset<std::uint8_t>(3);
  l.type_flags.offset = at(kTpFlags);
  l.heap_type_cached_keys.offset = 880;  // PyTypeObject is 416 bytes in 3.13 and 3.14
  l.managed_dict = Layout::ManagedDict::kInlineValues;
  // Every offset is used to read a few bytes at it, and the frame and code sizes are how much
  // is copied per frame and code object: reject tables that point far away.
  for (const std::uint64_t offset :
       {l.frame_previous.offset, l.frame_code.offset, l.frame_instr_ptr->offset,
        l.frame_owner->offset, l.frame_size, l.frame_localsplus.offset, l.code_filename.offset,
        l.code_name.offset, l.code_qualname->offset, l.code_firstlineno.offset,
        l.code_linetable.offset, l.code_localsplusnames->offset, l.code_localspluskinds->offset,
        l.code_size, l.tstate_frame.offset, l.tstate_thread_id.offset,
        l.tstate_native_thread_id->offset}) {
    if (offset > 4096) throw Error("_Py_DebugOffsets holds an implausible offset");
  }
  l.check();
  return l;
}

void Layout::check() const {
  const auto need = [&](bool present, const char* what) {
    if (!present) {
      throw Error("the CPython " + version.to_string() + " layout lacks " + what);
    }
  };
  switch (gil_place) {
    case GilPlace::kRuntime:
      need(runtime_gil.has_value(), "runtime_gil (GilPlace::kRuntime)");
      break;
    case GilPlace::kInterpreter:
      need(interp_gil_pointer.has_value(), "interp_gil_pointer (GilPlace::kInterpreter)");
      break;
  }
  switch (frame_kind) {
    case FrameKind::kFrameObject:
      need(frame_lasti.has_value(), "frame_lasti (FrameKind::kFrameObject)");
      need(frame_link == FrameLink::kFrameObject, "FrameLink::kFrameObject for frame objects");
      break;
    case FrameKind::kInterpreterFrame:
      need(frame_instr_ptr && frame_owner && code_code_adaptive,
           "frame_instr_ptr, frame_owner and code_code_adaptive (FrameKind::kInterpreterFrame)");
      break;
  }
  need(eval_calls != EvalCalls::kEntryFlag || frame_is_entry.has_value(),
       "frame_is_entry (EvalCalls::kEntryFlag)");
  need(eval_calls == EvalCalls::kFramePerCall || frame_kind == FrameKind::kInterpreterFrame,
       "interpreter frames (entry flags and shim frames are theirs)");
  switch (locals_names) {
    case LocalsNames::kSeparateTuples:
      need(code_varnames && code_cellvars && code_freevars,
           "code_varnames, code_cellvars and code_freevars (LocalsNames::kSeparateTuples)");
      break;
    case LocalsNames::kLocalsPlus:
      need(code_localsplusnames && code_localspluskinds,
           "code_localsplusnames and code_localspluskinds (LocalsNames::kLocalsPlus)");
      break;
  }
  switch (dict_keys_format) {
    case DictKeysFormat::k310:
      need(keys_size.has_value(), "keys_size (DictKeysFormat::k310)");
      break;
    case DictKeysFormat::k311:
      need(keys_log2_index_bytes && keys_kind,
           "keys_log2_index_bytes and keys_kind (DictKeysFormat::k311)");
      break;
  }
  need(managed_dict != ManagedDict::kInlineValues || dict_values_valid.has_value(),
       "dict_values_valid (ManagedDict::kInlineValues)");
}

}  // namespace hangscope::python
