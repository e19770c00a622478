// A CPython version as hangscope needs it: major.minor selects the layout, the rest is shown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hangscope::python {

// The CPython versions whose layouts hangscope knows (builtin or from _Py_DebugOffsets): the
// one place they are written.
inline constexpr int kOldestMinor = 10;  // 3.10
inline constexpr int kNewestMinor = 14;  // 3.14
// "3.10 to 3.14", for messages about versions outside them.
std::string supported_versions();

struct PythonVersion {
  int major = 0;
  int minor = 0;
  int micro = 0;
  std::uint32_t hex = 0;  // PY_VERSION_HEX when known (0 when only major.minor is)

  // From PY_VERSION_HEX (0xMMmmuuRS).
  static PythonVersion from_hex(std::uint64_t hex);
  // From a file name such as "libpython3.11.so.1.0" or "python3.10"; nullopt otherwise.
  static std::optional<PythonVersion> from_file_name(std::string_view path);

  std::string to_string() const;
  bool at_least(int want_major, int want_minor) const {
    return major > want_major || (major == want_major && minor >= want_minor);
  }
};

}  // namespace hangscope::python
