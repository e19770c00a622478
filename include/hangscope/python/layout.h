// Where CPython keeps what hangscope reads, per version: hard-coded for 3.10-3.12, read from
// the interpreter's own _Py_DebugOffsets table for 3.13 and later.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "hangscope/python/version.h"

namespace hangscope::python {

// How a thread state leads to its innermost frame.
enum class FrameLink {
  kFrameObject,  // 3.10: tstate->frame is a PyFrameObject*
  kCFrame,       // 3.11/3.12: tstate->cframe->current_frame
  kDirect,       // 3.13+: tstate->current_frame
};

// All offsets are in bytes from the start of the named structure.
struct Layout {
  PythonVersion version;

  // _PyRuntimeState
  std::uint64_t runtime_interpreters_head = 0;
  std::optional<std::uint64_t> runtime_gil;  // 3.10/3.11: the embedded _gil_runtime_state

  // PyInterpreterState
  std::uint64_t interp_next = 0;
  std::uint64_t interp_threads_head = 0;
  std::optional<std::uint64_t> interp_gil_pointer;  // 3.12+: ceval.gil (a pointer)
  std::uint64_t interp_modules = 0;

  // struct _gil_runtime_state
  std::uint64_t gil_last_holder = 8;
  std::uint64_t gil_locked = 16;

  // PyThreadState
  std::uint64_t tstate_next = 0;
  std::uint64_t tstate_interp = 0;
  std::uint64_t tstate_thread_id = 0;
  std::optional<std::uint64_t> tstate_native_thread_id;  // 3.11+
  FrameLink frame_link = FrameLink::kDirect;
  std::uint64_t tstate_frame = 0;          // frame, cframe or current_frame
  std::uint64_t cframe_current_frame = 0;  // 3.11/3.12

  // Frames: PyFrameObject (3.10) or _PyInterpreterFrame (3.11+)
  std::uint64_t frame_size = 0;      // bytes read per frame
  std::uint64_t frame_code = 0;      // f_code / f_executable
  std::uint64_t frame_previous = 0;  // f_back / previous
  std::uint64_t frame_instr = 0;     // 3.10: int f_lasti; 3.11+: prev_instr / instr_ptr pointer
  std::uint64_t frame_localsplus = 0;
  std::optional<std::uint64_t> frame_owner;     // 3.11+
  std::optional<std::uint64_t> frame_is_entry;  // 3.11 only
  int owner_shim_first = 3;                     // owners >= this are not Python code (3.12+ shims)
  bool executable_is_stackref = false;          // 3.14: f_executable is a tagged _PyStackRef

  // PyCodeObject
  std::uint64_t code_size = 0;  // bytes read per code object header
  std::uint64_t code_filename = 0;
  std::uint64_t code_name = 0;
  std::optional<std::uint64_t> code_qualname;  // 3.11+
  std::uint64_t code_firstlineno = 0;
  std::uint64_t code_linetable = 0;
  std::optional<std::uint64_t> code_code_adaptive;    // 3.11+: inline bytecode
  std::optional<std::uint64_t> code_firsttraceable;   // 3.11-3.13: frames before it are incomplete
  std::optional<std::uint64_t> code_localsplusnames;  // 3.11+
  std::optional<std::uint64_t> code_localspluskinds;  // 3.11+
  std::optional<std::uint64_t> code_varnames;         // 3.10
  std::optional<std::uint64_t> code_cellvars;         // 3.10
  std::optional<std::uint64_t> code_freevars;         // 3.10

  // Objects
  std::uint64_t object_type = 8;
  std::uint64_t type_name = 24;
  std::uint64_t var_size = 16;  // PyVarObject.ob_size
  std::uint64_t unicode_length = 16;
  std::uint64_t unicode_state = 32;
  std::uint64_t unicode_ascii_data = 0;    // sizeof(PyASCIIObject)
  std::uint64_t unicode_compact_data = 0;  // sizeof(PyCompactUnicodeObject)
  std::uint64_t unicode_legacy_data = 0;   // PyUnicodeObject.data.any (pointer)
  std::uint64_t bytes_data = 32;
  std::uint64_t tuple_items = 24;
  std::uint64_t list_items = 24;
  std::uint64_t float_value = 16;
  std::uint64_t long_digits = 24;
  bool long_has_tag = false;  // 3.12+: lv_tag = ndigits << 3 | sign
  std::uint64_t cell_ref = 16;
  std::uint64_t module_dict = 16;
  std::uint64_t dict_used = 16;
  std::uint64_t dict_keys = 32;
  std::uint64_t dict_values = 40;
  bool dict_keys_310 = false;           // 3.10 PyDictKeysObject (dk_size, dk_lookup, ...)
  std::uint64_t dict_values_items = 0;  // PyDictValues.values (8 from 3.13)

  // Instance attributes (for threading.Thread._name)
  std::uint64_t type_basicsize = 32;
  std::uint64_t type_dict = 264;  // tp_dict: a class's own attributes (heap types)
  std::uint64_t type_flags = 168;
  std::uint64_t type_dictoffset = 288;
  std::uint64_t heap_type_cached_keys = 0;  // PyHeapTypeObject.ht_cached_keys
  // How an object without a __dict__ pointer keeps its attributes.
  enum class ManagedDict {
    kNone,            // 3.10: tp_dictoffset
    kValuesAtMinus4,  // 3.11: dict at obj-3 words, values at obj-4 words
    kTaggedAtMinus3,  // 3.12: obj-3 words holds a dict, or values | 1
    kInlineValues,    // 3.13+: dict at obj-3 words, values inline at obj+tp_basicsize
  };
  ManagedDict managed_dict = ManagedDict::kNone;
};

// The built-in layout of a version whose offsets hangscope knows without the debug table;
// nullopt for versions it does not know (3.13+ use layout_from_debug_offsets).
std::optional<Layout> builtin_layout(const PythonVersion& version);

// Bytes of _Py_DebugOffsets to read from the start of _PyRuntime for the version (0 = none).
std::size_t debug_offsets_size(const PythonVersion& version);

// Builds the layout of a 3.13 or 3.14 interpreter from the bytes of its _Py_DebugOffsets.
// Throws hangscope::Error naming the problem (bad cookie, free-threaded build, unknown minor).
Layout layout_from_debug_offsets(std::span<const std::byte> table);

}  // namespace hangscope::python
