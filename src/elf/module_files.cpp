#include "hangscope/elf/module_files.h"

namespace hangscope::elf {

std::vector<std::string> ProcFiles::candidates(const proc::Mapping& mapping) const {
  return {fs_.map_files_path(mapping), fs_.path_in_root(mapping.path)};
}

std::vector<std::string> ProcFiles::debug_roots() const {
  return {fs_.dir() + "/root", ""};
}

namespace {

std::string under(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

}  // namespace

std::vector<std::string> SysrootFiles::candidates(const proc::Mapping& mapping) const {
  if (!executable_.empty() && mapping.path == core_executable_) return {executable_};
  return {under(sysroot_, mapping.path)};
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
