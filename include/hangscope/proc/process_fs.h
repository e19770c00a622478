// Access to one process's /proc directory: its threads, their stat/status/wchan, and its files.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "hangscope/proc/maps.h"
#include "hangscope/proc/task_stat.h"

namespace hangscope::proc {

// The entries of a directory whose names are numbers (pids in /proc, tids in /proc/PID/task),
// ascending; nullopt with errno in *error when the directory cannot be read.
std::optional<std::vector<pid_t>> list_numeric_entries(const std::string& dir,
                                                       int* error = nullptr);

class ProcessFs {
 public:
  explicit ProcessFs(pid_t pid);

  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }

  // Thread ids in /proc/PID/task, ascending; nullopt with errno in *error when unreadable.
  std::optional<std::vector<pid_t>> list_tasks(int* error = nullptr) const;

  std::optional<TaskStat> task_stat(pid_t tid) const;
  std::optional<TaskStatus> task_status(pid_t tid) const;
  // The kernel function a sleeping thread waits in; empty when none or unreadable.
  std::string task_wchan(pid_t tid) const;
  // The kernel stack of a thread (/proc/.../stack, root only); empty when unreadable.
  std::vector<std::string> task_kernel_stack(pid_t tid) const;

  // Path through which a file of the process's mount namespace can be opened.
  std::string path_in_root(const std::string& path) const;
  // /proc/PID/map_files/START-END: opens a mapped file even when deleted.
  std::string map_files_path(const Mapping& mapping) const;

 private:
  std::string task_dir(pid_t tid) const;

  pid_t pid_;
  std::string dir_;
};

}  // namespace hangscope::proc
