#include "hangscope/proc/process_fs.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>

#include "hangscope/common/files.h"

namespace hangscope::proc {

ProcessFs::ProcessFs(pid_t pid) : pid_(pid), dir_("/proc/" + std::to_string(pid)) {}

std::string ProcessFs::task_dir(pid_t tid) const {
  return dir_ + "/task/" + std::to_string(tid);
}

std::optional<std::vector<pid_t>> list_numeric_entries(const std::string& path, int* error) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) {
    if (error) *error = errno;
    return std::nullopt;
  }
  std::vector<pid_t> ids;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    pid_t id = 0;
    const auto result = std::from_chars(name.data(), name.data() + name.size(), id);
    if (result.ec == std::errc() && result.ptr == name.data() + name.size()) ids.push_back(id);
  }
  ::closedir(dir);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::optional<std::vector<pid_t>> ProcessFs::list_tasks(int* error) const {
  return list_numeric_entries(dir_ + "/task", error);
}

std::optional<TaskStat> ProcessFs::task_stat(pid_t tid) const {
  const auto read = read_proc_file(task_dir(tid) + "/stat", 4096);
  if (!read.text) return std::nullopt;
  return parse_task_stat(*read.text);
}

std::optional<TaskStatus> ProcessFs::task_status(pid_t tid) const {
  const auto read = read_proc_file(task_dir(tid) + "/status", 65536);
  if (!read.text) return std::nullopt;
  return parse_task_status(*read.text);
}

std::string ProcessFs::task_wchan(pid_t tid) const {
  const auto read = read_proc_file(task_dir(tid) + "/wchan", 256);
  if (!read.text || *read.text == "0") return {};
  return *read.text;
}

std::vector<std::string> ProcessFs::task_kernel_stack(pid_t tid) const {
  std::vector<std::string> frames;
  const auto read = read_proc_file(task_dir(tid) + "/stack", 65536);
  if (!read.text) return frames;
  std::size_t pos = 0;
  const std::string& text = *read.text;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    // "[<0>] do_wait+0x1c/0x2f0": keep the symbol part.
    const auto bracket = line.find("] ");
    if (bracket != std::string::npos) line = line.substr(bracket + 2);
    if (!line.empty()) frames.push_back(std::move(line));
  }
  return frames;
}

std::string ProcessFs::path_in_root(const std::string& path) const {
  return dir_ + "/root" + path;
}

std::string ProcessFs::map_files_path(const Mapping& mapping) const {
  char range[64];
  std::snprintf(range, sizeof range, "%llx-%llx", static_cast<unsigned long long>(mapping.start),
                static_cast<unsigned long long>(mapping.end));
  return dir_ + "/map_files/" + range;
}

}  // namespace hangscope::proc
