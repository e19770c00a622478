// Where CPython keeps what hangscope reads, per version: built in for 3.10-3.12, read from the
// interpreter's own _Py_DebugOffsets table for 3.13 and later. Every offset is a typed
// FieldOffset<T> (a read of it returns the field's C type), the version differences readers
// branch on are named properties, and tests/unit/layout_headers_test.cpp and
// tests/integration/layout_live_test.cpp check both against offsetof over each installed
// CPython's own headers (docs/python-capture.md, "Layouts").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/memory/field_offset.h"
#include "hangscope/python/version.h"

namespace hangscope::python {

using memory::FieldOffset;
using memory::RemoteAddress;

// The version differences hangscope's readers branch on, as named properties of a layout (never
// "this offset is absent"); Layout::check() ties each to the offsets it needs.

// How a thread state leads to its innermost frame.
enum class FrameLink {
  kFrameObject,  // 3.10: tstate->frame is a PyFrameObject*
  kCFrame,       // 3.11/3.12: tstate->cframe->current_frame
  kDirect,       // 3.13+: tstate->current_frame
};

// What a frame is, and so where it keeps its position in the bytecode.
enum class FrameKind {
  kFrameObject,       // 3.10 PyFrameObject: `int f_lasti`, in code units
  kInterpreterFrame,  // 3.11+ _PyInterpreterFrame: an instruction pointer (prev_instr /
                      // instr_ptr) into co_code_adaptive, and `char owner`
};

// How the frames run by one native _PyEval_EvalFrameDefault call are told apart.
enum class EvalCalls {
  kFramePerCall,  // 3.10: each frame is run by a call of its own
  kEntryFlag,     // 3.11: `is_entry` marks the outermost frame of a call
  kShimFrames,    // 3.12+: a C-stack shim frame (owner >= owner_shim_first) sits under it
};

// How a code object maps bytecode positions to lines.
enum class LineEncoding {
  kLineTable310,   // 3.10 PEP 626 co_linetable: (byte delta, line delta) pairs, by byte offset
  kLocationTable,  // 3.11+ co_linetable: the locations table, by code unit
};

// Where a code object names its locals, cells and free variables.
enum class LocalsNames {
  kSeparateTuples,  // 3.10: co_varnames, then co_cellvars, then co_freevars; cells by type
  kLocalsPlus,      // 3.11+: co_localsplusnames, kinds (cell, free, hidden) in co_localspluskinds
};

// Where the GIL (struct _gil_runtime_state) lives.
enum class GilPlace {
  kRuntime,      // 3.10/3.11: embedded in _PyRuntime (ceval.gil)
  kInterpreter,  // 3.12+: interp->ceval.gil, a pointer
};

// The header of a dict's keys (PyDictKeysObject).
enum class DictKeysFormat {
  k310,  // {dk_refcnt, dk_size, dk_lookup, dk_usable, dk_nentries, dk_indices[]}
  k311,  // {dk_refcnt, dk_log2_size, dk_log2_index_bytes, dk_kind, ..., dk_nentries, dk_indices[]}
};

// How PyLongObject keeps its sign and number of digits.
enum class LongFormat {
  kSignedSize,  // 3.10/3.11: ob_size = ±ndigits
  kTagged,      // 3.12+: lv_tag = ndigits << 3 | sign (0 positive, 1 zero, 2 negative)
};

// The bits of PyASCIIObject.state hangscope reads (a bitfield word; the same in 3.10-3.14 GIL
// builds: interned:2, kind:3, compact:1, ascii:1, then ready (3.10/3.11) or statically_allocated).
struct UnicodeStateBits {
  unsigned kind_shift = 2;  // kind:3 (1, 2 or 4 bytes per code point; 0: a legacy string not ready)
  unsigned compact_bit = 5;
  unsigned ascii_bit = 6;
  unsigned kind(std::uint32_t state) const { return (state >> kind_shift) & 7u; }
  bool compact(std::uint32_t state) const { return (state >> compact_bit) & 1u; }
  bool ascii(std::uint32_t state) const { return (state >> ascii_bit) & 1u; }
  friend bool operator==(const UnicodeStateBits&, const UnicodeStateBits&) = default;
};

// Offsets are FieldOffset<T> (bytes from the start of the named structure, and the field's C
// type); sizes are plain byte counts. std::optional marks fields the structure does not have
// in some versions; which ones are read is decided by the named properties above.
struct Layout {
  PythonVersion version;

  // Named version properties.
  FrameLink frame_link = FrameLink::kDirect;
  FrameKind frame_kind = FrameKind::kInterpreterFrame;
  EvalCalls eval_calls = EvalCalls::kShimFrames;
  LineEncoding line_encoding = LineEncoding::kLocationTable;
  LocalsNames locals_names = LocalsNames::kLocalsPlus;
  GilPlace gil_place = GilPlace::kInterpreter;
  DictKeysFormat dict_keys_format = DictKeysFormat::k311;
  LongFormat long_format = LongFormat::kTagged;
  UnicodeStateBits unicode_state_bits;
  bool stack_refs = false;   // 3.14: f_executable and localsplus are tagged _PyStackRefs
  int owner_shim_first = 3;  // frame owners >= this are not Python code (3.12+ shims)
  int owner_generator = 1;   // FRAME_OWNED_BY_GENERATOR (3.11+): never an incomplete frame

  // _PyRuntimeState
  FieldOffset<RemoteAddress> runtime_interpreters_head;
  std::optional<std::uint64_t> runtime_gil;  // GilPlace::kRuntime: the embedded gil state

  // PyInterpreterState
  FieldOffset<RemoteAddress> interp_next;
  FieldOffset<RemoteAddress> interp_threads_head;
  std::optional<FieldOffset<RemoteAddress>> interp_gil_pointer;  // GilPlace::kInterpreter
  FieldOffset<RemoteAddress> interp_modules;

  // struct _gil_runtime_state
  FieldOffset<RemoteAddress> gil_last_holder{8};
  FieldOffset<std::int32_t> gil_locked{16};

  // PyThreadState
  FieldOffset<RemoteAddress> tstate_next;
  FieldOffset<RemoteAddress> tstate_interp;
  FieldOffset<std::uint64_t> tstate_thread_id;                        // unsigned long
  std::optional<FieldOffset<std::uint64_t>> tstate_native_thread_id;  // 3.11+
  FieldOffset<RemoteAddress> tstate_frame;          // frame, cframe or current_frame
  FieldOffset<RemoteAddress> cframe_current_frame;  // FrameLink::kCFrame

  // Frames: PyFrameObject (3.10) or _PyInterpreterFrame (3.11+)
  std::uint64_t frame_size = 0;                               // bytes read per frame
  FieldOffset<RemoteAddress> frame_code;                      // f_code / f_executable
  FieldOffset<RemoteAddress> frame_previous;                  // f_back / previous
  std::optional<FieldOffset<std::int32_t>> frame_lasti;       // FrameKind::kFrameObject
  std::optional<FieldOffset<RemoteAddress>> frame_instr_ptr;  // kInterpreterFrame
  std::optional<FieldOffset<std::uint8_t>> frame_owner;       // kInterpreterFrame
  std::optional<FieldOffset<std::uint8_t>> frame_is_entry;    // EvalCalls::kEntryFlag
  FieldOffset<RemoteAddress> frame_localsplus;                // the first of the locals

  // PyCodeObject
  std::uint64_t code_size = 0;  // bytes read per code object header
  FieldOffset<RemoteAddress> code_filename;
  FieldOffset<RemoteAddress> code_name;
  std::optional<FieldOffset<RemoteAddress>> code_qualname;  // 3.11+ (else co_name is shown)
  FieldOffset<std::int32_t> code_firstlineno;
  FieldOffset<RemoteAddress> code_linetable;
  std::optional<FieldOffset<std::uint8_t>> code_code_adaptive;  // kInterpreterFrame: bytecode
  // 3.11-3.13: frames before it are incomplete (not in 3.14's debug table: 0 is assumed).
  std::optional<FieldOffset<std::int32_t>> code_firsttraceable;
  std::optional<FieldOffset<RemoteAddress>> code_localsplusnames;  // LocalsNames::kLocalsPlus
  std::optional<FieldOffset<RemoteAddress>> code_localspluskinds;  // LocalsNames::kLocalsPlus
  std::optional<FieldOffset<RemoteAddress>> code_varnames;         // kSeparateTuples
  std::optional<FieldOffset<RemoteAddress>> code_cellvars;         // kSeparateTuples
  std::optional<FieldOffset<RemoteAddress>> code_freevars;         // kSeparateTuples

  // Objects
  FieldOffset<RemoteAddress> object_type{8};
  FieldOffset<RemoteAddress> type_name{24};  // const char *tp_name
  FieldOffset<std::int64_t> var_size{16};    // PyVarObject.ob_size (3.12+ ints: lv_tag)
  FieldOffset<std::int64_t> unicode_length{16};
  FieldOffset<std::uint32_t> unicode_state{32};
  std::uint64_t unicode_ascii_data = 0;            // sizeof(PyASCIIObject)
  std::uint64_t unicode_compact_data = 0;          // sizeof(PyCompactUnicodeObject)
  FieldOffset<RemoteAddress> unicode_legacy_data;  // PyUnicodeObject.data.any
  FieldOffset<char> bytes_data{32};                // ob_sval[]
  FieldOffset<RemoteAddress> tuple_items{24};      // ob_item[]
  FieldOffset<RemoteAddress> list_items{24};       // PyObject **ob_item
  FieldOffset<double> float_value{16};
  FieldOffset<std::uint32_t> long_digits{24};  // digit ob_digit[]
  FieldOffset<RemoteAddress> cell_ref{16};
  FieldOffset<RemoteAddress> module_dict{16};
  FieldOffset<std::int64_t> dict_used{16};
  FieldOffset<RemoteAddress> dict_keys{32};
  FieldOffset<RemoteAddress> dict_values{40};
  FieldOffset<RemoteAddress> dict_values_items;  // PyDictValues.values[] (8 from 3.13)
  std::optional<FieldOffset<std::uint8_t>> dict_values_valid;  // 3.13+: PyDictValues.valid

  // PyDictKeysObject, and its entries
  std::optional<FieldOffset<std::int64_t>> keys_size;              // DictKeysFormat::k310
  std::optional<FieldOffset<std::uint8_t>> keys_log2_index_bytes;  // k311
  std::optional<FieldOffset<std::uint8_t>> keys_kind;              // k311 (0: general)
  FieldOffset<std::int64_t> keys_nentries;
  FieldOffset<char> keys_indices;     // dk_indices[]; the entries follow them
  std::uint64_t key_entry_size = 24;  // PyDictKeyEntry {me_hash, me_key, me_value}
  FieldOffset<RemoteAddress> key_entry_key{8};
  FieldOffset<RemoteAddress> key_entry_value{16};
  std::uint64_t unicode_entry_size = 16;  // PyDictUnicodeEntry {me_key, me_value} (k311)
  FieldOffset<RemoteAddress> unicode_entry_key{0};
  FieldOffset<RemoteAddress> unicode_entry_value{8};

  // Instance attributes (for threading.Thread._name)
  FieldOffset<std::int64_t> type_basicsize{32};
  FieldOffset<RemoteAddress> type_dict{264};   // tp_dict: a class's own attributes (heap types)
  FieldOffset<std::uint64_t> type_flags{168};  // unsigned long tp_flags
  FieldOffset<std::int64_t> type_dictoffset{288};
  FieldOffset<RemoteAddress> heap_type_cached_keys;  // PyHeapTypeObject.ht_cached_keys
  // How an object without a __dict__ pointer keeps its attributes.
  enum class ManagedDict {
    kNone,            // 3.10: tp_dictoffset
    kValuesAtMinus4,  // 3.11: dict at obj-3 words, values at obj-4 words
    kTaggedAtMinus3,  // 3.12: obj-3 words holds a dict, or values | 1
    kInlineValues,    // 3.13+: dict at obj-3 words, values inline at obj+tp_basicsize
  };
  ManagedDict managed_dict = ManagedDict::kNone;

  // Throws hangscope::Error naming the first property whose offsets are missing (e.g.
  // FrameKind::kInterpreterFrame without frame_instr_ptr): readers rely on it.
  void check() const;
};

// The built-in layout of a version whose offsets hangscope knows without the debug table;
// nullopt for versions it does not know (3.13+ use layout_from_debug_offsets).
std::optional<Layout> builtin_layout(const PythonVersion& version);

// Bytes of _Py_DebugOffsets to read from the start of _PyRuntime for the version (0 = none).
std::size_t debug_offsets_size(const PythonVersion& version);

// One field of _Py_DebugOffsets that hangscope reads: its member as offsetof names it
// ("thread_state.current_frame") and its byte position in the version's table.
struct DebugTableField {
  std::string_view member;
  std::size_t position;
};

// The fields hangscope reads from the version's _Py_DebugOffsets; empty for versions without
// one. (tests/unit/layout_headers_test.cpp checks the positions against the C headers.)
std::vector<DebugTableField> debug_table_fields(const PythonVersion& version);

// Builds the layout of a 3.13 or 3.14 interpreter from the bytes of its _Py_DebugOffsets.
// Throws hangscope::Error naming the problem (bad cookie, free-threaded build, unknown minor).
Layout layout_from_debug_offsets(std::span<const std::byte> table);

}  // namespace hangscope::python
