// Where the files mapped into a target are opened from: a live process's /proc, or a directory
// tree standing in for the machine a core file was written on.
#pragma once

#include <string>
#include <vector>

#include "hangscope/common/files.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"

namespace hangscope::elf {

// A local path to try for a mapped file, and whether a symbolic link there is followed.
struct FileCandidate {
  std::string path;
  Links links = Links::kRefuse;  // kFollow only for the kernel's links and the user's paths
  std::string refusal;           // set: not opened, for this reason
};

class ModuleFiles {
 public:
  virtual ~ModuleFiles() = default;
  // Local paths to try, in order, for the file behind `mapping`.
  virtual std::vector<FileCandidate> candidates(const proc::Mapping& mapping) const = 0;
  // Roots under which debug files (ROOT/usr/lib/debug/…) are looked for.
  virtual std::vector<std::string> debug_roots() const = 0;
  // What a user can do about a file that could not be opened ("" when nothing).
  virtual std::string missing_hint() const { return {}; }
};

// A live process: /proc/PID/map_files (the mapped inode itself, even deleted; the kernel's link,
// followed), then the path through the process's root (its mount namespace; a symbolic link
// there is refused).
class ProcFiles final : public ModuleFiles {
 public:
  explicit ProcFiles(proc::ProcessFs fs) : fs_(std::move(fs)) {}
  std::vector<FileCandidate> candidates(const proc::Mapping& mapping) const override;
  std::vector<std::string> debug_roots() const override;

 private:
  proc::ProcessFs fs_;
};

// A core file's process: each path under `sysroot` ("" or "/": this machine's files), and the
// executable from `executable` when one is given (a copy kept elsewhere). The paths come from the
// core (NT_FILE): a symbolic link as the last component is refused, and a path that is not
// absolute or climbs with ".." is not opened.
class SysrootFiles final : public ModuleFiles {
 public:
  SysrootFiles(std::string sysroot, std::string core_executable, std::string executable)
      : sysroot_(std::move(sysroot)),
        core_executable_(std::move(core_executable)),
        executable_(std::move(executable)) {}
  std::vector<FileCandidate> candidates(const proc::Mapping& mapping) const override;
  std::vector<std::string> debug_roots() const override;
  std::string missing_hint() const override;

 private:
  std::string sysroot_;
  std::string core_executable_;  // the executable's path as the core names it
  std::string executable_;       // --exe
};

}  // namespace hangscope::elf
