// A CPython version as hangscope needs it: major.minor selects the layout, the rest is shown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hangscope::python {

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
