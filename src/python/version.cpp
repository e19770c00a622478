#include "hangscope/python/version.h"

#include <charconv>

namespace hangscope::python {

std::string supported_versions() {
  return "3." + std::to_string(kOldestMinor) + " to 3." + std::to_string(kNewestMinor);
}

PythonVersion PythonVersion::from_hex(std::uint64_t hex) {
  PythonVersion v;
  v.hex = static_cast<std::uint32_t>(hex);
  v.major = static_cast<int>((hex >> 24) & 0xff);
  v.minor = static_cast<int>((hex >> 16) & 0xff);
  v.micro = static_cast<int>((hex >> 8) & 0xff);
  return v;
}

std::optional<PythonVersion> PythonVersion::from_file_name(std::string_view path) {
  const auto slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (std::string_view prefix : {"libpython", "python"}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    name.remove_prefix(prefix.size());
    PythonVersion v;
    auto r = std::from_chars(name.data(), name.data() + name.size(), v.major);
    if (r.ec != std::errc() || r.ptr == name.data() + name.size() || *r.ptr != '.')
      return std::nullopt;
    const char* minor_at = r.ptr + 1;
    r = std::from_chars(minor_at, name.data() + name.size(), v.minor);
    if (r.ec != std::errc() || (v.major != 3 && v.major != 2)) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

std::string PythonVersion::to_string() const {
  std::string text = std::to_string(major) + "." + std::to_string(minor);
  if (hex != 0) text += "." + std::to_string(micro);
  return text;
}

}  // namespace hangscope::python
