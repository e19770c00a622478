#include "hangscope/elf/module_files.h"

namespace hangscope::elf {

std::vector<FileCandidate> ProcFiles::candidates(const proc::Mapping& mapping) const {
  return {{fs_.map_files_path(mapping), Links::kFollow, ""},
          {fs_.path_in_root(mapping.path), Links::kRefuse, ""}};
}

std::vector<std::string> ProcFiles::debug_roots() const {
  return {fs_.dir() + "/root", ""};
}

namespace {

std::string under(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

// A path from a core that stays where it says: absolute, no "." or ".." component.
bool plain_absolute_path(const std::string& path) {
  if (path.empty() || path.front() != '/') return false;
  std::size_t at = 1;
  while (at <= path.size()) {
    auto end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    const std::string_view part(path.data() + at, end - at);
    if (part == "." || part == "..") return false;
    at = end + 1;
  }
  return true;
}

}  // namespace

std::vector<FileCandidate> SysrootFiles::candidates(const proc::Mapping& mapping) const {
  if (!executable_.empty() && mapping.path == core_executable_) {
    return {{executable_, Links::kFollow, ""}};  // --exe: the user's path
  }
  const std::string path = under(sysroot_, mapping.path);
  if (!plain_absolute_path(mapping.path)) {
    return {{path, Links::kRefuse,
             "the core names it by a path that is not absolute or holds '.' or '..': not opened"}};
  }
  return {{path, Links::kRefuse, ""}};
}

std::vector<std::string> SysrootFiles::debug_roots() const {
  if (sysroot_.empty() || sysroot_ == "/") return {""};
  return {under(sysroot_, ""), ""};
}

std::string SysrootFiles::missing_hint() const {
  return sysroot_.empty() ? "give --sysroot DIR with the machine's files, or --exe for the program"
                          : "not under --sysroot " + sysroot_;
}

}  // namespace hangscope::elf
