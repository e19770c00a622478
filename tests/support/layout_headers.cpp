#include "layout_headers.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "command.h"
#include "target_process.h"

namespace hangscope::testing {
namespace {

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

std::string label_of(std::string text) {
  std::replace(text.begin(), text.end(), '.', '_');
  return text;
}

std::set<std::string> pyenv_roots() {
  std::set<std::string> roots;
  if (const char* root = std::getenv("PYENV_ROOT")) roots.insert(root);
  if (const char* home = std::getenv("HOME")) roots.insert(std::string(home) + "/.pyenv");
  roots.insert("/root/.pyenv");
  return roots;
}

// The headers a probe of 3.minor includes, relative to the include directory.
std::vector<std::string> probe_headers(int minor) {
  std::vector<std::string> files = {"Python.h", "internal/pycore_runtime.h",
                                    "internal/pycore_interp.h", "internal/pycore_gil.h",
                                    "internal/pycore_moduleobject.h"};
  if (minor == 10) {
    files.push_back("frameobject.h");  // PyFrameObject (cpython/frameobject.h)
  } else {
    files.push_back("internal/pycore_frame.h");
    files.push_back("internal/pycore_dict.h");
  }
  return files;
}

// Checks built from a Layout's typed fields: the offset, and the size of the field's C type
// (of one item for array members) against sizeof(T) of the FieldOffset<T>.
class Checks {
 public:
  explicit Checks(std::vector<LayoutCheck>& out) : out_(out) {}

  template <typename T>
  void field(const std::string& name, memory::FieldOffset<T> f, const std::string& type,
             const std::string& member) {
    add(name, f, type, member, "");
  }
  template <typename T>
  void array(const std::string& name, memory::FieldOffset<T> f, const std::string& type,
             const std::string& member) {
    add(name, f, type, member, "[0]");
  }
  template <typename T>
  void field(const std::string& name, const std::optional<memory::FieldOffset<T>>& f,
             const std::string& type, const std::string& member) {
    if (f) {
      field(name, *f, type, member);
    } else {
      missing(name);
    }
  }
  template <typename T>
  void array(const std::string& name, const std::optional<memory::FieldOffset<T>>& f,
             const std::string& type, const std::string& member) {
    if (f) {
      array(name, *f, type, member);
    } else {
      missing(name);
    }
  }
  void value(const std::string& name, std::uint64_t ours, const std::string& c_expression) {
    out_.push_back({name, ours, c_expression});
  }

 private:
  template <typename T>
  void add(const std::string& name, memory::FieldOffset<T> f, const std::string& type,
           const std::string& member, const std::string& item) {
    out_.push_back({name, f.offset, "offsetof(" + type + ", " + member + ")"});
    out_.push_back(
        {name + " (C type size)", sizeof(T), "sizeof(((" + type + " *)0)->" + member + item + ")"});
  }
  // A field the version has (the headers define it) but the layout lacks: always a mismatch.
  void missing(const std::string& name) { out_.push_back({name + " (absent)", 0, "~(size_t)0"}); }

  std::vector<LayoutCheck>& out_;
};

}  // namespace

std::vector<PythonHeaders> installed_python_headers() {
  std::vector<PythonHeaders> found;
  std::set<std::string> seen;
  for (const auto& root : pyenv_roots()) {
    DIR* dir = ::opendir((root + "/versions").c_str());
    if (dir == nullptr) continue;
    while (const dirent* entry = ::readdir(dir)) {
      const std::string version = entry->d_name;
      int major = 0, minor = 0;
      if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2 || major != 3 || minor < 10 ||
          !seen.insert(version).second) {
        continue;
      }
      found.push_back(
          {"pyenv_" + label_of(version), minor,
           root + "/versions/" + version + "/include/python3." + std::to_string(minor)});
    }
    ::closedir(dir);
  }
  for (int minor = 10; minor < 40; ++minor) {
    const std::string dir = "/usr/include/python3." + std::to_string(minor);
    if (exists(dir)) found.push_back({"system_3_" + std::to_string(minor), minor, dir});
  }
  std::sort(found.begin(), found.end(),
            [](const PythonHeaders& a, const PythonHeaders& b) { return a.label < b.label; });
  return found;
}

PythonHeaders headers_of_interpreter(const std::string& python, int minor) {
  const std::string suffix = "/bin/python3";
  const std::string include = "/include/python3." + std::to_string(minor);
  if (python.size() > suffix.size() &&
      python.compare(python.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const std::string prefix = python.substr(0, python.size() - suffix.size());
    if (prefix != "/usr" && exists(prefix + include)) {
      return {"prefix", minor, prefix + include};
    }
  }
  return {"system", minor, "/usr" + include};
}

std::string missing_for_probe(const PythonHeaders& headers) {
  if (!exists(headers.include_dir)) return "the include directory " + headers.include_dir;
  std::string missing;
  for (const auto& file : probe_headers(headers.minor)) {
    if (!exists(headers.include_dir + "/" + file)) {
      missing += (missing.empty() ? "" : ", ") + headers.include_dir + "/" + file;
    }
  }
  if (!missing.empty()) return "the headers " + missing;
  if (run_command("command -v cc >/dev/null 2>&1").exit_code != 0) return "a C compiler (cc)";
  return "";
}

std::vector<LayoutCheck> layout_checks(const python::Layout& l, int minor) {
  using python::DictKeysFormat;
  using python::EvalCalls;
  using python::FrameKind;
  using python::FrameLink;
  using python::GilPlace;
  using python::LocalsNames;
  using python::LongFormat;
  std::vector<LayoutCheck> out;
  Checks c(out);

  // _PyRuntimeState, PyInterpreterState, the GIL
  c.field("runtime_interpreters_head", l.runtime_interpreters_head, "_PyRuntimeState",
          "interpreters.head");
  c.field("interp_next", l.interp_next, "PyInterpreterState", "next");
  c.field("interp_threads_head", l.interp_threads_head, "PyInterpreterState",
          minor == 10 ? "tstate_head" : "threads.head");
  c.field("interp_modules", l.interp_modules, "PyInterpreterState",
          minor <= 11 ? "modules" : "imports.modules");
  switch (l.gil_place) {
    case GilPlace::kRuntime:
      // An embedded struct _gil_runtime_state: its address is used, never its value.
      c.value("runtime_gil", l.runtime_gil.value_or(~0ull), "offsetof(_PyRuntimeState, ceval.gil)");
      break;
    case GilPlace::kInterpreter:
      c.field("interp_gil_pointer", l.interp_gil_pointer, "PyInterpreterState", "ceval.gil");
      break;
  }
  c.field("gil_last_holder", l.gil_last_holder, "struct _gil_runtime_state", "last_holder");
  c.field("gil_locked", l.gil_locked, "struct _gil_runtime_state", "locked");

  // PyThreadState
  c.field("tstate_next", l.tstate_next, "PyThreadState", "next");
  c.field("tstate_interp", l.tstate_interp, "PyThreadState", "interp");
  c.field("tstate_thread_id", l.tstate_thread_id, "PyThreadState", "thread_id");
  if (minor >= 11) {
    c.field("tstate_native_thread_id", l.tstate_native_thread_id, "PyThreadState",
            "native_thread_id");
  }
  switch (l.frame_link) {
    case FrameLink::kFrameObject:
      c.field("tstate_frame", l.tstate_frame, "PyThreadState", "frame");
      break;
    case FrameLink::kCFrame:
      c.field("tstate_frame", l.tstate_frame, "PyThreadState", "cframe");
      c.field("cframe_current_frame", l.cframe_current_frame, "_PyCFrame", "current_frame");
      break;
    case FrameLink::kDirect:
      c.field("tstate_frame", l.tstate_frame, "PyThreadState", "current_frame");
      break;
  }

  // Frames
  switch (l.frame_kind) {
    case FrameKind::kFrameObject:
      c.value("frame_size", l.frame_size, "sizeof(PyFrameObject)");
      c.field("frame_previous", l.frame_previous, "PyFrameObject", "f_back");
      c.field("frame_code", l.frame_code, "PyFrameObject", "f_code");
      c.field("frame_lasti", l.frame_lasti, "PyFrameObject", "f_lasti");
      c.array("frame_localsplus", l.frame_localsplus, "PyFrameObject", "f_localsplus");
      break;
    case FrameKind::kInterpreterFrame:
      c.value("frame_size", l.frame_size, "offsetof(_PyInterpreterFrame, localsplus)");
      c.field("frame_previous", l.frame_previous, "_PyInterpreterFrame", "previous");
      c.field("frame_code", l.frame_code, "_PyInterpreterFrame",
              minor <= 12 ? "f_code" : "f_executable");
      c.field("frame_instr_ptr", l.frame_instr_ptr, "_PyInterpreterFrame",
              minor <= 12 ? "prev_instr" : "instr_ptr");
      c.field("frame_owner", l.frame_owner, "_PyInterpreterFrame", "owner");
      c.array("frame_localsplus", l.frame_localsplus, "_PyInterpreterFrame", "localsplus");
      c.value("owner_generator", static_cast<std::uint64_t>(l.owner_generator),
              "FRAME_OWNED_BY_GENERATOR");
      break;
  }
  switch (l.eval_calls) {
    case EvalCalls::kFramePerCall:
      break;
    case EvalCalls::kEntryFlag:
      c.field("frame_is_entry", l.frame_is_entry, "_PyInterpreterFrame", "is_entry");
      break;
    case EvalCalls::kShimFrames:
      // The first owner that is not Python code: the C-stack shim (3.14: the interpreter's).
      c.value("owner_shim_first", static_cast<std::uint64_t>(l.owner_shim_first),
              minor >= 14 ? "FRAME_OWNED_BY_INTERPRETER" : "FRAME_OWNED_BY_CSTACK");
      break;
  }

  // PyCodeObject
  c.field("code_filename", l.code_filename, "PyCodeObject", "co_filename");
  c.field("code_name", l.code_name, "PyCodeObject", "co_name");
  if (minor >= 11) c.field("code_qualname", l.code_qualname, "PyCodeObject", "co_qualname");
  c.field("code_firstlineno", l.code_firstlineno, "PyCodeObject", "co_firstlineno");
  c.field("code_linetable", l.code_linetable, "PyCodeObject", "co_linetable");
  if (l.frame_kind == FrameKind::kInterpreterFrame) {
    c.value("code_size", l.code_size, "offsetof(PyCodeObject, co_code_adaptive)");
    c.array("code_code_adaptive", l.code_code_adaptive, "PyCodeObject", "co_code_adaptive");
  } else {
    c.value("code_size", l.code_size, "sizeof(PyCodeObject)");
  }
  if (l.code_firsttraceable) {
    c.field("code_firsttraceable", l.code_firsttraceable, "PyCodeObject", "_co_firsttraceable");
  }
  switch (l.locals_names) {
    case LocalsNames::kSeparateTuples:
      c.field("code_varnames", l.code_varnames, "PyCodeObject", "co_varnames");
      c.field("code_cellvars", l.code_cellvars, "PyCodeObject", "co_cellvars");
      c.field("code_freevars", l.code_freevars, "PyCodeObject", "co_freevars");
      break;
    case LocalsNames::kLocalsPlus:
      c.field("code_localsplusnames", l.code_localsplusnames, "PyCodeObject", "co_localsplusnames");
      c.field("code_localspluskinds", l.code_localspluskinds, "PyCodeObject", "co_localspluskinds");
      break;
  }

  // Objects
  c.field("object_type", l.object_type, "PyObject", "ob_type");
  c.field("type_name", l.type_name, "PyTypeObject", "tp_name");
  c.field("var_size", l.var_size, "PyVarObject", "ob_size");
  c.field("unicode_length", l.unicode_length, "PyASCIIObject", "length");
  c.field("unicode_state", l.unicode_state, "PyASCIIObject", "state");
  c.value("unicode_ascii_data", l.unicode_ascii_data, "sizeof(PyASCIIObject)");
  c.value("unicode_compact_data", l.unicode_compact_data, "sizeof(PyCompactUnicodeObject)");
  c.field("unicode_legacy_data", l.unicode_legacy_data, "PyUnicodeObject", "data");
  c.value("unicode_state_bits.kind_shift", l.unicode_state_bits.kind_shift, "STATE_BIT(kind)");
  c.value("unicode_state_bits.compact_bit", l.unicode_state_bits.compact_bit, "STATE_BIT(compact)");
  c.value("unicode_state_bits.ascii_bit", l.unicode_state_bits.ascii_bit, "STATE_BIT(ascii)");
  c.array("bytes_data", l.bytes_data, "PyBytesObject", "ob_sval");
  c.array("tuple_items", l.tuple_items, "PyTupleObject", "ob_item");
  c.field("list_items", l.list_items, "PyListObject", "ob_item");
  c.field("float_value", l.float_value, "PyFloatObject", "ob_fval");
  switch (l.long_format) {
    case LongFormat::kSignedSize:
      c.array("long_digits", l.long_digits, "PyLongObject", "ob_digit");
      break;
    case LongFormat::kTagged:
      c.array("long_digits", l.long_digits, "PyLongObject", "long_value.ob_digit");
      c.value("var_size (as lv_tag)", l.var_size.offset,
              "offsetof(PyLongObject, long_value.lv_tag)");
      break;
  }
  c.field("cell_ref", l.cell_ref, "PyCellObject", "ob_ref");
  c.field("module_dict", l.module_dict, "PyModuleObject", "md_dict");
  c.field("dict_used", l.dict_used, "PyDictObject", "ma_used");
  c.field("dict_keys", l.dict_keys, "PyDictObject", "ma_keys");
  c.field("dict_values", l.dict_values, "PyDictObject", "ma_values");

  // Dict keys and values: 3.10's are in Objects/dict-common.h, not among the installed headers.
  if (l.dict_keys_format == DictKeysFormat::k311) {
    c.array("dict_values_items", l.dict_values_items, "PyDictValues", "values");
    if (minor >= 13) c.field("dict_values_valid", l.dict_values_valid, "PyDictValues", "valid");
    c.field("keys_log2_index_bytes", l.keys_log2_index_bytes, "PyDictKeysObject",
            "dk_log2_index_bytes");
    c.field("keys_kind", l.keys_kind, "PyDictKeysObject", "dk_kind");
    c.field("keys_nentries", l.keys_nentries, "PyDictKeysObject", "dk_nentries");
    c.array("keys_indices", l.keys_indices, "PyDictKeysObject", "dk_indices");
    c.value("key_entry_size", l.key_entry_size, "sizeof(PyDictKeyEntry)");
    c.field("key_entry_key", l.key_entry_key, "PyDictKeyEntry", "me_key");
    c.field("key_entry_value", l.key_entry_value, "PyDictKeyEntry", "me_value");
    c.value("unicode_entry_size", l.unicode_entry_size, "sizeof(PyDictUnicodeEntry)");
    c.field("unicode_entry_key", l.unicode_entry_key, "PyDictUnicodeEntry", "me_key");
    c.field("unicode_entry_value", l.unicode_entry_value, "PyDictUnicodeEntry", "me_value");
  }

  // Types
  c.field("type_basicsize", l.type_basicsize, "PyTypeObject", "tp_basicsize");
  c.field("type_dict", l.type_dict, "PyTypeObject", "tp_dict");
  c.field("type_flags", l.type_flags, "PyTypeObject", "tp_flags");
  c.field("type_dictoffset", l.type_dictoffset, "PyTypeObject", "tp_dictoffset");
  c.field("heap_type_cached_keys", l.heap_type_cached_keys, "PyHeapTypeObject", "ht_cached_keys");
  return out;
}

std::vector<LayoutCheck> debug_table_checks(int minor) {
  const python::PythonVersion version{3, minor, 0, 0};
  std::vector<LayoutCheck> out;
  const auto fields = python::debug_table_fields(version);
  if (fields.empty()) return out;
  // The header layout_from_debug_offsets reads before the fields.
  out.push_back(
      {"_Py_DebugOffsets size", python::debug_offsets_size(version), "sizeof(_Py_DebugOffsets)"});
  out.push_back({"_Py_DebugOffsets.cookie", 0, "offsetof(_Py_DebugOffsets, cookie)"});
  out.push_back({"_Py_DebugOffsets.version", 8, "offsetof(_Py_DebugOffsets, version)"});
  out.push_back(
      {"_Py_DebugOffsets.free_threaded", 16, "offsetof(_Py_DebugOffsets, free_threaded)"});
  for (const auto& field : fields) {
    const std::string member(field.member);
    out.push_back({"_Py_DebugOffsets." + member, field.position,
                   "offsetof(_Py_DebugOffsets, " + member + ")"});
  }
  return out;
}

std::map<std::string, std::uint64_t> probe(const PythonHeaders& headers,
                                           const std::vector<LayoutCheck>& checks) {
  std::ostringstream c;
  c << "#define Py_BUILD_CORE 1\n";
  for (const auto& file : probe_headers(headers.minor)) c << "#include \"" << file << "\"\n";
  c << "#include <stddef.h>\n#include <stdio.h>\n#include <string.h>\n"
       "/* The bit of PyASCIIObject.state where a bitfield starts (little-endian word). */\n"
       "#define STATE_BIT(bits) ({ PyASCIIObject o_; memset(&o_, 0, sizeof o_); "
       "o_.state.bits = 1; unsigned w_; memcpy(&w_, &o_.state, sizeof w_); "
       "(size_t)__builtin_ctz(w_); })\n"
       "int main(void) {\n";
  for (std::size_t i = 0; i < checks.size(); ++i) {
    c << "  printf(\"%zu %llu\\n\", (size_t)" << i << ", (unsigned long long)("
      << checks[i].c_expression << "));\n";
  }
  c << "  return 0;\n}\n";

  const std::string base = temp_path("hangscope_layout_probe");
  {
    std::ofstream source(base + ".c");
    source << c.str();
  }
  const std::string compile = "cc -std=gnu11 -w -DPy_BUILD_CORE -I'" + headers.include_dir +
                              "' -I'" + headers.include_dir + "/internal' -o '" + base + "' '" +
                              base + ".c'";
  const auto built = run_command(compile);
  if (built.exit_code != 0) {
    throw std::runtime_error("the offsetof probe (" + base + ".c) did not compile against " +
                             headers.include_dir + ":\n" + built.out + built.err);
  }
  const auto ran = run_command("'" + base + "'");
  std::remove(base.c_str());
  if (ran.exit_code != 0) throw std::runtime_error("the offsetof probe failed: " + ran.err);
  std::remove((base + ".c").c_str());
  std::map<std::string, std::uint64_t> values;
  std::istringstream lines(ran.out);
  std::size_t index = 0;
  unsigned long long value = 0;
  while (lines >> index >> value) {
    if (index < checks.size()) values[checks[index].c_expression] = value;
  }
  if (values.size() == 0 && !checks.empty()) throw std::runtime_error("the probe printed nothing");
  return values;
}

}  // namespace hangscope::testing
